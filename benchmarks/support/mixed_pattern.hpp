/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The mixed allocation pattern of mixed_pattern_bench, shared by the translation unit of the
// rmm-next and raw peers and by the one of the RMM peers (built only with RMM).
//
// Each thread keeps `live_blocks` blocks of sizes uniform in [min_bytes, max_bytes]; each
// iteration frees one random live block and allocates a new random size in its slot: one
// alloc+free pair. The sizes and slots come from a per-thread sequence made before the timed loop
// (the same for every peer), so no random numbers are drawn while timing.
//
// A peer is a type with
//   static constexpr char const* name;
//   static Peer* instance();                          // made once per process; nullptr: skip
//   void* allocate(cudaStream_t, std::size_t bytes);
//   void deallocate(cudaStream_t, void* ptr, std::size_t bytes) noexcept;
//   void before_run();                                // Setup of each run: not timed
//   void after_run(benchmark::State&);                // thread 0, after every thread's loop
// after_run adds counters such as peak_reserved_bytes.

#include "bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rmm_next_bench::mixed {

inline constexpr std::size_t live_blocks        = 64;
inline constexpr std::size_t min_bytes          = 256;
inline constexpr std::size_t max_bytes          = std::size_t{64} << 10;
inline constexpr std::size_t streams_per_thread = 4;
inline constexpr std::size_t sequence_length    = std::size_t{1} << 14;  // a power of two
/**
 * @brief Untimed pairs per thread before the timed loop: RMM_NEXT_BENCH_WARM_UP_PAIRS, else 4096,
 * and 65536 for peers that cache blocks themselves (`Peer::caches`: a thread cache, an arena),
 * whose misses at 16 threads each cost a driver call serialized across the threads until their
 * caches hold what the pattern asks for.
 */
template <class Peer>
std::size_t warm_up_pairs()
{
  static std::size_t const pairs = [] {
    char const* env   = std::getenv("RMM_NEXT_BENCH_WARM_UP_PAIRS");
    long long const n = env != nullptr ? std::atoll(env) : -1;
    if (n >= 0) { return static_cast<std::size_t>(n); }
    if constexpr (requires { Peer::caches; }) { return std::size_t{65536}; }
    return std::size_t{4096};
  }();
  return pairs;
}

/** @brief How the threads use streams. */
enum class layout {
  own_stream,     ///< (a) each thread its own non-blocking stream
  shared_stream,  ///< (b) one stream shared by all threads
  four_streams,   ///< (c) 4 streams per thread: block i uses stream i % 4 to allocate and free
};

inline char const* name_of(layout l)
{
  switch (l) {
    case layout::own_stream: return "own_stream";
    case layout::shared_stream: return "shared_stream";
    case layout::four_streams: return "four_streams";
  }
  return "?";
}

inline constexpr std::array<layout, 3> layouts{
  layout::own_stream, layout::shared_stream, layout::four_streams};

/** @brief The streams of every layout, made once per process (call before any run). */
inline std::vector<stream> const& all_streams()
{
  // [0, max_threads * 4): 4 per thread; the last one: the shared stream.
  static std::vector<stream> const streams(max_threads * streams_per_thread + 1);
  return streams;
}

/** @brief The streams thread `thread_index` uses under `l`: slot i uses streams[i % size]. */
inline std::vector<cudaStream_t> thread_streams(layout l, int thread_index)
{
  auto const& all = all_streams();
  auto const base = static_cast<std::size_t>(thread_index) * streams_per_thread;
  switch (l) {
    case layout::own_stream: return {all.at(base).get()};
    case layout::shared_stream: return {all.back().get()};
    case layout::four_streams: {
      std::vector<cudaStream_t> mine;
      for (std::size_t i = 0; i < streams_per_thread; ++i) {
        mine.push_back(all.at(base + i).get());
      }
      return mine;
    }
  }
  return {};
}

/** @brief One step of the pattern: free the block in `slot`, allocate `bytes` in its place. */
struct step {
  std::uint32_t bytes;
  std::uint32_t slot;
};

/** @brief The sequence of thread `thread_index`: the same for every peer and layout. */
inline std::vector<step> make_sequence(int thread_index)
{
  std::mt19937_64 gen{0x6d1ced + static_cast<std::uint64_t>(thread_index)};
  std::uniform_int_distribution<std::uint32_t> size{static_cast<std::uint32_t>(min_bytes),
                                                    static_cast<std::uint32_t>(max_bytes)};
  std::uniform_int_distribution<std::uint32_t> slot{0, static_cast<std::uint32_t>(live_blocks - 1)};
  std::vector<step> steps(sequence_length);
  for (auto& s : steps) {
    s = {size(gen), slot(gen)};
  }
  return steps;
}

/** @brief The pattern on one thread, through `peer`. */
template <class Peer>
void run(benchmark::State& state, Peer* peer, layout l)
{
  guarded(state, [&] {
    std::vector<cudaStream_t> const streams = thread_streams(l, state.thread_index());
    std::vector<step> const steps           = make_sequence(state.thread_index());
    std::size_t const stream_mask           = streams.size() - 1;  // 1 or 4 streams
    auto synchronize                        = [&] {
      for (cudaStream_t s : streams) {
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      }
    };

    struct block {
      void* ptr;
      std::size_t bytes;
    };
    std::array<block, live_blocks> live{};
    std::size_t live_bytes = 0;
    std::mt19937 fill_gen{static_cast<std::uint32_t>(state.thread_index())};
    std::uniform_int_distribution<std::size_t> fill_size{min_bytes, max_bytes};
    for (std::size_t i = 0; i < live_blocks; ++i) {  // not timed
      std::size_t const bytes = fill_size(fill_gen);
      live[i]                 = {peer->allocate(streams[i & stream_mask], bytes), bytes};
      live_bytes += bytes;
    }
    synchronize();
    std::size_t peak_live = live_bytes;

    std::size_t next = 0;
    std::size_t n    = 0;
    auto pair        = [&] {
      step const s              = steps[next];
      next                      = (next + 1) & (sequence_length - 1);
      block& b                  = live[s.slot];
      cudaStream_t const stream = streams[s.slot & stream_mask];
      peer->deallocate(stream, b.ptr, b.bytes);
      live_bytes -= b.bytes;
      b = {peer->allocate(stream, s.bytes), s.bytes};
      live_bytes += s.bytes;
      peak_live = std::max(peak_live, live_bytes);
      if (++n == pairs_per_sync) {
        n = 0;
        synchronize();
      }
    };
    // Warm-up, not timed (warm_up_pairs), so that every peer (a thread cache, an arena, a driver
    // pool) holds what the timed loop will ask for. Steady-state throughput is what is measured.
    for (std::size_t i = 0; i < warm_up_pairs<Peer>(); ++i) {
      pair();
    }
    for (auto _ : state) {
      pair();
    }
    // Google Benchmark's loop ends on a barrier: every thread's timed loop is over here.
    if (state.thread_index() == 0) { peer->after_run(state); }
    for (std::size_t i = 0; i < live_blocks; ++i) {
      peer->deallocate(streams[i & stream_mask], live[i].ptr, live[i].bytes);
    }
    synchronize();
    state.SetItemsProcessed(state.iterations());
    // Summed over the threads: an upper bound of the bytes live at once (each thread's peak).
    state.counters["peak_in_use_bytes"] = static_cast<double>(peak_live);
  });
}

/** @brief Setup of every run of a peer (Google Benchmark takes a plain function). */
template <class Peer>
void before_run(benchmark::State const&)
{
  if (Peer* peer = Peer::instance()) { peer->before_run(); }
}

/** @brief Registers mixed_pattern/<layout>/<peer>/threads:<n> for every layout. */
template <class Peer>
void register_peer()
{
  Peer* peer = Peer::instance();
  if (peer == nullptr) { return; }
  (void)all_streams();
  for (layout const l : layouts) {
    std::string const name = std::string{"mixed_pattern/"} + name_of(l) + "/" + Peer::name;
    auto* b                = benchmark::RegisterBenchmark(name.c_str(), &run<Peer>, peer, l);
    b->UseRealTime()->MinTime(min_time())->Unit(benchmark::kNanosecond)->Setup(&before_run<Peer>);
    for (int threads = 1; threads <= max_threads; threads *= 2) {
      b->Threads(threads);
    }
  }
}

// ---- Memory of driver pools ---------------------------------------------------------------------

/**
 * @brief The peer made by `make()` once per process, or nullptr with a note on stderr when
 * `make()` throws (a resource this device or runtime refuses).
 */
template <class Peer, class Make>
Peer* made_once(Make make)
{
  static std::optional<Peer> peer = [&]() -> std::optional<Peer> {
    try {
      return make();
    } catch (std::exception const& e) {
      std::fprintf(stderr, "note: %s benchmarks skipped: %s\n", Peer::name, e.what());
      return std::nullopt;
    }
  }();
  return peer ? &*peer : nullptr;
}

/** @brief allocate/deallocate of a peer through `Derived::resource()`, a stream-ordered resource.
 */
template <class Derived>
struct resource_calls {
  void* allocate(cudaStream_t stream, std::size_t bytes)
  {
    return self().resource().allocate(cuda::stream_ref{stream}, bytes, alignment);
  }
  void deallocate(cudaStream_t stream, void* ptr, std::size_t bytes) noexcept
  {
    self().resource().deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  }

 private:
  static constexpr std::size_t alignment = rmm_next::default_alignment;  // 256, as RMM
  Derived& self() { return static_cast<Derived&>(*this); }
};

/** @brief Counters peak_reserved_bytes and peak_pool_used_bytes of `pool` since reset_pool. */
inline void report_pool_peaks(benchmark::State& state, cudaMemPool_t pool)
{
  std::uint64_t reserved{};
  std::uint64_t used{};
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved),
        "cudaMemPoolGetAttribute(ReservedMemHigh)");
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used),
        "cudaMemPoolGetAttribute(UsedMemHigh)");
  state.counters["peak_reserved_bytes"]  = static_cast<double>(reserved);
  state.counters["peak_pool_used_bytes"] = static_cast<double>(used);
}

/** @brief before_run/after_run of a peer on the driver pool `Derived::pool()`. */
template <class Derived>
struct driver_pool_memory {
  void before_run() { reset_pool(self().pool()); }
  void after_run(benchmark::State& state) { report_pool_peaks(state, self().pool()); }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace rmm_next_bench::mixed
