/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Throughput of alloc+free pairs with 1, 2, 4, 8 and 16 threads sharing one resource (one pool),
// each thread on its own non-blocking stream. items_per_second is the total over all threads
// (pairs per second of wall-clock time).
//
// thread_scaling/<resource>/<variant>/<bytes>/real_time/threads:<n>, variant raw (the pool
// calls) or resource. Each run starts from a trimmed pool (reset_shared_pools), as alloc_free's
// do, so that the 1-thread runs measure what alloc_free/<resource>/<variant>/256 measures.

#include "support/bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace {

using namespace rmm_next_bench;

constexpr std::size_t bytes = 256;

template <class Resource>
void thread_scaling(benchmark::State& state, Resource* resource, bool raw)
{
  guarded(state, [&] {
    cudaStream_t const stream = thread_stream(state.thread_index());
    cudaMemPool_t const pool  = resource->pool_handle();
    auto pair                 = [&](std::size_t n, cudaStream_t s) {
      if (raw) {
        check(raw_pair(pool, n, s), "cudaMallocFromPoolAsync/cudaFreeAsync");
      } else {
        wrapped_pair(*resource, n, s);
      }
    };
    timed_pairs(state, pair, bytes, stream);  // alloc_free's loop
  });
}

void register_all()
{
  for_each_resource([&](auto& resource) {
    using resource_type = std::remove_reference_t<decltype(resource)>;
    for (bool const raw : {true, false}) {
      std::string const name = std::string{"thread_scaling/"} +
                               resource_traits<resource_type>::name + "/" +
                               (raw ? "raw" : "resource") + "/" + std::to_string(bytes);
      auto* b =
        benchmark::RegisterBenchmark(name.c_str(), &thread_scaling<resource_type>, &resource, raw);
      b->UseRealTime()->MinTime(min_time())->Unit(benchmark::kNanosecond);
      b->Setup(&reset_shared_pools);          // every run from an empty pool, as alloc_free's
      b->ComputeStatistics("min", &fastest);  // for the 1-thread check against alloc_free
      for (int threads = 1; threads <= max_threads; threads *= 2) {
        b->Threads(threads);
      }
    }
  });
}

register_at_start const registration{&register_all};

}  // namespace
