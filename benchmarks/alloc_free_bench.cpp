/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Latency of one stream-ordered allocate + free pair, for each resource and size, by four routes
// to the same driver pool:
//   raw      cudaMallocFromPoolAsync(pool_handle()) + cudaFreeAsync
//   resource resource.allocate(stream, n) + resource.deallocate(stream, p, n)
//   ref      the same through a resource ref bound to the resource
//   current  get_current_device_resource_ref() (set to the resource), as RMM-style code does
//
// Two families:
//   alloc_free/<resource>/<variant>/<bytes>         one pair per iteration; run with
//       --benchmark_repetitions and --benchmark_enable_random_interleaving so that the variants
//       interleave, and compare medians.
//   alloc_free_paired/<resource>/<variant>/<bytes>  each iteration times a block of raw pairs
//       and a block of wrapped pairs back to back (order alternating); counters raw_ns,
//       wrapped_ns (medians over blocks, per pair) and ratio = wrapped_ns / raw_ns.
//
// Every variant synchronizes its stream after the same number of pairs, so none piles up frees,
// and every run starts from a trimmed pool (reset_shared_pools), whatever ran before it.

#include "support/bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace rmm_next_bench;

enum class variant { raw, resource, ref, current };

char const* name_of(variant v)
{
  switch (v) {
    case variant::raw: return "raw";
    case variant::resource: return "resource";
    case variant::ref: return "ref";
    case variant::current: return "current";
  }
  return "?";
}

/** @brief A callable doing one alloc+free pair of `bytes` on `stream` by route `v`. */
template <class Resource, class Fn>
void with_pair(variant v, Resource& resource, Fn&& fn)
{
  using ref_type = typename resource_traits<Resource>::ref;
  switch (v) {
    case variant::raw: {
      cudaMemPool_t const pool = resource.pool_handle();
      fn([pool](std::size_t bytes, cudaStream_t stream) {
        check(raw_pair(pool, bytes, stream), "cudaMallocFromPoolAsync/cudaFreeAsync");
      });
      return;
    }
    case variant::resource:
      fn([&resource](std::size_t bytes, cudaStream_t stream) {
        wrapped_pair(resource, bytes, stream);
      });
      return;
    case variant::ref: {
      ref_type ref{resource};
      fn([&ref](std::size_t bytes, cudaStream_t stream) { wrapped_pair(ref, bytes, stream); });
      return;
    }
    case variant::current: {
      scoped_current_resource const current{resource};
      fn([](std::size_t bytes, cudaStream_t stream) {
        auto ref = rmm_next::get_current_device_resource_ref();
        wrapped_pair(ref, bytes, stream);
      });
      return;
    }
  }
}

/** @brief One pair per iteration. */
template <class Resource>
void alloc_free(benchmark::State& state, Resource* resource, variant v, std::size_t bytes)
{
  guarded(state, [&] {
    cudaStream_t const stream = thread_stream(0);
    with_pair(v, *resource, [&](auto pair) { timed_pairs(state, pair, bytes, stream); });
  });
}

constexpr int paired_iterations = 200;

/** @brief Blocks of raw and wrapped pairs, alternating; reports the ratio of their medians. */
template <class Resource>
void alloc_free_paired(benchmark::State& state, Resource* resource, variant v, std::size_t bytes)
{
  guarded(state, [&] {
    cudaStream_t const stream = thread_stream(0);
    with_pair(variant::raw, *resource, [&](auto raw) {
      with_pair(
        v, *resource, [&](auto wrapped) { paired_blocks(state, stream, bytes, raw, wrapped); });
    });
  });
}

void register_all()
{
  std::vector<variant> const variants{
    variant::raw, variant::resource, variant::ref, variant::current};

  for_each_resource([&](auto& resource) {
    using resource_type = std::remove_reference_t<decltype(resource)>;
    std::string const rname{resource_traits<resource_type>::name};
    for (std::size_t const bytes : latency_sizes()) {
      for (variant const v : variants) {
        std::string const suffix = rname + "/" + name_of(v) + "/" + std::to_string(bytes);
        benchmark::RegisterBenchmark(
          ("alloc_free/" + suffix).c_str(), &alloc_free<resource_type>, &resource, v, bytes)
          ->UseRealTime()
          ->MinTime(min_time())
          ->Unit(benchmark::kNanosecond)
          ->ComputeStatistics("min", &fastest)  // for thread_scaling's 1-thread check
          ->Setup(&reset_shared_pools);
        if (v != variant::raw) {
          benchmark::RegisterBenchmark(("alloc_free_paired/" + suffix).c_str(),
                                       &alloc_free_paired<resource_type>,
                                       &resource,
                                       v,
                                       bytes)
            ->UseRealTime()
            ->Iterations(paired_iterations)
            ->Unit(benchmark::kMicrosecond)
            ->Setup(&reset_shared_pools);
        }
      }
    }
  });
}

register_at_start const registration{&register_all};

}  // namespace
