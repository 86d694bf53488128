/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Run under compute-sanitizer by run_sanitizer.sh: allocates with each async resource (stream-
// ordered and synchronous), lets a kernel write the memory and frees it, so that every NVTX call
// the resources make reaches the sanitizer. Exits 77 without a usable device.

#include "gpu_check.hpp"
#include "kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace {

bool ok(cudaError_t status, char const* what)
{
  if (status != cudaSuccess) { std::printf("%s: %s\n", what, cudaGetErrorString(status)); }
  return status == cudaSuccess;
}

template <class Resource>
bool exercise(Resource& r, cudaStream_t stream)
{
  constexpr std::size_t bytes = std::size_t{1} << 20;
  constexpr std::size_t words = bytes / sizeof(std::uint32_t);
  using rmm_next::test::block_size;
  using rmm_next::test::grid_for;
  for (int i = 0; i < 4; ++i) {
    auto* p = static_cast<std::uint32_t*>(r.allocate(stream, bytes));
    rmm_next::test::fill_kernel<<<grid_for(words), block_size, 0, stream>>>(p, words, 1U);
    if (!ok(cudaGetLastError(), "fill_kernel")) { return false; }
    r.deallocate(stream, p, bytes);
    void* q = r.allocate_sync(4096);
    r.deallocate_sync(q, 4096);
  }
  return ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (!ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) {
    return 1;
  }
  bool good = true;
  {
    rmm_next::async_device_resource current;
    rmm_next::async_device_resource owned{rmm_next::pool_options{}};
    rmm_next::async_pinned_resource pinned;
    good = exercise(current, stream) && exercise(owned, stream) && exercise(pinned, stream);
    try {
      rmm_next::async_managed_resource managed;
      good = good && exercise(managed, stream);
    } catch (rmm_next::not_supported const& e) {
      std::printf("managed pools not supported here: %s\n", e.what());
    }
  }
  good = ok(cudaStreamDestroy(stream), "cudaStreamDestroy") && good;
  std::printf("%s\n", good ? "done" : "FAILED");
  return good ? 0 : 1;
}
