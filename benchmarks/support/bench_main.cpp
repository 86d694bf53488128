/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// main() of every rmm-next benchmark: without a usable CUDA device it prints one line,
// "benchmark needs a CUDA device: <reason>", and exits 1. Otherwise it records the GPU, driver and
// runtime in the benchmark context, runs the deferred registrations and then Google Benchmark.

#include "bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <string>

namespace {

std::string version_string(int version)
{
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

void add_device_context()
{
  int device{};
  rmm_next_bench::check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  rmm_next_bench::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int driver{};
  int runtime{};
  rmm_next_bench::check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  rmm_next_bench::check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  benchmark::AddCustomContext("gpu_name", prop.name);
  benchmark::AddCustomContext("gpu_compute_capability",
                              std::to_string(prop.major) + "." + std::to_string(prop.minor));
  benchmark::AddCustomContext("cuda_driver_api_version", version_string(driver));
  benchmark::AddCustomContext("cuda_runtime_version", version_string(runtime));
}

}  // namespace

int main(int argc, char** argv)
{
  int device_count{};
  cudaError_t const status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    std::fprintf(
      stderr,
      "benchmark needs a CUDA device: %s\n",
      status != cudaSuccess
        ? (std::string{cudaGetErrorName(status)} + ": " + cudaGetErrorString(status)).c_str()
        : "no CUDA device is visible");
    return 1;
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) { return 1; }
  try {
    add_device_context();
    for (auto const fn : rmm_next_bench::registrations()) {
      fn();
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "benchmark setup failed: %s\n", e.what());
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
