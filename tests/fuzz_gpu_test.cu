/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A randomized test of the resources, adaptors and maps together. Eight threads pick random
// operations for a fixed time: allocate through an async_device_resource on the current pool, one
// on a pool of its own, thread_cache_adaptors over both, a statistics_adaptor, a local
// per_device_resource_map and the process-wide functions; a kernel writes each block's pattern and
// later kernels check it on the block's stream; blocks are freed on their own stream, on another
// stream of the thread after an event, or by another thread after an event; streams are created
// and destroyed with work pending; the map is set and reset while other threads allocate through
// what they read from it; the process-wide ref is overridden, reset and restored, one scoped
// override at a time. At the end every block was intact, every word was checked, and every byte
// went back: adaptors count nothing in use and the pools' used memory is where it started.
//
// The seed is printed first. RMM_NEXT_FUZZ_SEED=<seed> replays each thread's choices (the threads'
// interleaving still varies); RMM_NEXT_FUZZ_SECONDS sets the length (default 10).

#include "support/kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using rmm_next::async_device_resource;
using rmm_next::statistics_adaptor;
using rmm_next::thread_cache_adaptor;
using rmm_next::test::block_size;
using rmm_next::test::fill_kernel;
using rmm_next::test::grid_for;
using rmm_next::test::pattern;
using ref  = rmm_next::device_async_resource_ref;
using word = std::uint32_t;

constexpr int threads             = 8;
constexpr std::size_t max_live    = 32;  // blocks one thread holds at most
constexpr std::size_t max_streams = 4;   // streams one thread holds at most
constexpr int minimum_operations  = 50;  // per thread, however short the time
constexpr double default_seconds  = 10;
constexpr int device              = 0;

/** A 64-bit mix (splitmix64): seeds of threads and patterns of blocks. */
constexpr std::uint64_t mix(std::uint64_t x) noexcept
{
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

/**
 * Adds to `counters[0]` the words of `in` that do not hold `pattern(i, seed)` and to `counters[1]`
 * the words read: each block sums its threads' counts in shared memory and makes one atomic add.
 * Launched with `block_size` threads per block.
 */
__global__ void check_kernel(word const* in, std::size_t n, word seed, unsigned long long* counters)
{
  __shared__ unsigned long long bad[block_size];
  __shared__ unsigned long long read[block_size];
  std::size_t const stride   = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long my_bad  = 0;
  unsigned long long my_read = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    my_bad += in[i] != pattern(i, seed) ? 1 : 0;
    ++my_read;
  }
  bad[threadIdx.x]  = my_bad;
  read[threadIdx.x] = my_read;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      bad[threadIdx.x] += bad[threadIdx.x + half];
      read[threadIdx.x] += read[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (bad[0] != 0) { atomicAdd(&counters[0], bad[0]); }
    atomicAdd(&counters[1], read[0]);
  }
}

/** Where a block came from; the ref it was allocated through frees it. */
enum source : int {
  from_current,         ///< async_device_resource on the device's current pool
  from_owned,           ///< async_device_resource on a pool of its own
  from_cached_current,  ///< thread_cache_adaptor over the first
  from_cached_owned,    ///< thread_cache_adaptor over the second
  from_counted,         ///< statistics_adaptor over a third pool
  from_map,             ///< what the local map's get / get_current returned
  from_map_previous,    ///< what the local map's set / reset returned
  from_process,         ///< what the process-wide functions returned
  source_count
};
constexpr std::array<char const*, source_count> source_names{"current pool",
                                                             "owned pool",
                                                             "thread cache (current pool)",
                                                             "thread cache (owned pool)",
                                                             "statistics adaptor",
                                                             "local map: get",
                                                             "local map: previous ref",
                                                             "process-wide ref"};
constexpr int fixed_sources = from_counted + 1;  // the sources the maps may be set to

enum operation : int {
  op_allocate,
  op_allocate_zero,
  op_check,
  op_rewrite,
  op_free_same_stream,
  op_free_other_stream,
  op_hand_over,
  op_take_over,
  op_move_stream,
  op_create_stream,
  op_destroy_stream,
  op_sync_stream,
  op_map_set,
  op_map_reset,
  op_process_read,
  op_process_set,
  op_process_reset,
  op_process_restore,
  op_flush_cache,
  operation_count
};
constexpr std::array<char const*, operation_count> operation_names{
  "allocate",
  "allocate 0 bytes",
  "check",
  "rewrite",
  "free on its stream",
  "free on another stream after an event",
  "hand to another thread",
  "take from another thread, wait on its event",
  "move to another stream after an event",
  "create a stream",
  "destroy a stream with work pending",
  "synchronize a stream",
  "local map: set / set_current",
  "local map: reset / reset_current",
  "process-wide: read",
  "process-wide: scoped override set",
  "process-wide: reset inside an override",
  "process-wide: override restored",
  "thread cache flush"};
// Relative frequencies of the operations a thread picks (restore is not picked: it ends an
// override after a random number of operations).
constexpr std::array<int, operation_count> weights{
  30, 1, 10, 4, 14, 8, 6, 8, 4, 2, 2, 1, 4, 2, 3, 2, 1, 0, 1};

/** The resources under test. Everything a block or a map refers to lives as long as this. */
struct resources {
  static rmm_next::thread_cache_options cache_options()
  {
    rmm_next::thread_cache_options options;
    options.max_cached_bytes_per_thread = std::size_t{4} << 20;  // caches fill up and spill
    options.max_streams_per_thread      = 3;                     // and evict streams
    return options;
  }

  async_device_resource current{device};
  async_device_resource owned{rmm_next::pool_options{}, device};
  async_device_resource counted_pool{rmm_next::pool_options{}, device};
  async_device_resource map_pool{rmm_next::pool_options{}, device};
  thread_cache_adaptor<async_device_resource> cached_current{current, cache_options()};
  thread_cache_adaptor<async_device_resource> cached_owned{owned, cache_options()};
  statistics_adaptor<async_device_resource> counted{counted_pool};
  std::shared_ptr<statistics_adaptor<async_device_resource>> map_initial =
    std::make_shared<statistics_adaptor<async_device_resource>>(map_pool);
  rmm_next::per_device_resource_map<ref> map{[initial = map_initial](int) { return initial; }};

  /** The ref of one of the first `fixed_sources` sources. */
  ref fixed(int which)
  {
    switch (which) {
      case from_current: return ref{current};
      case from_owned: return ref{owned};
      case from_cached_current: return ref{cached_current};
      case from_cached_owned: return ref{cached_owned};
      default: return ref{counted};
    }
  }
};

/** Used memory of a driver pool now (`cudaMemPoolAttrUsedMemCurrent`). */
std::uint64_t used_memory(cudaMemPool_t pool)
{
  std::uint64_t used{};
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  return used;
}

/** A live block: the ref it came from, its pattern's seed, the stream of its last use. */
struct block {
  ref owner;
  source from;
  void* ptr;
  std::size_t bytes;
  std::size_t alignment;
  word seed;
  cudaStream_t stream;
};

/** A block handed to another thread, and an event marking the end of its last use. */
struct handed {
  block b;
  cudaEvent_t done;
};

/** What the threads share. */
struct run {
  std::uint64_t seed{};
  std::chrono::steady_clock::time_point deadline;
  resources res;
  ref process_before = rmm_next::get_per_device_resource_ref(device);
  unsigned long long* counters{};  // device: mismatched words, words read
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> words_to_check{0};
  std::atomic<std::uint64_t> frees{0};
  std::array<std::atomic<std::uint64_t>, operation_count> done{};
  std::array<std::atomic<std::uint64_t>, source_count> allocations{};
  std::mutex bag_mutex;
  std::list<handed> bag;
  std::mutex override_mutex;  // one process-wide override at a time: each restores what it found

  /** Fails the test, from any thread, unless `status` is cudaSuccess. */
  bool ok(cudaError_t status, char const* call)
  {
    if (status == cudaSuccess) { return true; }
    (void)cudaGetLastError();
    ADD_FAILURE() << call << ": " << cudaGetErrorName(status) << " (" << cudaGetErrorString(status)
                  << "); seed " << seed;
    failed = true;
    return false;
  }

  void fail(std::string const& what)
  {
    ADD_FAILURE() << what << "; seed " << seed;
    failed = true;
  }
};

#define FUZZ_CUDA(call) state_.ok((call), #call)

/** One thread's streams, blocks and choices. */
class worker {
 public:
  worker(run& state, int index) : state_{state}, index_{index}, rng_{mix(state.seed + index + 1)} {}

  void operator()()
  {
    try {
      if (FUZZ_CUDA(cudaSetDevice(device)) && create_stream() && create_stream()) {
        for (int i = 0; !state_.failed && (i < minimum_operations ||
                                           std::chrono::steady_clock::now() < state_.deadline);
             ++i) {
          step();
        }
      }
    } catch (std::exception const& e) {
      state_.fail("thread " + std::to_string(index_) + ": " + e.what());
    }
    try {
      finish();
    } catch (std::exception const& e) {
      state_.fail("thread " + std::to_string(index_) + " finishing: " + e.what());
    }
  }

 private:
  run& state_;

  void count(operation op) { state_.done[op].fetch_add(1, std::memory_order_relaxed); }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }
  cudaStream_t any_stream() { return streams_[below(streams_.size())]; }
  cudaStream_t other_stream(cudaStream_t than)
  {
    for (std::size_t tries = 0; tries < 8; ++tries) {
      if (cudaStream_t s = any_stream(); s != than) { return s; }
    }
    return streams_.front() != than ? streams_.front() : streams_.back();
  }
  std::list<block>::iterator any_block()
  {
    return std::next(mine_.begin(), static_cast<long>(below(mine_.size())));
  }

  operation pick()
  {
    static constexpr int total = [] {
      int sum = 0;
      for (int w : weights) {
        sum += w;
      }
      return sum;
    }();
    int r = static_cast<int>(below(total));
    for (int op = 0; op < operation_count; ++op) {
      if (r < weights[op]) { return static_cast<operation>(op); }
      r -= weights[op];
    }
    return op_allocate;
  }

  void step()
  {
    if (override_left_ > 0 && --override_left_ == 0) { end_override(); }
    switch (pick()) {
      case op_allocate: allocate(); break;
      case op_allocate_zero: allocate_zero(); break;
      case op_check:
        if (!mine_.empty()) { check(*any_block(), op_check); }
        break;
      case op_rewrite: rewrite(); break;
      case op_free_same_stream:
        if (!mine_.empty()) { free_on(any_block(), false); }
        break;
      case op_free_other_stream:
        if (!mine_.empty()) { free_on(any_block(), true); }
        break;
      case op_hand_over: hand_over(); break;
      case op_take_over: take_over(); break;
      case op_move_stream: move_stream(); break;
      case op_create_stream:
        if (streams_.size() < max_streams && create_stream()) { count(op_create_stream); }
        break;
      case op_destroy_stream: destroy_stream(); break;
      case op_sync_stream:
        if (FUZZ_CUDA(cudaStreamSynchronize(any_stream()))) { count(op_sync_stream); }
        break;
      case op_map_set:
      case op_map_reset: map_write(); break;
      case op_process_read:
      case op_process_set:
      case op_process_reset:
      case op_process_restore: process_wide(); break;
      case op_flush_cache: flush_cache(); break;
      default: break;
    }
  }

  std::size_t pick_bytes()
  {
    switch (below(8)) {
      case 0: return 4 + below(252);  // smaller than a cache class
      case 1:
      case 2:
      case 3:
      case 4: return 256 + below(64 << 10);  // the common case
      case 5:
      case 6: return (64 << 10) + below(960 << 10);             // up to the cache's largest
      default: return (std::size_t{1} << 20) + below(3 << 20);  // beyond: never cached
    }
  }

  std::size_t pick_alignment()
  {
    return below(4) == 0 ? std::size_t{1} << below(9) : rmm_next::default_alignment;
  }

  /** A source and its ref: a fixed resource, or what the local or the process-wide map says. */
  std::pair<source, ref> pick_source()
  {
    auto const which = static_cast<int>(below(fixed_sources + 2));
    if (which < fixed_sources) { return {static_cast<source>(which), state_.res.fixed(which)}; }
    if (which == fixed_sources) {
      return {from_map, below(2) == 0 ? state_.res.map.get(device) : state_.res.map.get_current()};
    }
    return {from_process,
            below(2) == 0 ? rmm_next::get_current_device_resource_ref()
                          : rmm_next::get_per_device_resource_ref(device)};
  }

  bool fill(block const& b)
  {
    std::size_t const n = b.bytes / sizeof(word);
    fill_kernel<<<grid_for(n), block_size, 0, b.stream>>>(static_cast<word*>(b.ptr), n, b.seed);
    return FUZZ_CUDA(cudaGetLastError());
  }

  bool check(block const& b, operation op)
  {
    std::size_t const n = b.bytes / sizeof(word);
    check_kernel<<<grid_for(n), block_size, 0, b.stream>>>(
      static_cast<word const*>(b.ptr), n, b.seed, state_.counters);
    if (!FUZZ_CUDA(cudaGetLastError())) { return false; }
    state_.words_to_check.fetch_add(n, std::memory_order_relaxed);
    count(op);
    return true;
  }

  word next_seed()
  {
    return static_cast<word>(mix(
      state_.seed ^ (std::uint64_t{1} << 40U) * static_cast<unsigned>(index_) ^ ++blocks_made_));
  }

  void allocate_through(source from, ref owner)
  {
    if (mine_.size() >= max_live) {
      free_on(any_block(), false);
      return;
    }
    std::size_t const bytes     = pick_bytes();
    std::size_t const alignment = pick_alignment();
    cudaStream_t const stream   = any_stream();
    void* ptr                   = owner.allocate(stream, bytes, alignment);
    if (ptr == nullptr) {
      state_.fail(std::string{source_names[from]} + ": allocate(" + std::to_string(bytes) +
                  ") returned nullptr");
      return;
    }
    if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
      state_.fail(std::string{source_names[from]} + ": a block not aligned to " +
                  std::to_string(alignment));
    }
    mine_.push_back(block{owner, from, ptr, bytes, alignment, next_seed(), stream});
    state_.allocations[from].fetch_add(1, std::memory_order_relaxed);
    count(op_allocate);
    fill(mine_.back());
  }

  void allocate()
  {
    auto const [from, owner] = pick_source();
    allocate_through(from, owner);
  }

  void allocate_zero()
  {
    auto [from, owner]        = pick_source();
    cudaStream_t const stream = any_stream();
    void* ptr                 = owner.allocate(stream, 0, rmm_next::default_alignment);
    if (ptr != nullptr) {
      state_.fail(std::string{source_names[from]} + ": allocate(0) did not return nullptr");
    }
    owner.deallocate(stream, nullptr, 0, rmm_next::default_alignment);
    count(op_allocate_zero);
  }

  void rewrite()
  {
    if (mine_.empty()) { return; }
    block& b = *any_block();
    check(b, op_check);
    b.seed = next_seed();
    if (fill(b)) { count(op_rewrite); }
  }

  /** Orders what `to` does next after what `from` was given so far. */
  bool order_after(cudaStream_t from, cudaStream_t to)
  {
    if (from == to) { return true; }
    cudaEvent_t done{};
    if (!FUZZ_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming))) { return false; }
    bool const ordered =
      FUZZ_CUDA(cudaEventRecord(done, from)) && FUZZ_CUDA(cudaStreamWaitEvent(to, done, 0));
    return FUZZ_CUDA(cudaEventDestroy(done)) && ordered;
  }

  /** Checks the block and frees it through its ref, on its stream or another one. */
  void free_on(std::list<block>::iterator it, bool other)
  {
    block b = *it;
    mine_.erase(it);
    check(b, op_check);
    cudaStream_t const on = other ? other_stream(b.stream) : b.stream;
    if (!order_after(b.stream, on)) { return; }  // never free what may still be in use
    b.owner.deallocate(on, b.ptr, b.bytes, b.alignment);
    state_.frees.fetch_add(1, std::memory_order_relaxed);
    count(on == b.stream ? op_free_same_stream : op_free_other_stream);
  }

  void hand_over()
  {
    if (mine_.empty()) { return; }
    auto const it = any_block();
    block const b = *it;
    mine_.erase(it);
    check(b, op_check);
    cudaEvent_t done{};
    if (!FUZZ_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming))) { return; }
    if (!FUZZ_CUDA(cudaEventRecord(done, b.stream))) { return; }
    std::lock_guard lock{state_.bag_mutex};
    state_.bag.push_back(handed{b, done});
    count(op_hand_over);
  }

  void take_over()
  {
    std::optional<handed> got;
    {
      std::lock_guard lock{state_.bag_mutex};
      if (state_.bag.empty()) { return; }
      auto const it = std::next(state_.bag.begin(), static_cast<long>(below(state_.bag.size())));
      got.emplace(*it);
      state_.bag.erase(it);
    }
    cudaStream_t const stream = any_stream();
    bool const waited         = FUZZ_CUDA(cudaStreamWaitEvent(stream, got->done, 0));
    if (!FUZZ_CUDA(cudaEventDestroy(got->done)) || !waited) { return; }
    count(op_take_over);
    mine_.push_back(got->b);
    mine_.back().stream = stream;  // the other thread's stream is never used here
    if (below(2) == 0) { free_on(std::prev(mine_.end()), false); }
  }

  void move_stream()
  {
    if (mine_.empty() || streams_.size() < 2) { return; }
    block& b                = *any_block();
    cudaStream_t const next = other_stream(b.stream);
    if (order_after(b.stream, next)) {
      b.stream = next;
      count(op_move_stream);
    }
  }

  bool create_stream()
  {
    cudaStream_t stream{};
    unsigned int const flags = below(2) == 0 ? cudaStreamNonBlocking : cudaStreamDefault;
    if (!FUZZ_CUDA(cudaStreamCreateWithFlags(&stream, flags))) { return false; }
    streams_.push_back(stream);
    return true;
  }

  /** Moves the stream's blocks to another stream, then destroys it with their work pending. */
  void destroy_stream()
  {
    if (streams_.size() < 2) { return; }
    std::size_t const k     = below(streams_.size());
    cudaStream_t const gone = streams_[k];
    cudaStream_t const heir = other_stream(gone);
    bool moved              = false;
    for (block& b : mine_) {
      if (b.stream != gone) { continue; }
      if (!moved && !order_after(gone, heir)) { return; }
      moved    = true;
      b.stream = heir;
    }
    streams_.erase(streams_.begin() + static_cast<long>(k));
    if (FUZZ_CUDA(cudaStreamDestroy(gone))) { count(op_destroy_stream); }
  }

  /** Sets or resets the local map and allocates through what it returned, now and then. */
  void map_write()
  {
    auto& map          = state_.res.map;
    int const which    = static_cast<int>(below(fixed_sources));
    bool const reset   = below(3) == 0;
    ref const previous = [&] {
      switch (below(2)) {
        case 0: return reset ? map.reset(device) : map.set(device, state_.res.fixed(which));
        default: return reset ? map.reset_current() : map.set_current(state_.res.fixed(which));
      }
    }();
    count(reset ? op_map_reset : op_map_set);
    if (below(4) == 0) { allocate_through(from_map_previous, previous); }
  }

  /**
   * The process-wide functions: a read; or, holding the override mutex, a set whose previous ref
   * is restored a random number of operations later, and resets and sets in between.
   */
  void process_wide()
  {
    if (!override_.owns_lock()) {
      if (below(2) == 0 || !override_.try_lock()) {
        (void)rmm_next::get_current_device_resource_ref();
        count(op_process_read);
        return;
      }
      override_left_ = 1 + static_cast<int>(below(64));
      restore_.emplace(set_process_wide());
      if (!(*restore_ == state_.process_before)) {
        state_.fail("the process-wide ref before an override was not what the overrides found");
      }
      return;
    }
    if (below(2) == 0) {
      (void)(below(2) == 0 ? rmm_next::reset_current_device_resource_ref()
                           : rmm_next::reset_per_device_resource_ref(device));
      if (!(rmm_next::get_per_device_resource_ref(device) == state_.process_before)) {
        state_.fail("after a reset the process-wide ref is not the initial resource");
      }
      count(op_process_reset);
    } else {
      (void)set_process_wide();
    }
  }

  /** Sets the process-wide ref to a fixed resource; returns the previous one. */
  ref set_process_wide()
  {
    ref const next     = state_.res.fixed(static_cast<int>(below(fixed_sources)));
    ref const previous = below(2) == 0 ? rmm_next::set_per_device_resource_ref(device, next)
                                       : rmm_next::set_current_device_resource_ref(next);
    if (!(rmm_next::get_per_device_resource_ref(device) == next &&
          rmm_next::get_current_device_resource_ref() == next)) {
      state_.fail("the process-wide ref just set is not what its setter reads back");
    }
    count(op_process_set);
    return previous;
  }

  void end_override()
  {
    if (!override_.owns_lock()) { return; }
    (void)rmm_next::set_per_device_resource_ref(device, *restore_);
    if (!(rmm_next::get_per_device_resource_ref(device) == state_.process_before)) {
      state_.fail("a restored override did not bring the process-wide ref back");
    }
    restore_.reset();
    override_left_ = 0;
    override_.unlock();
    count(op_process_restore);
  }

  void flush_cache()
  {
    (void)(below(2) == 0 ? state_.res.cached_current.flush() : state_.res.cached_owned.flush());
    count(op_flush_cache);
  }

  /** Ends the override, checks and frees every block, destroys the streams. */
  void finish()
  {
    end_override();
    while (!mine_.empty()) {
      free_on(mine_.begin(), false);
    }
    for (cudaStream_t s : streams_) {
      FUZZ_CUDA(cudaStreamSynchronize(s));
      FUZZ_CUDA(cudaStreamDestroy(s));
    }
    streams_.clear();
  }

  int index_;
  std::mt19937_64 rng_;
  std::uint64_t blocks_made_{0};
  std::vector<cudaStream_t> streams_;
  std::list<block> mine_;
  std::unique_lock<std::mutex> override_{state_.override_mutex, std::defer_lock};
  std::optional<ref> restore_;
  int override_left_{0};
};

/** RMM_NEXT_FUZZ_SEED, else a random seed. */
std::optional<std::uint64_t> fuzz_seed()
{
  char const* env = std::getenv("RMM_NEXT_FUZZ_SEED");
  if (env == nullptr || *env == '\0') {
    std::random_device device_entropy;
    return (std::uint64_t{device_entropy()} << 32U) ^ device_entropy();
  }
  char* end                  = nullptr;
  unsigned long long const v = std::strtoull(env, &end, 0);
  if (end == env || *end != '\0') { return std::nullopt; }
  return v;
}

/** RMM_NEXT_FUZZ_SECONDS, else `default_seconds`; 0 if it is not a positive number. */
double fuzz_seconds()
{
  char const* env = std::getenv("RMM_NEXT_FUZZ_SECONDS");
  if (env == nullptr || *env == '\0') { return default_seconds; }
  char* end            = nullptr;
  double const seconds = std::strtod(env, &end);
  return end != env && *end == '\0' && seconds > 0 ? seconds : 0;
}

TEST(FuzzGpu, RandomOperationsKeepEveryBlockIntactAndReturnEveryByte)
{
  std::optional<std::uint64_t> const seed = fuzz_seed();
  ASSERT_TRUE(seed) << "RMM_NEXT_FUZZ_SEED=" << std::getenv("RMM_NEXT_FUZZ_SEED")
                    << " is not a number";
  std::printf("fuzz: seed %llu (replay: RMM_NEXT_FUZZ_SEED=%llu)\n",
              static_cast<unsigned long long>(*seed),
              static_cast<unsigned long long>(*seed));
  std::fflush(stdout);
  SCOPED_TRACE("seed " + std::to_string(*seed));
  double const seconds = fuzz_seconds();
  ASSERT_GT(seconds, 0) << "RMM_NEXT_FUZZ_SECONDS must be a positive number of seconds";
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);

  auto state     = std::make_unique<run>();
  state->seed    = *seed;
  resources& res = state->res;
  ASSERT_EQ(cudaMalloc(&state->counters, 2 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(state->counters, 0, 2 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  struct pool_baseline {
    char const* name;
    cudaMemPool_t pool;
    std::uint64_t used;
  };
  std::vector<pool_baseline> const pools{
    {"current pool", res.current.pool_handle(), used_memory(res.current.pool_handle())},
    {"owned pool", res.owned.pool_handle(), used_memory(res.owned.pool_handle())},
    {"statistics adaptor's pool",
     res.counted_pool.pool_handle(),
     used_memory(res.counted_pool.pool_handle())},
    {"local map's pool", res.map_pool.pool_handle(), used_memory(res.map_pool.pool_handle())}};

  std::printf("fuzz: %d threads for %.1f s\n", threads, seconds);
  state->deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>{seconds});
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back(worker{*state, t});
  }
  for (std::thread& w : workers) {
    w.join();
  }

  // Blocks still in the bag: adopted by this thread, checked and freed.
  run& s = *state;
  cudaStream_t last{};
  ASSERT_EQ(cudaStreamCreateWithFlags(&last, cudaStreamNonBlocking), cudaSuccess);
  for (handed const& h : s.bag) {
    EXPECT_EQ(cudaStreamWaitEvent(last, h.done, 0), cudaSuccess);
    EXPECT_EQ(cudaEventDestroy(h.done), cudaSuccess);
    std::size_t const n = h.b.bytes / sizeof(word);
    check_kernel<<<grid_for(n), block_size, 0, last>>>(
      static_cast<word const*>(h.b.ptr), n, h.b.seed, s.counters);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    s.words_to_check += n;
    ref owner = h.b.owner;
    owner.deallocate(last, h.b.ptr, h.b.bytes, h.b.alignment);
    ++s.frees;
  }
  s.bag.clear();
  EXPECT_EQ(cudaStreamSynchronize(last), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(last), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::printf("fuzz: operations\n");
  for (int op = 0; op < operation_count; ++op) {
    std::printf(
      "  %-45s %10llu\n", operation_names[op], static_cast<unsigned long long>(s.done[op].load()));
  }
  std::printf("fuzz: allocations by source\n");
  std::uint64_t allocations = 0;
  for (int from = 0; from < source_count; ++from) {
    std::printf("  %-45s %10llu\n",
                source_names[from],
                static_cast<unsigned long long>(s.allocations[from].load()));
    allocations += s.allocations[from].load();
  }
  for (auto* cache : {&res.cached_current, &res.cached_owned}) {
    auto const st = cache->statistics();
    std::printf("fuzz: thread cache: %llu hits, %llu misses, %llu bypasses, %llu flushes\n",
                static_cast<unsigned long long>(st.hits),
                static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.bypasses),
                static_cast<unsigned long long>(st.flushes));
  }

  // Every block was checked where it was freed, and every word read held its pattern.
  unsigned long long counters[2]{};
  ASSERT_EQ(cudaMemcpy(counters, s.counters, sizeof(counters), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(counters[0], 0u) << "words that did not hold their block's pattern";
  EXPECT_EQ(counters[1], s.words_to_check.load()) << "words the check kernels read";
  EXPECT_EQ(s.frees.load(), allocations);
  EXPECT_GT(allocations, 0u);
  EXPECT_GT(s.done[op_free_other_stream].load() + s.done[op_take_over].load(), 0u);

  // Every byte went back: flush() returns what is fenced; what was freed since its stream's last
  // fence, and what destroyed streams left, comes back with synchronize_and_flush(), which may
  // wait for the contexts since no capture runs here.
  std::size_t const flushed = res.cached_current.flush() + res.cached_owned.flush();
  std::size_t const rest =
    res.cached_current.synchronize_and_flush() + res.cached_owned.synchronize_and_flush();
  std::printf(
    "fuzz: the final flush returned %zu bytes, then %zu unfenced or unproven\n", flushed, rest);
  for (auto const* cache : {&res.cached_current, &res.cached_owned}) {
    EXPECT_EQ(cache->statistics().cached_bytes, 0u);
    EXPECT_EQ(cache->statistics().unproven_bytes, 0u);
  }
  for (auto const* counted : {&res.counted, res.map_initial.get()}) {
    auto const st = counted->statistics();
    EXPECT_EQ(st.bytes.current, 0);
    EXPECT_EQ(st.allocations.current, 0);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (pool_baseline const& p : pools) {
    EXPECT_EQ(used_memory(p.pool), p.used) << p.name << ": used memory";
  }

  // The overrides left the process-wide ref as they found it; the local map resets.
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(device) == s.process_before);
  (void)res.map.reset(device);
  EXPECT_TRUE(res.map.get(device) == ref{*res.map_initial});
  EXPECT_EQ(cudaFree(s.counters), cudaSuccess);
  std::printf("fuzz: done, seed %llu\n", static_cast<unsigned long long>(*seed));
}

}  // namespace
