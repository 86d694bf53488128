/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// What the NVTX annotations cost when no tool is attached: stream-ordered allocate + deallocate
// pairs of 256 B through async_device_resource, compiled with NVTX (this file) and without it
// (nvtx_bench_off.cpp, built with RMM_NEXT_DISABLE_NVTX into the same program).
//
//   nvtx/device/256   each iteration times a block of pairs with NVTX and a block without, back to
//                     back (order alternating); counters on_ns and off_ns (medians over blocks,
//                     per pair), ratio = on_ns / off_ns and nvtx_ns = on_ns - off_ns.
//
// Run without NVTX_INJECTION64_PATH (no profiler): under a tool the ranges and region names are
// recorded and cost what the tool makes them cost. The benchmark's label says which it was.

#include "nvtx_bench_pairs.hpp"
#include "support/bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <vector>

static_assert(rmm_next::detail::nvtx_enabled, "nvtx_bench.cpp needs NVTX compiled in");

namespace rmm_next_bench {

/** @brief Defined in nvtx_bench_off.cpp: `count` pairs with NVTX compiled out. */
void pairs_nvtx_off(rmm_next::async_device_resource& resource,
                    std::size_t bytes,
                    cudaStream_t stream,
                    std::size_t count);

/** @brief `count` pairs with NVTX compiled in (the loop of pairs_nvtx_off). */
[[gnu::noinline]] void pairs_nvtx_on(rmm_next::async_device_resource& resource,
                                     std::size_t bytes,
                                     cudaStream_t stream,
                                     std::size_t count)
{
  allocate_free_pairs(resource, bytes, stream, count);
}

namespace {

constexpr std::size_t pairs_per_block = 128;
constexpr int iterations              = 400;

void nvtx_overhead(benchmark::State& state,
                   rmm_next::async_device_resource* resource,
                   std::size_t bytes)
{
  guarded(state, [&] {
    cudaStream_t const stream = thread_stream(0);
    using clock               = std::chrono::steady_clock;
    auto block                = [&](auto pairs) {
      auto const start = clock::now();
      pairs(*resource, bytes, stream, pairs_per_block);
      auto const stop = clock::now();
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // not timed
      return std::chrono::duration<double, std::nano>(stop - start).count() /
             static_cast<double>(pairs_per_block);
    };
    block(&pairs_nvtx_on);  // warm-up: NVTX initialization, pool growth
    block(&pairs_nvtx_off);
    std::vector<double> on_ns;
    std::vector<double> off_ns;
    bool on_first = true;
    for (auto _ : state) {
      if (on_first) {
        on_ns.push_back(block(&pairs_nvtx_on));
        off_ns.push_back(block(&pairs_nvtx_off));
      } else {
        off_ns.push_back(block(&pairs_nvtx_off));
        on_ns.push_back(block(&pairs_nvtx_on));
      }
      on_first = !on_first;
    }
    double const on           = median(on_ns);
    double const off          = median(off_ns);
    state.counters["on_ns"]   = on;
    state.counters["off_ns"]  = off;
    state.counters["nvtx_ns"] = on - off;
    state.counters["ratio"]   = off > 0.0 ? on / off : 0.0;
    state.SetLabel(std::getenv("NVTX_INJECTION64_PATH") != nullptr ? "NVTX tool attached"
                                                                   : "no NVTX tool");
  });
}

void register_all()
{
  auto* resource = shared_resource<rmm_next::async_device_resource>();
  if (resource == nullptr) { return; }
  benchmark::RegisterBenchmark("nvtx/device/256", &nvtx_overhead, resource, std::size_t{256})
    ->UseRealTime()
    ->Iterations(iterations)
    ->Unit(benchmark::kMicrosecond);
}

register_at_start const registration{&register_all};

}  // namespace
}  // namespace rmm_next_bench
