/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Helpers shared by rmm-next's benchmarks: deferred registration (benchmarks that touch CUDA are
// registered only after support/bench_main.cpp has found a device), streams, the three resources
// and the raw pool calls they are compared with.

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rmm_next_bench {

// ---- Deferred registration ---------------------------------------------------------------------

/** @brief A function that registers benchmarks; it may use CUDA. */
using registration = void (*)();

/** @brief The registrations to run once a device has been found. */
inline std::vector<registration>& registrations()
{
  static std::vector<registration> list;
  return list;
}

/**
 * @brief Queues `fn` (at static initialization) to run from main() after the device check.
 *
 * Usage, at namespace scope: `rmm_next_bench::register_at_start const reg{&register_all};`
 */
struct register_at_start {
  explicit register_at_start(registration fn) { registrations().push_back(fn); }
};

// ---- Settings -----------------------------------------------------------------------------------

/** @brief Per-repetition minimum time: `RMM_NEXT_BENCH_MIN_TIME` seconds, default 0.05. */
inline double min_time()
{
  static double const value = [] {
    char const* env = std::getenv("RMM_NEXT_BENCH_MIN_TIME");
    double const v  = env != nullptr ? std::atof(env) : 0.0;
    return v > 0.0 ? v : 0.05;
  }();
  return value;
}

/** @brief Alloc+free pairs between two stream synchronizations, the same for every variant. */
inline constexpr std::size_t pairs_per_sync = 4096;

/** @brief The allocation sizes of the latency benchmarks: 256 B, 64 KiB, 1 MiB. */
inline std::vector<std::size_t> const& latency_sizes()
{
  static std::vector<std::size_t> const sizes{256, std::size_t{64} << 10, std::size_t{1} << 20};
  return sizes;
}

// ---- CUDA helpers ------------------------------------------------------------------------------

/** @brief Throws `rmm_next::cuda_error` naming `what` when `status` is not success. */
inline void check(cudaError_t status, char const* what)
{
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw rmm_next::cuda_error{status,
                               std::string{what} + " failed: " + cudaGetErrorName(status) + " (" +
                                 cudaGetErrorString(status) + ")"};
  }
}

/** @brief An owned non-blocking stream. */
class stream {
 public:
  stream()
  {
    check(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  stream(stream const&)            = delete;
  stream& operator=(stream const&) = delete;
  ~stream() { (void)cudaStreamDestroy(handle_); }

  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  void synchronize() const { check(cudaStreamSynchronize(handle_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t handle_{};
};

/** @brief The most threads a benchmark runs with. */
inline constexpr int max_threads = 16;

/**
 * @brief The stream of benchmark thread `thread_index` (< max_threads), made once per process.
 * Destroyed at exit, before the CUDA runtime's own teardown (they are made after it starts).
 */
inline cudaStream_t thread_stream(int thread_index)
{
  static std::vector<stream> const streams(max_threads);
  return streams.at(static_cast<std::size_t>(thread_index)).get();
}

// ---- The resources under test -------------------------------------------------------------------

/** @brief What the benchmarks need to know about a resource type. */
template <class Resource>
struct resource_traits;

template <>
struct resource_traits<rmm_next::async_device_resource> {
  static constexpr char const* name = "device";
  using ref                         = rmm_next::device_async_resource_ref;
};

template <>
struct resource_traits<rmm_next::async_managed_resource> {
  static constexpr char const* name = "managed";
  using ref                         = rmm_next::host_device_async_resource_ref;
};

template <>
struct resource_traits<rmm_next::async_pinned_resource> {
  static constexpr char const* name = "pinned";
  using ref                         = rmm_next::host_device_async_resource_ref;
};

/**
 * @brief The process's default-constructed resource of type `Resource` (the current pool), or
 * nullptr with a note on stderr when the device or runtime lacks it.
 */
template <class Resource>
Resource* shared_resource()
{
  static std::optional<Resource> holder = []() -> std::optional<Resource> {
    try {
      return Resource{};
    } catch (std::exception const& e) {  // not_supported, or a driver that refuses the pool
      std::fprintf(
        stderr, "note: %s benchmarks skipped: %s\n", resource_traits<Resource>::name, e.what());
      return std::nullopt;
    }
  }();
  return holder ? &*holder : nullptr;
}

/** @brief Calls `fn.template operator()<Resource>(resource)` for each resource this device has. */
template <class Fn>
void for_each_resource(Fn&& fn)
{
  if (auto* r = shared_resource<rmm_next::async_device_resource>()) { fn(*r); }
  if (auto* r = shared_resource<rmm_next::async_managed_resource>()) { fn(*r); }
  if (auto* r = shared_resource<rmm_next::async_pinned_resource>()) { fn(*r); }
}

/**
 * @brief Prepares `pool` for a run: waits for the device, returns the pool's unused memory to the
 * system and resets its high-water marks (reserved and used), so that each run starts from an
 * empty pool whatever ran before it. Not timed: call it from a Setup hook.
 *
 * Without it a run inherits the blocks earlier runs left in the pool, freed on other streams
 * (thread_scaling's 16 threads) or of other sizes, and its allocations take other driver paths
 * than in a run that had the pool to itself: with random interleaving, the same benchmark then
 * differs from run to run and between programs.
 */
inline void reset_pool(cudaMemPool_t pool)
{
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
  std::uint64_t zero = 0;  // cuuint64_t
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero),
        "cudaMemPoolSetAttribute(ReservedMemHigh)");
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero),
        "cudaMemPoolSetAttribute(UsedMemHigh)");
}

/** @brief Setup hook: reset_pool on the pool of each shared resource. */
inline void reset_shared_pools(benchmark::State const&)
{
  for_each_resource([](auto& resource) { reset_pool(resource.pool_handle()); });
}

/** @brief One raw `cudaMallocFromPoolAsync` + `cudaFreeAsync` pair on `pool`. */
inline cudaError_t raw_pair(cudaMemPool_t pool, std::size_t bytes, cudaStream_t stream)
{
  void* ptr{};
  if (cudaError_t const s = cudaMallocFromPoolAsync(&ptr, bytes, pool, stream); s != cudaSuccess) {
    return s;
  }
  benchmark::DoNotOptimize(ptr);
  return cudaFreeAsync(ptr, stream);
}

/** @brief One stream-ordered allocate + deallocate pair through `r` (a resource or a ref). */
template <class ResourceOrRef>
void wrapped_pair(ResourceOrRef& r, std::size_t bytes, cudaStream_t stream)
{
  void* ptr = r.allocate(cuda::stream_ref{stream}, bytes, rmm_next::default_alignment);
  benchmark::DoNotOptimize(ptr);
  r.deallocate(cuda::stream_ref{stream}, ptr, bytes, rmm_next::default_alignment);
}

/**
 * @brief The loop of the pair benchmarks: one untimed warm-up pair, then `step()` per iteration,
 * the stream synchronized every `pairs_per_sync` pairs and at the end, so that no variant piles
 * up frees.
 */
template <class Pair, class Step>
void pair_loop(
  benchmark::State& state, Pair& pair, std::size_t bytes, cudaStream_t stream, Step&& step)
{
  pair(bytes, stream);  // the pool maps its memory outside the timed loop
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::size_t n = 0;
  for (auto _ : state) {
    step();
    if (++n == pairs_per_sync) {
      n = 0;
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  state.SetItemsProcessed(state.iterations());
}

/** @brief Bytes a cold loop writes between two timed calls: twice a core's L2 on the GPU hosts.
 */
inline constexpr std::size_t cold_bytes = std::size_t{4} << 20;

/** @brief Iterations of a cold benchmark (each writes `cold_bytes`, some 0.1 ms): a fixed count,
 * since Google Benchmark would run one of manual time for minutes. */
inline constexpr benchmark::IterationCount cold_iterations = 20000;

/**
 * @brief Registered benchmark `b` reported in ns: of real time, or, `cold`, of the manual time
 * `cold_caches` sets, over `cold_iterations`.
 */
template <class Registered>
Registered* timed_as(Registered* b, bool cold)
{
  (cold ? b->UseManualTime()->Iterations(cold_iterations) : b->UseRealTime())
    ->Unit(benchmark::kNanosecond);
  return b;
}

/**
 * @brief Host caches made cold before each call: `step(state, fn)` writes once to every 64-byte
 * line of `cold_bytes` of other data, as a training step's own host work (the interpreter, the
 * framework's dispatch) does between two allocations, so that the call timed next finds its
 * code's data out of the core's L1 and L2, then times `fn()` alone into the benchmark's manual
 * time. The two clock reads around it are in every cold variant alike.
 */
class cold_caches {
 public:
  template <class Fn>
  void step(benchmark::State& state, Fn&& fn)
  {
    for (std::size_t i = 0; i < other_.size(); i += per_line) {
      other_[i] += 1;
    }
    benchmark::ClobberMemory();
    auto const begin = std::chrono::steady_clock::now();
    std::forward<Fn>(fn)();
    auto const end = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - begin).count());
  }

  ~cold_caches() { benchmark::DoNotOptimize(other_.data()); }
  cold_caches()                              = default;
  cold_caches(cold_caches const&)            = delete;
  cold_caches& operator=(cold_caches const&) = delete;
  cold_caches(cold_caches&&)                 = delete;
  cold_caches& operator=(cold_caches&&)      = delete;

 private:
  static constexpr std::size_t per_line = 64 / sizeof(std::uint64_t);
  std::vector<std::uint64_t> other_ =
    std::vector<std::uint64_t>(cold_bytes / sizeof(std::uint64_t));
};

/**
 * @brief The timed loop of the pair benchmarks (alloc_free, thread_scaling, the hit and plugin
 * paths): one `pair(bytes, stream)` per iteration (`pair_loop`).
 *
 * `cold`: the host's caches cold before each pair (`cold_caches`); only the pair is timed (the
 * benchmark must be `timed_as(b, true)`).
 */
template <class Pair>
void timed_pairs(
  benchmark::State& state, Pair&& pair, std::size_t bytes, cudaStream_t stream, bool cold = false)
{
  if (!cold) {
    pair_loop(state, pair, bytes, stream, [&] { pair(bytes, stream); });
    return;
  }
  cold_caches caches;
  pair_loop(state, pair, bytes, stream, [&] { caches.step(state, [&] { pair(bytes, stream); }); });
}

/**
 * @brief A Google Benchmark statistic: the smallest value over the repetitions, reported as the
 * aggregate "min". For times it is the fastest repetition: noise on the machine adds time to a
 * run and never takes any away, so two benchmarks of the same loop agree on it even when their
 * medians come from periods in which the machine was at different speeds.
 */
inline double fastest(std::vector<double> const& values)
{
  return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

/** @brief Makes `resource` the current device resource while it lives, then restores the old. */
class scoped_current_resource {
 public:
  template <class Resource>
  explicit scoped_current_resource(Resource& resource)
    : previous_{
        rmm_next::set_current_device_resource_ref(rmm_next::device_async_resource_ref{resource})}
  {
  }
  scoped_current_resource(scoped_current_resource const&)            = delete;
  scoped_current_resource& operator=(scoped_current_resource const&) = delete;
  ~scoped_current_resource() { (void)rmm_next::set_current_device_resource_ref(previous_); }

 private:
  rmm_next::device_async_resource_ref previous_;
};

// ---- Statistics ---------------------------------------------------------------------------------

/** @brief The median of `values` (which it reorders); 0 when empty. */
inline double median(std::vector<double>& values)
{
  if (values.empty()) { return 0.0; }
  auto const mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  if (values.size() % 2 == 1) { return *mid; }
  double const upper = *mid;
  double const lower = *std::max_element(values.begin(), mid);
  return (lower + upper) / 2.0;
}

/** @brief Pairs in one timed block of `paired_blocks`. */
inline constexpr std::size_t pairs_per_block = 128;

/**
 * @brief Times blocks of `pairs_per_block` pairs by `baseline` and by `candidate` back to back, the
 * order alternating from one iteration to the next, and reports the medians per pair as the
 * counters `<baseline_name>` and `<candidate_name>` (ns) and their ratio `ratio` (candidate over
 * baseline). Each pair is `pair(bytes, stream)`; `stream` is synchronized after each block,
 * untimed. One warm-up block of each goes first, so that the pool has mapped its memory.
 */
template <class Baseline, class Candidate>
void paired_blocks(benchmark::State& state,
                   cudaStream_t stream,
                   std::size_t bytes,
                   Baseline& baseline,
                   Candidate& candidate,
                   char const* baseline_name  = "raw_ns",
                   char const* candidate_name = "wrapped_ns")
{
  using clock = std::chrono::steady_clock;
  auto block  = [&](auto& pair) {
    auto const start = clock::now();
    for (std::size_t i = 0; i < pairs_per_block; ++i) {
      pair(bytes, stream);
    }
    auto const stop = clock::now();
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // not timed
    return std::chrono::duration<double, std::nano>(stop - start).count() /
           static_cast<double>(pairs_per_block);
  };
  block(baseline);  // warm-up
  block(candidate);
  std::vector<double> baseline_ns;
  std::vector<double> candidate_ns;
  bool baseline_first = true;
  for (auto _ : state) {
    if (baseline_first) {
      baseline_ns.push_back(block(baseline));
      candidate_ns.push_back(block(candidate));
    } else {
      candidate_ns.push_back(block(candidate));
      baseline_ns.push_back(block(baseline));
    }
    baseline_first = !baseline_first;
  }
  double const baseline_median   = median(baseline_ns);
  double const candidate_median  = median(candidate_ns);
  state.counters[baseline_name]  = baseline_median;
  state.counters[candidate_name] = candidate_median;
  state.counters["ratio"]        = baseline_median > 0.0 ? candidate_median / baseline_median : 0.0;
}

/** @brief Runs `body`; an exception skips the benchmark with its message instead of aborting. */
template <class Body>
void guarded(benchmark::State& state, Body&& body)
{
  try {
    body();
  } catch (std::exception const& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace rmm_next_bench
