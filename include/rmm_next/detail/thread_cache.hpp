/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/stream.hpp>

#include <cuda.h>  // types only
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
 * classes, the per-thread cache with its fenced per-stream free lists, the registry through which
 * other threads flush a thread's cache and which keeps the blocks nothing proves done yet, and the
 * thread-local table of caches.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

// ---- Size classes ---------------------------------------------------------------------------

/**
 * @brief The size class of `bytes` (> 0): 256-byte steps up to 1 KiB, then four classes per
 * doubling (1280, 1536, 1792, 2048, 2560, ...), so a block is at most 25 % larger than asked.
 */
[[gnu::always_inline]] constexpr std::size_t size_class_of(std::size_t bytes) noexcept
{
  if (bytes <= 1024) { return (bytes + 255) / 256 - 1; }
  auto const power       = static_cast<std::size_t>(std::bit_width(bytes - 1) - 1);  // >= 10
  std::size_t const step = std::size_t{1} << (power - 2);
  std::size_t const k    = (bytes - (std::size_t{1} << power) + step - 1) / step;  // 1..4
  return 4 + (power - 10) * 4 + (k - 1);
}

/** @brief The bytes of every block of size class `index`. */
[[gnu::always_inline]] constexpr std::size_t size_class_bytes(std::size_t index) noexcept
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

/** @brief The largest block the caches hold: larger limits are lowered to it (no class wraps). */
inline constexpr std::size_t largest_cacheable_block = std::size_t{1} << 62;
static_assert(size_class_bytes(size_class_of(largest_cacheable_block)) == largest_cacheable_block);

// ---- Blocks going back upstream --------------------------------------------------------------

/** @brief A block held by a cache: its pointer and the size it was allocated with upstream. */
struct cached_block {
  void* ptr;
  std::size_t bytes;
};

/** @brief The bytes of `blocks`. */
inline std::size_t bytes_of(std::vector<cached_block> const& blocks) noexcept
{
  std::size_t bytes = 0;
  for (cached_block const& b : blocks) {
    bytes += b.bytes;
  }
  return bytes;
}

/**
 * @brief Blocks whose last uses all come before `fence`, an event recorded on their stream after
 * their frees (null where no driver exists, so no GPU work either). The batch owns the event.
 */
struct fenced_batch {
  CUevent fence{};
  std::uint64_t stream_id{};  ///< the stream's, to keep the blocks for if the wait is refused
  CUcontext context{};
  std::vector<cached_block> blocks;
};

/**
 * @brief Blocks freed on the stream of id `stream_id` after its last fence: nothing proves their
 * last use done, so no other stream may have them. They wait for their stream to be used again.
 */
struct unproven_batch {
  std::uint64_t stream_id{};
  CUcontext context{};  ///< the stream's context, which `synchronize_and_flush` waits for
  std::vector<cached_block> blocks;
};

/** @brief What a cache gave up in one step: batches to release and batches to keep waiting. */
struct taken_blocks {
  std::vector<fenced_batch> fenced;
  std::vector<unproven_batch> unproven;

  [[nodiscard]] bool empty() const noexcept { return fenced.empty() && unproven.empty(); }
};

/**
 * @brief The typed side of a cache: returns blocks to the upstream. Implemented by the adaptor's
 * shared state; the type-erased parts below reach the upstream only through it.
 */
class cache_backend {
 public:
  /**
   * @brief Returns `blocks` upstream, ordered after `fence` (null: no GPU work exists), on a
   * stream of the backend's own: nothing waits on the host, and no call is made that a capture
   * anywhere in the process would be harmed by. The blocks it could not order (the driver
   * refused the wait) stay in `blocks`.
   * @return The bytes returned.
   */
  virtual std::size_t release_fenced(CUevent fence, std::vector<cached_block>& blocks) noexcept = 0;

  /** @brief Waits on the host until the blocks released so far are back in the upstream. */
  virtual void wait_for_releases() noexcept = 0;

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
  [[gnu::always_inline]] void lock() noexcept
  {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        std::this_thread::yield();
      }
    }
  }
  [[gnu::always_inline]] void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

/** @brief Holds a `spin_lock` for its scope (the hot paths' guard, inlined like the lock). */
class spin_lock_guard {
 public:
  [[gnu::always_inline]] explicit spin_lock_guard(spin_lock& l) noexcept : lock_{l} { l.lock(); }
  spin_lock_guard(spin_lock_guard const&)            = delete;
  spin_lock_guard& operator=(spin_lock_guard const&) = delete;
  [[gnu::always_inline]] ~spin_lock_guard() { lock_.unlock(); }

 private:
  spin_lock& lock_;
};

/** @brief A counter written by one thread and read by any: relaxed loads and stores, no RMW. */
class owner_counter {
 public:
  [[gnu::always_inline]] void add(std::uint64_t n) noexcept
  {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  [[gnu::always_inline]] void sub(std::uint64_t n) noexcept
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

  cache_counts& operator+=(cache_counts const& o) noexcept
  {
    hits += o.hits;
    misses += o.misses;
    bypasses += o.bypasses;
    cached_bytes += o.cached_bytes;
    return *this;
  }
};

/** @brief Limits of every thread's cache (see `thread_cache_options`). */
struct cache_limits {
  std::size_t max_cached_bytes;
  std::size_t max_streams;
  std::size_t classes;             ///< size classes up to the largest cached block
  std::size_t fence_interval;      ///< at most this many frees on a stream between its fences
  std::size_t max_unfenced_bytes;  ///< and at most this many bytes
};

/**
 * @brief Frees on a stream's list per step of its fence interval: a new list fences every free,
 * and one that has seen `fence_ramp * k` frees every k-th, up to the limit. A short-lived stream
 * (a stream per task) thus leaves nothing unproven when it is destroyed, while a long-lived one
 * pays for a fence once every `fence_interval` frees.
 */
inline constexpr std::size_t fence_ramp = 256;

class cache_registry;

// ---- One thread's cache for one adaptor -------------------------------------------------------

/**
 * @brief Where the fences of a list of a stream of another context than the device's primary one
 * are relayed: `stream`, of `primary`, waits for each and records the list's event there, so that
 * the event stays valid after that context is destroyed (`record_lasting_fence`). A null `stream`:
 * fences are recorded in the stream's own context.
 */
struct fence_relay {
  CUstream stream{};
  CUcontext primary{};
};

/**
 * @brief The blocks one thread has freed through one adaptor, in a free list per stream and size
 * class.
 *
 * Only its thread pushes and pops; another thread may take the fenced blocks out (a flush). Both
 * hold `lock`. A list is keyed by the stream handle, and for the default-stream handles also by
 * the context they name; it is labelled with the stream's process-unique id. An allocation that
 * finds a different id at the handle (the stream was destroyed and another made there) must not
 * use the list: its blocks may still be in use by the old stream's work.
 *
 * Each list has a fence: an event recorded on its stream, during one of its thread's calls on
 * that stream, every `fence_interval` frees. The blocks freed before the fence (at the bottom of
 * each size class's stack) may go to any stream once the fence is waited on; the later ones only
 * back to their own stream.
 */
class thread_cache {
 public:
  /** @brief One size class of one stream: blocks below `fenced` were freed before the fence. */
  struct bin {
    std::vector<void*> blocks;
    std::size_t fenced{};
  };

  /** @brief A stream's free lists. */
  struct stream_list {
    cudaStream_t handle{};
    CUcontext key_context{};  ///< the context a default-stream handle names; else null
    CUcontext context{};      ///< the stream's context
    fence_relay relay{};      ///< for a context other than the primary one: where fences live
    std::uint64_t id{};
    std::uint64_t last_use{};
    std::size_t bytes{};
    std::size_t unfenced{};        ///< blocks freed since the last fence
    std::size_t unfenced_bytes{};  ///< and their bytes
    std::uint64_t frees{};         ///< frees into the list since it was made
    bool in_use{};
    CUevent fence{};
    std::vector<bin> bins;
  };

  thread_cache(cache_registry& registry, cache_limits const& limits)
    : registry_{registry}, limits_{limits}, lists_(limits.max_streams)
  {
  }
  thread_cache(thread_cache const&)            = delete;
  thread_cache& operator=(thread_cache const&) = delete;
  ~thread_cache()
  {
    for (stream_list& l : lists_) {
      destroy_fence_event(l.fence);
    }
  }

  spin_lock lock;

  /**
   * @brief The list of `handle` (and `key_context`) if the thread has one, or nullptr: the hot
   * path's lookup, the most recently used list first, then the others (at most
   * `max_streams_per_thread`, so that a thread alternating between a few streams stays on the hot
   * path); `list_for` makes the missing ones. Lock held.
   */
  [[gnu::always_inline]] stream_list* recent(cudaStream_t handle, CUcontext key_context) noexcept
  {
    if (stream_list& l = lists_[mru_]; matches(l, handle, key_context)) {
      l.last_use = ++tick_;
      return &l;
    }
    for (std::size_t i = 0; i < lists_.size(); ++i) {
      if (stream_list& l = lists_[i]; matches(l, handle, key_context)) {
        mru_       = i;
        l.last_use = ++tick_;
        return &l;
      }
    }
    return nullptr;
  }

  /**
   * @brief The list of `handle` (and `key_context`), made if none exists: `label(list)` then sets
   * its id and context, and blocks left unproven on that stream by an exited thread or an earlier
   * list join it. When every list is taken, the least recently used one gives up its blocks into
   * `out` and is reused. Lock held.
   */
  template <class Label>
  stream_list& list_for(cudaStream_t handle,
                        CUcontext key_context,
                        Label&& label,
                        taken_blocks& out)
  {
    if (stream_list* found = recent(handle, key_context)) { return *found; }
    ++tick_;
    std::size_t victim = 0;
    for (std::size_t i = 0; i < lists_.size(); ++i) {
      stream_list const& l = lists_[i];
      if (!l.in_use || (lists_[victim].in_use && l.last_use < lists_[victim].last_use)) {
        victim = i;
      }
    }
    stream_list& l = lists_[victim];
    fence_if_per_thread(l);
    take_all(l, out);
    if (l.bins.empty()) { l.bins.resize(limits_.classes); }
    l.frees       = 0;
    l.handle      = handle;
    l.key_context = key_context;
    l.in_use      = true;
    label(l);
    mru_ = victim;
    adopt(l);
    return touch(l);
  }

  /**
   * @brief Gives `list` to the stream of id `id` after a stale id was found at its handle: its
   * blocks go into `out` first. The caller sets its context (`set_context`). Lock held.
   */
  void relabel(stream_list& list, std::uint64_t id, taken_blocks& out)
  {
    take_all(list, out);
    list.id    = id;
    list.frees = 0;
    adopt(list);
  }

  /**
   * @brief Gives `list` to a stream of another context, `context`, whose fences go through `relay`
   * (see `fence_relay`); its fence event is made anew at the next fence. Lock held.
   */
  static void set_context(stream_list& list, CUcontext context, fence_relay relay) noexcept
  {
    destroy_fence_event(list.fence);
    list.fence   = nullptr;
    list.context = context;
    list.relay   = relay;
  }

  /** @brief Pops a block of class `cls` from `list`, or nullptr. Lock held. */
  [[gnu::always_inline]] void* pop(stream_list& list, std::size_t cls) noexcept
  {
    bin& b = list.bins[cls];
    if (b.blocks.empty()) { return nullptr; }
    void* ptr = b.blocks.back();
    b.blocks.pop_back();
    std::size_t const bytes = size_class_bytes(cls);
    if (b.fenced > b.blocks.size()) {
      b.fenced = b.blocks.size();
    } else {
      --list.unfenced;
      list.unfenced_bytes -= bytes;
    }
    list.bytes -= bytes;
    cached_bytes_ -= bytes;
    counts_.cached_bytes.sub(bytes);
    return ptr;
  }

  /** @brief Pushes `ptr` of class `cls` on `list`; false when the cap leaves no room. Lock held. */
  [[gnu::always_inline]] bool push(stream_list& list, std::size_t cls, void* ptr)
  {
    std::size_t const bytes = size_class_bytes(cls);
    if (cached_bytes_ + bytes > limits_.max_cached_bytes) { return false; }
    list.bins[cls].blocks.push_back(ptr);
    ++list.unfenced;
    list.unfenced_bytes += bytes;
    ++list.frees;
    list.bytes += bytes;
    cached_bytes_ += bytes;
    counts_.cached_bytes.add(bytes);
    return true;
  }

  /** @brief True when the next free on `list`, of class `cls`, should be followed by a fence. */
  [[nodiscard, gnu::always_inline]] bool fence_due(stream_list const& list,
                                                   std::size_t cls) const noexcept
  {
    std::size_t const interval =
      std::min<std::size_t>(limits_.fence_interval, 1 + list.frees / fence_ramp);
    return list.unfenced + 1 >= interval ||
           list.unfenced_bytes + size_class_bytes(cls) > limits_.max_unfenced_bytes;
  }

  /**
   * @brief Records `list`'s fence on its stream, which the caller knows to be alive, labelled
   * correctly and not captured: every block in the list becomes fenced. Lock held.
   */
  static void fence(stream_list& list) noexcept
  {
    if (list.unfenced == 0 || !fences_available()) { return; }
    relaxed_capture_mode const relaxed;
    bool const relayed = list.relay.stream != nullptr;
    if (list.fence == nullptr) {
      list.fence = make_fence_event(relayed ? list.relay.primary : list.context);
    }
    bool const recorded =
      relayed ? list.fence != nullptr &&
                  record_lasting_fence(list.handle,
                                       list.relay.primary,
                                       reinterpret_cast<cudaStream_t>(list.relay.stream),
                                       list.fence) != nullptr
              : record_fence(list.fence, list.handle);
    if (!recorded) { return; }
    for (bin& b : list.bins) {
      b.fenced = b.blocks.size();
    }
    list.unfenced       = 0;
    list.unfenced_bytes = 0;
  }

  /**
   * @brief Moves the fenced blocks of `list` into `out` (with its fence), and the others too
   * unless `fenced_only`. Lock held.
   */
  void take_all(stream_list& list, taken_blocks& out, bool fenced_only = false)
  {
    if (list.bytes == 0) { return; }
    bool const proven = !fences_available();  // no driver: no GPU work to wait for
    fenced_batch done{nullptr, list.id, list.context, {}};
    unproven_batch waiting{list.id, list.context, {}};
    for (std::size_t cls = 0; cls < list.bins.size(); ++cls) {
      bin& b                   = list.bins[cls];
      std::size_t const bytes  = size_class_bytes(cls);
      std::size_t const fenced = proven ? b.blocks.size() : b.fenced;
      std::size_t const end    = fenced_only ? fenced : b.blocks.size();
      for (std::size_t i = 0; i < fenced; ++i) {
        done.blocks.push_back({b.blocks[i], bytes});
      }
      for (std::size_t i = fenced; i < end; ++i) {
        waiting.blocks.push_back({b.blocks[i], bytes});
      }
    }
    // Nothing below throws: the lists change only once both batches are made.
    out.fenced.reserve(out.fenced.size() + 1);
    out.unproven.reserve(out.unproven.size() + 1);
    std::size_t taken = 0;
    for (std::size_t cls = 0; cls < list.bins.size(); ++cls) {
      bin& b                   = list.bins[cls];
      std::size_t const fenced = proven ? b.blocks.size() : b.fenced;
      std::size_t const gone   = fenced_only ? fenced : b.blocks.size();
      b.blocks.erase(b.blocks.begin(), b.blocks.begin() + static_cast<std::ptrdiff_t>(gone));
      b.fenced = 0;
      taken += gone * size_class_bytes(cls);
    }
    if (!fenced_only || proven) {
      list.unfenced       = 0;
      list.unfenced_bytes = 0;
    }
    list.bytes -= taken;
    cached_bytes_ -= taken;
    counts_.cached_bytes.sub(taken);
    if (!done.blocks.empty()) {
      done.fence = list.fence;  // the batch waits on it; the list makes a new one when needed
      list.fence = nullptr;
      out.fenced.push_back(std::move(done));
    }
    if (!waiting.blocks.empty()) { out.unproven.push_back(std::move(waiting)); }
  }

  /** @brief Moves the blocks of every list into `out` (see the one-list form). Lock held. */
  void take_all(taken_blocks& out, bool fenced_only)
  {
    for (stream_list& l : lists_) {
      take_all(l, out, fenced_only);
    }
  }

  /**
   * @brief At thread exit: fences the lists of this thread's per-thread default streams, which
   * end with the thread (see `fence_if_per_thread`). Lock held.
   */
  void fence_per_thread_streams() noexcept
  {
    for (stream_list& l : lists_) {
      fence_if_per_thread(l);
    }
  }

  [[gnu::always_inline]] void count_hit() noexcept { counts_.hits.add(1); }
  void count_miss() noexcept { counts_.misses.add(1); }
  void count_bypass() noexcept { counts_.bypasses.add(1); }

  /** @brief This cache's counters now (any thread, no lock). */
  [[nodiscard]] cache_counts counts() const noexcept
  {
    return {
      counts_.hits.get(), counts_.misses.get(), counts_.bypasses.get(), counts_.cached_bytes.get()};
  }

 private:
  static bool matches(stream_list const& l, cudaStream_t handle, CUcontext key_context) noexcept
  {
    return l.in_use && l.handle == handle && l.key_context == key_context;
  }

  /**
   * @brief Fences `l` if it is a list of the calling thread's own per-thread default stream:
   * alive while the thread is, and captured only by it. That of another context than the
   * primary one only while that context is current. Lock held.
   */
  static void fence_if_per_thread(stream_list& l) noexcept
  {
    if (!l.in_use || l.handle != cudaStreamPerThread || l.unfenced == 0 ||
        runtime_unloading().load(std::memory_order_relaxed)) {
      return;
    }
    // A context other than the device's primary one may have been destroyed since (and another
    // made at its address): it is used only while it is the thread's current context anyway.
    // Otherwise the list's last frees stay unproven (a destroyed context's work is over).
    if (l.relay.stream != nullptr && l.context != current_context_or_null()) { return; }
    context_scope const scope{l.context};
    if (scope.ok() && stream_is_eager(l.handle)) { fence(l); }
  }

  stream_list& touch(stream_list& l) noexcept
  {
    l.last_use = tick_;
    return l;
  }

  /** @brief Takes the unproven blocks of `list`'s stream back into it, unfenced. Lock held. */
  void adopt(stream_list& list);

  struct counters {
    owner_counter hits;
    owner_counter misses;
    owner_counter bypasses;
    owner_counter cached_bytes;
  };

  cache_registry& registry_;
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
 * gone), every live thread's cache, the counts of threads that have exited, and the blocks whose
 * last use nothing proves done yet.
 *
 * Held by the adaptor's state and by each thread's table entry, so its address identifies the
 * adaptor for as long as any thread still has a cache for it. Locks, outermost first: `mutex`, a
 * cache's `lock`, `unproven_mutex`.
 */
class cache_registry {
 public:
  explicit cache_registry(cache_backend* b, cache_limits const& l) : backend{b}, limits{l} {}

  std::mutex mutex;
  cache_backend* backend;  ///< guarded by mutex

  cache_limits const limits;
  std::vector<thread_cache*> caches;  ///< guarded by mutex
  cache_counts retired{};             ///< counts of exited threads; guarded by mutex
  std::atomic<std::uint64_t> flushes{0};

  /**
   * @brief Takes the fenced blocks out of every thread's cache and returns them upstream. The
   * caller holds `mutex` and `backend` is alive.
   * @return The bytes returned.
   */
  std::size_t flush_locked() noexcept
  {
    taken_blocks taken;
    try {
      take_from_caches(taken, true);
    } catch (...) {  // std::bad_alloc growing `taken`: return what was taken
    }
    return release_locked(taken);
  }

  /**
   * @brief Returns the fenced batches of `taken` upstream (counting one flush) and keeps the
   * unproven ones for their streams. `mutex` held, backend alive.
   * @return The bytes returned.
   */
  std::size_t release_locked(taken_blocks& taken) noexcept
  {
    std::size_t bytes = 0;
    for (fenced_batch& batch : taken.fenced) {
      bytes += backend->release_fenced(batch.fence, batch.blocks);
      destroy_fence_event(batch.fence);
      batch.fence = nullptr;
      if (!batch.blocks.empty()) {  // the driver refused the wait: only their stream may have them
        park(unproven_batch{batch.stream_id, batch.context, std::move(batch.blocks)});
      }
    }
    for (unproven_batch& batch : taken.unproven) {
      park(std::move(batch));
    }
    taken.fenced.clear();
    taken.unproven.clear();
    if (bytes != 0) { flushes.fetch_add(1, std::memory_order_relaxed); }
    return bytes;
  }

  /** @brief As `release_locked`, taking `mutex`; the blocks stay with the process once the
   * adaptor is gone. */
  std::size_t release(taken_blocks& taken) noexcept
  {
    if (taken.empty()) { return 0; }
    std::lock_guard lock{mutex};
    if (backend == nullptr) { return 0; }
    return release_locked(taken);
  }

  /** @brief Keeps `batch` until a list of its stream takes it back. */
  void park(unproven_batch&& batch) noexcept
  {
    if (batch.blocks.empty()) { return; }
    std::size_t const bytes = bytes_of(batch.blocks);
    std::lock_guard lock{unproven_mutex_};
    try {
      unproven_.push_back(std::move(batch));
    } catch (...) {  // std::bad_alloc: the blocks stay with the process, never reused
      return;
    }
    unproven_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

  /** @brief Takes the kept blocks of the stream of id `id` (none for id 0). */
  std::vector<cached_block> adopt(std::uint64_t id)
  {
    std::vector<cached_block> out;
    if (id == 0 || unproven_bytes_.load(std::memory_order_relaxed) == 0) { return out; }
    std::lock_guard lock{unproven_mutex_};
    for (auto it = unproven_.begin(); it != unproven_.end();) {
      if (it->stream_id != id) {
        ++it;
        continue;
      }
      std::size_t const bytes = bytes_of(it->blocks);
      if (out.empty()) {
        out = std::move(it->blocks);
      } else {
        out.insert(out.end(), it->blocks.begin(), it->blocks.end());
      }
      unproven_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      it = unproven_.erase(it);
    }
    return out;
  }

  /**
   * @brief Takes every block out of every thread's cache and every kept one, waits for the
   * contexts of their streams on the host (`cuCtxSynchronize`), and returns them upstream. The
   * caller holds `mutex`, `backend` is alive, and no stream of those contexts is being captured.
   * @return The bytes returned.
   */
  std::size_t synchronize_and_flush_locked() noexcept
  {
    taken_blocks taken;
    try {
      take_from_caches(taken, false);
      std::lock_guard lock{unproven_mutex_};
      for (unproven_batch& batch : unproven_) {
        taken.unproven.push_back(std::move(batch));
      }
      unproven_.clear();
      unproven_bytes_.store(0, std::memory_order_relaxed);
    } catch (...) {  // std::bad_alloc: what was not taken stays
    }
    std::vector<CUcontext> done;
    std::size_t bytes = 0;
    relaxed_capture_mode const relaxed;
    for (unproven_batch& batch : taken.unproven) {
      if (std::find(done.begin(), done.end(), batch.context) == done.end()) {
        context_scope const scope{batch.context};
        if (auto const sync = driver().ctx_synchronize; sync != nullptr && scope.ok()) {
          (void)sync();
        }
        try {
          done.push_back(batch.context);
        } catch (...) {  // std::bad_alloc: the next batch of this context synchronizes again
        }
      }
      bytes += backend->release_fenced(nullptr, batch.blocks);
    }
    taken.unproven.clear();
    return bytes + release_locked(taken);
  }

  /** @brief Bytes of blocks kept because nothing proves their last use done. */
  [[nodiscard]] std::size_t unproven_bytes() const noexcept
  {
    return unproven_bytes_.load(std::memory_order_relaxed);
  }

  /** @brief Sums the counts of exited threads and of every live cache. `mutex` held. */
  [[nodiscard]] cache_counts counts_locked() const noexcept
  {
    cache_counts sum = retired;
    for (thread_cache const* cache : caches) {
      sum += cache->counts();
    }
    return sum;
  }

 private:
  /** @brief Every live cache's fenced blocks (all, unless `fenced_only`) into `taken`. `mutex`
   * held. */
  void take_from_caches(taken_blocks& taken, bool fenced_only)
  {
    for (thread_cache* cache : caches) {
      std::lock_guard guard{cache->lock};
      cache->take_all(taken, fenced_only);
    }
  }

  std::mutex unproven_mutex_;
  std::vector<unproven_batch> unproven_;  ///< guarded by unproven_mutex_
  std::atomic<std::size_t> unproven_bytes_{0};
};

inline void thread_cache::adopt(stream_list& list)
{
  std::vector<cached_block> const back = registry_.adopt(list.id);
  for (cached_block const& b : back) {
    std::size_t const cls = size_class_of(b.bytes);
    list.bins[cls].blocks.push_back(b.ptr);
    ++list.unfenced;
    list.unfenced_bytes += b.bytes;
    list.bytes += b.bytes;
    cached_bytes_ += b.bytes;
    counts_.cached_bytes.add(b.bytes);
  }
}

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
 * fenced blocks go back upstream (unless the adaptor is gone), the others wait for their streams,
 * and its counts join the adaptor's.
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
    entries_.reserve(entries_.size() + 1);  // nothing below throws once the registry knows it
    auto cache = std::make_unique<thread_cache>(*registry, registry->limits);
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
    auto const lock   = lock_unless_orphaned(r.mutex);
    if (!lock.owns_lock()) { return; }  // a forked child: its blocks stay with the process
    auto const it = std::find(r.caches.begin(), r.caches.end(), e.cache.get());
    if (it == r.caches.end()) { return; }
    r.caches.erase(it);
    cache_counts c = e.cache->counts();
    c.cached_bytes = 0;
    r.retired += c;
    if (r.backend == nullptr) { return; }
    taken_blocks taken;
    try {
      std::lock_guard guard{e.cache->lock};
      e.cache->fence_per_thread_streams();
      e.cache->take_all(taken, false);
    } catch (...) {  // std::bad_alloc: the blocks not taken stay with the process
    }
    r.release_locked(taken);
  }

  /** @brief Drops the caches of adaptors that no longer exist (their blocks are already gone). */
  void prune()
  {
    std::erase_if(entries_, [](entry& e) {
      auto const lock = lock_unless_orphaned(e.registry->mutex);
      return lock.owns_lock() && e.registry->backend == nullptr;
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
[[gnu::always_inline]] inline thread_cache* local_cache(
  std::shared_ptr<cache_registry> const& registry)
{
  if (thread_last_cache.registry == registry.get()) { return thread_last_cache.cache; }
  if (thread_caches_gone) { return nullptr; }
  return &this_thread_caches().find_or_add(registry);
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
