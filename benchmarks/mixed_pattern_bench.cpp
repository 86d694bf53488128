/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Mixed sizes from several threads (issue 8): each thread keeps 64 live blocks of 256 B to 64 KiB
// and each iteration frees a random one and allocates a new random size in its place (see
// support/mixed_pattern.hpp). items_per_second: alloc+free pairs per second over all threads.
//
// mixed_pattern/<layout>/<peer>/real_time/threads:<n>, n = 1, 2, 4, 8, 16; layout:
//   own_stream     each thread its own non-blocking stream
//   shared_stream  one stream shared by all threads
//   four_streams   4 streams per thread; block i is allocated and freed on stream i % 4
// peer (this file; mixed_pattern_rmm_peers.cpp adds RMM's in mixed_pattern_rmm_bench):
//   raw                    cudaMallocFromPoolAsync / cudaFreeAsync on the device's current pool
//   async_device_resource  rmm_next::async_device_resource on that pool
//   thread_cache           rmm_next::thread_cache_adaptor<async_device_resource>, default options
//   thread_cache_no_capture  the same with detect_capture = false
//   thread_cache_graph_live  thread_cache while one block it allocated during a stream capture
//                            (graph memory, which it must never cache) is alive
//   segment_cache          rmm_next::segment_cache_adaptor<async_device_resource>, default options
//   thread_over_segment_cache  thread_cache_adaptor in front of segment_cache, default options
// Every thread synchronizes its streams every 4096 pairs and at the end.
//
// Counters: peak_in_use_bytes (the bytes the threads held, summed over each thread's peak),
// peak_reserved_bytes (the pool's ReservedMemHigh over the run: device memory it mapped),
// peak_pool_used_bytes (the pool's UsedMemHigh: what it handed out, thread caches included);
// thread_cache and segment_cache also hit_rate (hits / allocations over the run). Each run starts
// from a trimmed pool, an empty cache and reset high-water marks (Setup, not timed).

#include "support/bench_support.hpp"
#include "support/mixed_pattern.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace {

using namespace rmm_next_bench;

/** @brief The driver calls themselves, on the pool async_device_resource uses. */
struct raw_peer : mixed::driver_pool_memory<raw_peer> {
  static constexpr char const* name = "raw";

  cudaMemPool_t pool_;

  static raw_peer* instance()
  {
    return mixed::made_once<raw_peer>(
      [] { return raw_peer{{}, rmm_next::async_device_resource{}.pool_handle()}; });
  }

  [[nodiscard]] cudaMemPool_t pool() const { return pool_; }
  void* allocate(cudaStream_t stream, std::size_t bytes)
  {
    void* ptr{};
    check(cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream), "cudaMallocFromPoolAsync");
    return ptr;
  }
  void deallocate(cudaStream_t stream, void* ptr, std::size_t) noexcept
  {
    (void)cudaFreeAsync(ptr, stream);
  }
};

/** @brief rmm_next::async_device_resource on the device's current pool. */
struct resource_peer : mixed::resource_calls<resource_peer>,
                       mixed::driver_pool_memory<resource_peer> {
  static constexpr char const* name = "async_device_resource";

  rmm_next::async_device_resource resource_;

  static resource_peer* instance()
  {
    return mixed::made_once<resource_peer>(
      [] { return resource_peer{{}, {}, rmm_next::async_device_resource{}}; });
  }

  rmm_next::async_device_resource& resource() { return resource_; }
  [[nodiscard]] cudaMemPool_t pool() const { return resource_.pool_handle(); }
};

/**
 * @brief The counters of a caching peer's run: the peaks of `pool`, and hit_rate (hits over the
 * allocations since `at_start`, the cache's statistics when the run began).
 */
template <class Cache, class Statistics>
void report_cache_run(benchmark::State& state,
                      cudaMemPool_t pool,
                      Cache& cache,
                      Statistics const& at_start)
{
  mixed::report_pool_peaks(state, pool);
  auto const now    = cache.statistics();
  auto const hits   = static_cast<double>(now.hits - at_start.hits);
  auto const allocs = hits + static_cast<double>(now.misses - at_start.misses) +
                      static_cast<double>(now.bypasses - at_start.bypasses);
  state.counters["hit_rate"] = allocs > 0 ? hits / allocs : 0.0;
}

/**
 * @brief rmm_next::thread_cache_adaptor over async_device_resource: default options, or with
 * `detect_capture = false` (no capture queries).
 */
template <bool DetectCapture, bool GraphLive = false>
struct thread_cache_peer : mixed::resource_calls<thread_cache_peer<DetectCapture, GraphLive>> {
  static constexpr char const* name = GraphLive       ? "thread_cache_graph_live"
                                      : DetectCapture ? "thread_cache"
                                                      : "thread_cache_no_capture";
  static constexpr bool caches      = true;  // a longer warm-up (mixed::warm_up_pairs)
  using adaptor = rmm_next::thread_cache_adaptor<rmm_next::async_device_resource>;

  adaptor cache;
  rmm_next::thread_cache_statistics at_start{};

  static thread_cache_peer* instance()
  {
    return mixed::made_once<thread_cache_peer>([] {
      rmm_next::thread_cache_options options;
      options.detect_capture = DetectCapture;
      thread_cache_peer peer{{}, adaptor{rmm_next::async_device_resource{}, options}};
      if constexpr (GraphLive) { peer.keep_a_graph_allocation(); }
      return peer;
    });
  }

  adaptor& resource() { return cache; }
  /** @brief Allocates once during a capture and keeps the block (and its graph) alive. */
  void keep_a_graph_allocation()
  {
    cudaStream_t stream{};
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    (void)cache.allocate(stream, 1000);  // graph memory, freed with the process
    cudaGraph_t graph{};
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  }
  void before_run()
  {
    cache.flush();  // every run starts with empty caches
    reset_pool(cache.upstream_resource().pool_handle());
    at_start = cache.statistics();
  }
  void after_run(benchmark::State& state)
  {
    report_cache_run(state, cache.upstream_resource().pool_handle(), cache, at_start);
  }
};

/** @brief rmm_next::segment_cache_adaptor over async_device_resource, default options. */
struct segment_cache_peer : mixed::resource_calls<segment_cache_peer> {
  static constexpr char const* name = "segment_cache";
  static constexpr bool caches      = true;
  using adaptor = rmm_next::segment_cache_adaptor<rmm_next::async_device_resource>;

  adaptor cache;
  rmm_next::segment_cache_statistics at_start{};

  static segment_cache_peer* instance()
  {
    return mixed::made_once<segment_cache_peer>(
      [] { return segment_cache_peer{{}, adaptor{rmm_next::async_device_resource{}}}; });
  }

  adaptor& resource() { return cache; }
  void before_run()
  {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    (void)cache.trim();  // every run starts with an empty cache
    reset_pool(cache.upstream_resource().pool_handle());
    at_start = cache.statistics();
  }
  void after_run(benchmark::State& state)
  {
    report_cache_run(state, cache.upstream_resource().pool_handle(), cache, at_start);
  }
};

/**
 * @brief rmm_next::thread_cache_adaptor in front of rmm_next::segment_cache_adaptor over
 * async_device_resource, default options: every size of this pattern is the thread cache's, and
 * what it takes and gives back comes from the segment cache. hit_rate is the thread cache's.
 */
struct thread_over_segment_cache_peer : mixed::resource_calls<thread_over_segment_cache_peer> {
  static constexpr char const* name = "thread_over_segment_cache";
  static constexpr bool caches      = true;
  using segments = rmm_next::segment_cache_adaptor<rmm_next::async_device_resource>;
  using adaptor  = rmm_next::thread_cache_adaptor<segments>;

  adaptor cache;
  rmm_next::thread_cache_statistics at_start{};

  static thread_over_segment_cache_peer* instance()
  {
    return mixed::made_once<thread_over_segment_cache_peer>([] {
      return thread_over_segment_cache_peer{{},
                                            adaptor{segments{rmm_next::async_device_resource{}}}};
    });
  }

  adaptor& resource() { return cache; }
  [[nodiscard]] cudaMemPool_t pool() const
  {
    return cache.upstream_resource().upstream_resource().pool_handle();
  }
  void before_run()
  {
    cache.flush();  // every run starts with empty caches
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    segments upstream = cache.upstream_resource();  // shares the cache's state
    (void)upstream.trim();
    reset_pool(pool());
    at_start = cache.statistics();
  }
  void after_run(benchmark::State& state) { report_cache_run(state, pool(), cache, at_start); }
};

void register_all()
{
  mixed::register_peer<raw_peer>();
  mixed::register_peer<resource_peer>();
  mixed::register_peer<thread_cache_peer<true>>();
  mixed::register_peer<thread_cache_peer<false>>();
  mixed::register_peer<thread_cache_peer<true, true>>();
  mixed::register_peer<segment_cache_peer>();
  mixed::register_peer<thread_over_segment_cache_peer>();
}

register_at_start const registration{&register_all};

}  // namespace
