/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The machinery behind `thread_cache_adaptor`, independent of the upstream's type: size
 * classes, the per-thread cache with its per-stream free lists, the registry through which other
 * threads flush a thread's cache, and the thread-local table of caches.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

// ---- Size classes ---------------------------------------------------------------------------

/**
 * @brief The size class of `bytes` (> 0): 256-byte steps up to 1 KiB, then four classes per
 * doubling (1280, 1536, 1792, 2048, 2560, ...), so a block is at most 25 % larger than asked.
 */
constexpr std::size_t size_class_of(std::size_t bytes) noexcept
{
  if (bytes <= 1024) { return (bytes + 255) / 256 - 1; }
  auto const power       = static_cast<std::size_t>(std::bit_width(bytes - 1) - 1);  // >= 10
  std::size_t const step = std::size_t{1} << (power - 2);
  std::size_t const k    = (bytes - (std::size_t{1} << power) + step - 1) / step;  // 1..4
  return 4 + (power - 10) * 4 + (k - 1);
}

/** @brief The bytes of every block of size class `index`. */
constexpr std::size_t size_class_bytes(std::size_t index) noexcept
{
  if (index < 4) { return (index + 1) * 256; }
  std::size_t const power = 10 + (index - 4) / 4;
  std::size_t const k     = (index - 4) % 4 + 1;
  return (std::size_t{1} << power) + k * (std::size_t{1} << (power - 2));
}

static_assert(size_class_bytes(size_class_of(1)) == 256);
static_assert(size_class_bytes(size_class_of(1025)) == 1280);
static_assert(size_class_bytes(size_class_of(2048)) == 2048);
static_assert(size_class_bytes(size_class_of(2049)) == 2560);
static_assert(size_class_bytes(size_class_of(std::size_t{1} << 20)) == std::size_t{1} << 20);

// ---- Blocks going back upstream --------------------------------------------------------------

/** @brief A block held by a cache: its pointer and the size it was allocated with upstream. */
struct cached_block {
  void* ptr;
  std::size_t bytes;
};

/**
 * @brief The typed side of a cache: returns blocks to the upstream. Implemented by the adaptor's
 * shared state; the type-erased parts below reach the upstream only through it.
 */
class cache_backend {
 public:
  /**
   * @brief Returns `blocks` upstream. Their streams may be gone, so none is named: the device is
   * synchronized first, then each block is freed on the calling thread's default stream. Blocks
   * that cannot go yet (the synchronization was refused) stay with the backend for a later call.
   * @return The bytes returned.
   */
  virtual std::size_t release_blocks(std::vector<cached_block>& blocks) noexcept = 0;

 protected:
  cache_backend()                                = default;
  cache_backend(cache_backend const&)            = delete;
  cache_backend& operator=(cache_backend const&) = delete;
  ~cache_backend()                               = default;
};

/** @brief A small lock for a thread's own cache: uncontended except while another thread flushes.
 */
class spin_lock {
 public:
  void lock() noexcept
  {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

/** @brief A counter written by one thread and read by any: relaxed loads and stores, no RMW. */
class owner_counter {
 public:
  void add(std::uint64_t n) noexcept
  {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void sub(std::uint64_t n) noexcept
  {
    value_.store(value_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t get() const noexcept
  {
    return value_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<std::uint64_t> value_{0};
};

/** @brief Counts of one cache, or of several summed. */
struct cache_counts {
  std::uint64_t hits{};
  std::uint64_t misses{};
  std::uint64_t bypasses{};
  std::uint64_t cached_bytes{};
};

/** @brief Limits of every thread's cache (see `thread_cache_options`). */
struct cache_limits {
  std::size_t max_cached_bytes;
  std::size_t max_streams;
  std::size_t classes;  ///< size classes up to the largest cached block
};

// ---- One thread's cache for one adaptor -------------------------------------------------------

/**
 * @brief The blocks one thread has freed through one adaptor, in a free list per stream and size
 * class.
 *
 * Only its thread pushes and pops; another thread may take everything out (a flush). Both hold
 * `lock`. A list is keyed by the stream handle and labelled with the stream's process-unique id;
 * an allocation that finds a different id at the handle (the stream was destroyed and another made
 * there) must not use the list: its blocks may still be in use by the old stream's work.
 */
class thread_cache {
 public:
  explicit thread_cache(cache_limits const& limits) : limits_{limits}, lists_(limits.max_streams) {}

  /** @brief A stream's free lists. */
  struct stream_list {
    cudaStream_t handle{};
    std::uint64_t id{};
    std::uint64_t last_use{};
    std::size_t bytes{};
    bool in_use{};
    std::vector<std::vector<void*>> bins;
  };

  spin_lock lock;

  /**
   * @brief The list of `handle`, made (labelled `id` once `id_of` gives it) if none exists. When
   * every list is taken, the least recently used one is emptied into `evicted` and reused. Lock
   * held.
   */
  template <class IdOf>
  stream_list& list_for(cudaStream_t handle, IdOf&& id_of, std::vector<cached_block>& evicted)
  {
    ++tick_;
    if (lists_[mru_].in_use && lists_[mru_].handle == handle) { return touch(lists_[mru_]); }
    std::size_t victim = 0;
    for (std::size_t i = 0; i < lists_.size(); ++i) {
      stream_list& l = lists_[i];
      if (l.in_use && l.handle == handle) {
        mru_ = i;
        return touch(l);
      }
      if (!l.in_use || (lists_[victim].in_use && l.last_use < lists_[victim].last_use)) {
        victim = i;
      }
    }
    stream_list& l = lists_[victim];
    take_all(l, evicted);
    if (l.bins.empty()) { l.bins.resize(limits_.classes); }
    l.handle = handle;
    l.id     = id_of();
    l.in_use = true;
    mru_     = victim;
    return touch(l);
  }

  /** @brief Pops a block of class `cls` from `list`, or nullptr. Lock held. */
  void* pop(stream_list& list, std::size_t cls) noexcept
  {
    std::vector<void*>& bin = list.bins[cls];
    if (bin.empty()) { return nullptr; }
    void* ptr = bin.back();
    bin.pop_back();
    std::size_t const bytes = size_class_bytes(cls);
    list.bytes -= bytes;
    cached_bytes_ -= bytes;
    counts_.cached_bytes.sub(bytes);
    return ptr;
  }

  /** @brief Pushes `ptr` of class `cls` on `list`; false when the cap leaves no room. Lock held. */
  bool push(stream_list& list, std::size_t cls, void* ptr)
  {
    std::size_t const bytes = size_class_bytes(cls);
    if (cached_bytes_ + bytes > limits_.max_cached_bytes) { return false; }
    list.bins[cls].push_back(ptr);
    list.bytes += bytes;
    cached_bytes_ += bytes;
    counts_.cached_bytes.add(bytes);
    return true;
  }

  /** @brief Moves every block of `list` into `out`. Lock held. */
  void take_all(stream_list& list, std::vector<cached_block>& out)
  {
    if (list.bytes == 0) { return; }
    for (std::size_t cls = 0; cls < list.bins.size(); ++cls) {
      for (void* ptr : list.bins[cls]) {
        out.push_back({ptr, size_class_bytes(cls)});
      }
      list.bins[cls].clear();
    }
    cached_bytes_ -= list.bytes;
    counts_.cached_bytes.sub(list.bytes);
    list.bytes = 0;
  }

  /** @brief Moves every block of every list into `out`. Lock held. */
  void take_all(std::vector<cached_block>& out)
  {
    for (stream_list& l : lists_) {
      take_all(l, out);
    }
  }

  void count_hit() noexcept { counts_.hits.add(1); }
  void count_miss() noexcept { counts_.misses.add(1); }
  void count_bypass() noexcept { counts_.bypasses.add(1); }

  /** @brief This cache's counters now (any thread, no lock). */
  [[nodiscard]] cache_counts counts() const noexcept
  {
    return {
      counts_.hits.get(), counts_.misses.get(), counts_.bypasses.get(), counts_.cached_bytes.get()};
  }

 private:
  stream_list& touch(stream_list& l) noexcept
  {
    l.last_use = tick_;
    return l;
  }

  struct counters {
    owner_counter hits;
    owner_counter misses;
    owner_counter bypasses;
    owner_counter cached_bytes;
  };

  cache_limits limits_;
  std::vector<stream_list> lists_;
  std::size_t mru_{0};
  std::uint64_t tick_{0};
  std::size_t cached_bytes_{0};
  counters counts_;
};

// ---- The registry of one adaptor's caches ---------------------------------------------------

/**
 * @brief What the caches of one adaptor share with it: the backend (null once the adaptor is
 * gone), every live thread's cache, and the counts of threads that have exited.
 *
 * Held by the adaptor's state and by each thread's table entry, so its address identifies the
 * adaptor for as long as any thread still has a cache for it.
 */
struct cache_registry {
  explicit cache_registry(cache_backend* b, cache_limits const& l) : backend{b}, limits{l} {}

  std::mutex mutex;
  cache_backend* backend;  ///< guarded by mutex
  cache_limits const limits;
  std::vector<thread_cache*> caches;  ///< guarded by mutex
  cache_counts retired{};             ///< counts of exited threads; guarded by mutex
  std::atomic<std::uint64_t> flushes{0};

  /**
   * @brief Takes every block out of every thread's cache and returns them upstream. The caller
   * holds `mutex` and `backend` is alive.
   * @return The bytes returned.
   */
  std::size_t flush_locked() noexcept
  {
    std::vector<cached_block> blocks;
    try {
      for (thread_cache* cache : caches) {
        std::lock_guard guard{cache->lock};
        cache->take_all(blocks);
      }
    } catch (...) {  // std::bad_alloc growing `blocks`: return what was taken
    }
    return release(blocks);
  }

  /** @brief Returns `blocks` upstream and counts one flush. `mutex` held, backend alive. */
  std::size_t release(std::vector<cached_block>& blocks) noexcept
  {
    std::size_t const bytes = backend->release_blocks(blocks);
    if (bytes != 0) { flushes.fetch_add(1, std::memory_order_relaxed); }
    return bytes;
  }
};

// ---- Each thread's caches --------------------------------------------------------------------

/** @brief The last cache a thread used: a check of one pointer on the hot path. */
struct last_cache {
  cache_registry const* registry;
  thread_cache* cache;
};
inline thread_local last_cache thread_last_cache{nullptr, nullptr};
/** @brief Set when the thread's table of caches has been destroyed (the thread is exiting). */
inline thread_local bool thread_caches_gone{false};

/**
 * @brief A thread's caches, one per adaptor it has used. When the thread exits, each cache's
 * blocks go back upstream (unless the adaptor is gone) and its counts join the adaptor's.
 */
class thread_cache_table {
 public:
  thread_cache_table()                                     = default;
  thread_cache_table(thread_cache_table const&)            = delete;
  thread_cache_table& operator=(thread_cache_table const&) = delete;

  ~thread_cache_table()
  {
    thread_last_cache  = {nullptr, nullptr};
    thread_caches_gone = true;
    for (entry& e : entries_) {
      retire(e);
    }
  }

  /** @brief This thread's cache for the adaptor of `registry`, made on first use. */
  thread_cache& find_or_add(std::shared_ptr<cache_registry> const& registry)
  {
    for (entry& e : entries_) {
      if (e.registry == registry) { return remember(e); }
    }
    prune();
    auto cache = std::make_unique<thread_cache>(registry->limits);
    {
      std::lock_guard lock{registry->mutex};
      registry->caches.push_back(cache.get());
    }
    entries_.push_back(entry{registry, std::move(cache)});
    return remember(entries_.back());
  }

 private:
  struct entry {
    std::shared_ptr<cache_registry> registry;
    std::unique_ptr<thread_cache> cache;
  };

  static thread_cache& remember(entry& e) noexcept
  {
    thread_last_cache = {e.registry.get(), e.cache.get()};
    return *e.cache;
  }

  /** @brief Unregisters the cache of `e`, returning its blocks while the adaptor lives. */
  static void retire(entry& e) noexcept
  {
    cache_registry& r = *e.registry;
    std::lock_guard lock{r.mutex};
    auto const it = std::find(r.caches.begin(), r.caches.end(), e.cache.get());
    if (it == r.caches.end()) { return; }
    r.caches.erase(it);
    cache_counts const c = e.cache->counts();
    r.retired.hits += c.hits;
    r.retired.misses += c.misses;
    r.retired.bypasses += c.bypasses;
    if (r.backend == nullptr) { return; }
    std::vector<cached_block> blocks;
    try {
      std::lock_guard guard{e.cache->lock};
      e.cache->take_all(blocks);
    } catch (...) {  // std::bad_alloc: the blocks not taken stay with the process
    }
    r.release(blocks);
  }

  /** @brief Drops the caches of adaptors that no longer exist (their blocks are already gone). */
  void prune()
  {
    std::erase_if(entries_, [](entry& e) {
      std::lock_guard lock{e.registry->mutex};
      return e.registry->backend == nullptr;
    });
  }

  std::vector<entry> entries_;
};

/** @brief The calling thread's table of caches. */
inline thread_cache_table& this_thread_caches()
{
  thread_local thread_cache_table table;
  return table;
}

/**
 * @brief The calling thread's cache for the adaptor of `registry`; nullptr once the thread's
 * table is gone (destructors of other thread-local objects running at thread exit).
 */
inline thread_cache* local_cache(std::shared_ptr<cache_registry> const& registry)
{
  if (thread_last_cache.registry == registry.get()) { return thread_last_cache.cache; }
  if (thread_caches_gone) { return nullptr; }
  return &this_thread_caches().find_or_add(registry);
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
