/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// What a cache hit is made of: each piece of the segment cache's and the thread cache's hot path
// timed alone, on one thread, beside the whole pair, in one program, so that their sum can be read
// against the pair. Real time per call (per pair for the pairs):
//
//   hit_path/is_capturing/<stream>      stream_is_eager (cuStreamIsCapturing)
//   hit_path/stream_lane/<stream>       stream_lane: cuStreamGetId for a made stream; a
//                                       thread-local read for the legacy stream
//   hit_path/capture_info/<stream>      capture_of (cuStreamGetCaptureInfo), which the plugin
//                                       asks on every allocation and free
//   hit_path/relaxed_mode               a relaxed_capture_mode scope, which the plugin makes
//                                       around every allocation and free: two
//                                       cuThreadExchangeStreamCaptureMode calls
//   hit_path/relaxed_mode_runtime       the same through the runtime's
//                                       cudaThreadExchangeStreamCaptureMode
//   hit_path/mutex                      an uncontended std::mutex lock + unlock
//   hit_path/<piece>_cold/...           each piece above (but the runtime's relaxed mode) with the
//                                       host's caches cold before each call (`cold_caches`), the
//                                       call alone timed
//   hit_path/segment_cache/<stream>     a segment_cache_adaptor pair of 4 KiB (every pair a hit)
//   hit_path/thread_cache/<stream>      a thread_cache_adaptor pair of 4 KiB
//   hit_path/segment_cache_cold/<stream>, hit_path/thread_cache_cold/<stream>
//                                       the same pairs with the host's caches cold (other data
//                                       written between pairs: a cold timed_pairs), the pair alone
//                                       timed: what a hit costs amid a program's own host work
//   hit_path/segment_cache_vouched[_cold]/<stream>
//                                       the segment cache's pair with its stream vouched for as
//                                       eager (detail::eager_stream_scope, as the plugin does):
//                                       the cache without its capture queries
//   hit_path/raw_pool[_cold]/<stream>   cudaMallocFromPoolAsync + cudaFreeAsync on the current pool
//   hit_path/<cache>_hit/<stream>, hit_path/<cache>_free/<stream>
//                                       one allocation alone (every one a hit), and one free alone:
//                                       each iteration allocates `burst` blocks of 4 KiB and frees
//                                       them, and times only the allocations (`_hit`) or only the
//                                       frees (`_free`); the time reported is per call. <cache>:
//                                       segment_cache, thread_cache, raw_pool (the driver's call),
//                                       thread_over_segment_cache (a thread cache in front of the
//                                       segment cache: its pairs too)
//
// <stream>: made (a stream the program made) or legacy (cudaStreamLegacy, PyTorch's default).

#include "support/bench_support.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>

namespace {

using namespace rmm_next_bench;
using rmm_next::async_device_resource;

constexpr std::size_t pair_bytes = 4096;

/** @brief The two streams every variant runs on. */
std::pair<char const*, cudaStream_t> const streams[] = {{"made", nullptr},
                                                        {"legacy", cudaStreamLegacy}};

cudaStream_t resolve(cudaStream_t s) { return s == nullptr ? thread_stream(0) : s; }

/** @brief `fn` on each stream; `manual`: the benchmark times itself (SetIterationTime), a fixed
 * `cold_iterations`. */
template <class Fn>
void register_on_streams(std::string const& what, Fn fn, bool manual = false)
{
  for (auto const& [name, handle] : streams) {
    auto* const b = benchmark::RegisterBenchmark(
      ("hit_path/" + what + "/" + name).c_str(), [fn, handle](benchmark::State& state) {
        guarded(state, [&] { fn(state, resolve(handle)); });
      });
    timed_as(b, manual);
  }
}

/** @brief `hit_path/<what>`: `call()` per iteration; and `hit_path/<what>_cold`, each call after
 * the host's caches went cold. */
template <class Call>
void register_piece(std::string const& what, Call call)
{
  timed_as(benchmark::RegisterBenchmark(("hit_path/" + what).c_str(),
                                        [call](benchmark::State& state) {
                                          for (auto _ : state) {
                                            call();
                                          }
                                        }),
           false);
  timed_as(benchmark::RegisterBenchmark(("hit_path/" + what + "_cold").c_str(),
                                        [call](benchmark::State& state) {
                                          cold_caches caches;
                                          for (auto _ : state) {
                                            caches.step(state, call);
                                          }
                                        }),
           true);
}

/** @brief `register_piece` on each stream: `call(stream)`. */
template <class Call>
void register_piece_on_streams(std::string const& what, Call call)
{
  for (auto const& [name, handle] : streams) {
    register_piece(what + "/" + name, [call, handle] { call(resolve(handle)); });
  }
}

/** @brief Pairs of `pair_bytes` through `r`; `cold`: with the host's caches cold between them. */
template <class Resource>
void resource_pairs(benchmark::State& state, Resource& r, cudaStream_t stream, bool cold = false)
{
  timed_pairs(
    state,
    [&r](std::size_t bytes, cudaStream_t s) { wrapped_pair(r, bytes, s); },
    pair_bytes,
    stream,
    cold);
}

/** @brief Blocks per burst of the `_hit` and `_free` benchmarks. */
constexpr std::size_t burst = 64;
/** @brief Bursts per run: a fixed count, since the manual time (one call of a burst) is a small
 * part of an iteration's real time, and Google Benchmark would run to a minimum of the former. */
constexpr benchmark::IterationCount burst_iterations = 20000;

/**
 * @brief `burst` allocations of `pair_bytes` through `alloc`, then their frees through `free`,
 * per iteration; the manual time of one call of the half `timed_frees` names, averaged over the
 * burst. The blocks are all hits after the untimed warm-up burst.
 */
template <class Alloc, class Free>
void burst_calls(
  benchmark::State& state, Alloc alloc, Free free, cudaStream_t stream, bool timed_frees)
{
  std::array<void*, burst> ptrs{};
  auto const run = [&](benchmark::State* timed) {
    auto const t0 = std::chrono::steady_clock::now();
    for (void*& p : ptrs) {
      p = alloc(stream);
    }
    auto const t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(ptrs.data());
    for (void* p : ptrs) {
      free(stream, p);
    }
    auto const t2 = std::chrono::steady_clock::now();
    if (timed != nullptr) {
      auto const spent = timed_frees ? t2 - t1 : t1 - t0;
      timed->SetIterationTime(std::chrono::duration<double>(spent).count() /
                              static_cast<double>(burst));
    }
  };
  run(nullptr);
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::size_t n = 0;
  for (auto _ : state) {
    run(&state);
    if (++n == pairs_per_sync / burst) {
      n = 0;
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  state.SetItemsProcessed(state.iterations());
}

/** @brief `hit_path/<what>_hit/<stream>` and `hit_path/<what>_free/<stream>` (burst_calls). */
template <class Alloc, class Free>
void register_bursts(std::string const& what, Alloc alloc, Free free)
{
  for (bool const frees : {false, true}) {
    for (auto const& [name, handle] : streams) {
      benchmark::RegisterBenchmark(
        ("hit_path/" + what + (frees ? "_free/" : "_hit/") + name).c_str(),
        [alloc, free, handle, frees](benchmark::State& state) {
          guarded(state, [&] { burst_calls(state, alloc, free, resolve(handle), frees); });
        })
        ->UseManualTime()
        ->Iterations(burst_iterations)
        ->Unit(benchmark::kNanosecond);
    }
  }
}

/** @brief `register_bursts` through resource `r`. */
template <class Resource>
void register_resource_bursts(std::string const& what, Resource& r)
{
  register_bursts(
    what,
    [&r](cudaStream_t s) {
      return r.allocate(cuda::stream_ref{s}, pair_bytes, rmm_next::default_alignment);
    },
    [&r](cudaStream_t s, void* p) {
      r.deallocate(cuda::stream_ref{s}, p, pair_bytes, rmm_next::default_alignment);
    });
}

void register_all()
{
  auto* device = shared_resource<async_device_resource>();
  if (device == nullptr) { return; }
  static rmm_next::segment_cache_adaptor<async_device_resource> segment_cache{*device};
  static rmm_next::thread_cache_adaptor<async_device_resource> thread_cache{*device};
  // In front of the segment cache above (a copy shares its state).
  static rmm_next::thread_cache_adaptor<rmm_next::segment_cache_adaptor<async_device_resource>>
    thread_over_segment_cache{segment_cache};

  register_piece_on_streams("is_capturing", [](cudaStream_t s) {
    benchmark::DoNotOptimize(rmm_next::detail::stream_is_eager(s));
  });
  register_piece_on_streams("stream_lane", [](cudaStream_t s) {
    benchmark::DoNotOptimize(rmm_next::detail::stream_lane(s));
  });
  register_piece_on_streams("capture_info", [](cudaStream_t s) {
    benchmark::DoNotOptimize(rmm_next::detail::capture_of(s));
  });
  register_piece("relaxed_mode", [] {
    rmm_next::detail::relaxed_capture_mode const relaxed;
    benchmark::ClobberMemory();
  });
  benchmark::RegisterBenchmark("hit_path/relaxed_mode_runtime",
                               [](benchmark::State& state) {
                                 for (auto _ : state) {
                                   cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
                                   (void)cudaThreadExchangeStreamCaptureMode(&mode);
                                   benchmark::ClobberMemory();
                                   (void)cudaThreadExchangeStreamCaptureMode(&mode);
                                 }
                               })
    ->UseRealTime()
    ->Unit(benchmark::kNanosecond);
  static std::mutex m;
  register_piece("mutex", [] {
    m.lock();
    benchmark::ClobberMemory();
    m.unlock();
  });
  register_on_streams("segment_cache", [](benchmark::State& state, cudaStream_t s) {
    resource_pairs(state, segment_cache, s);
  });
  register_on_streams("thread_cache", [](benchmark::State& state, cudaStream_t s) {
    resource_pairs(state, thread_cache, s);
  });
  register_on_streams(
    "segment_cache_cold",
    [](benchmark::State& state, cudaStream_t s) { resource_pairs(state, segment_cache, s, true); },
    true);
  register_on_streams("segment_cache_vouched", [](benchmark::State& state, cudaStream_t s) {
    rmm_next::detail::eager_stream_scope const eager{s};
    resource_pairs(state, segment_cache, s);
  });
  register_on_streams(
    "segment_cache_vouched_cold",
    [](benchmark::State& state, cudaStream_t s) {
      rmm_next::detail::eager_stream_scope const eager{s};
      resource_pairs(state, segment_cache, s, true);
    },
    true);
  register_on_streams(
    "thread_cache_cold",
    [](benchmark::State& state, cudaStream_t s) { resource_pairs(state, thread_cache, s, true); },
    true);
  register_resource_bursts("segment_cache", segment_cache);
  register_resource_bursts("thread_cache", thread_cache);
  register_on_streams("thread_over_segment_cache", [](benchmark::State& state, cudaStream_t s) {
    resource_pairs(state, thread_over_segment_cache, s);
  });
  register_resource_bursts("thread_over_segment_cache", thread_over_segment_cache);
  register_bursts(
    "raw_pool",
    [](cudaStream_t s) {
      void* ptr{};
      check(cudaMallocAsync(&ptr, pair_bytes, s), "cudaMallocAsync");
      return ptr;
    },
    [](cudaStream_t s, void* p) { check(cudaFreeAsync(p, s), "cudaFreeAsync"); });
  for (bool const cold : {false, true}) {
    register_on_streams(
      cold ? "raw_pool_cold" : "raw_pool",
      [cold](benchmark::State& state, cudaStream_t s) {
        int device = 0;
        check(cudaGetDevice(&device), "cudaGetDevice");
        cudaMemPool_t pool{};
        check(cudaDeviceGetMemPool(&pool, device), "cudaDeviceGetMemPool");
        timed_pairs(
          state,
          [pool](std::size_t bytes, cudaStream_t st) {
            check(raw_pair(pool, bytes, st), "raw pair");
          },
          pair_bytes,
          s,
          cold);
      },
      cold);
  }
}

register_at_start const registration{&register_all};

}  // namespace
