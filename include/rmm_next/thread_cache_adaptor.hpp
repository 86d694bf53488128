/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/pointer_set.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/thread_cache.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

/**
 * @file
 * @brief `thread_cache_adaptor<Upstream>`: per-thread, per-stream free lists in front of any
 * stream-ordered resource, so that most allocations and frees make no call into the upstream.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief Limits of a `thread_cache_adaptor`'s caches. */
struct thread_cache_options {
  /** @brief Bytes each thread may hold cached; a free beyond this goes straight upstream. */
  std::size_t max_cached_bytes_per_thread = std::size_t{32} << 20;
  /**
   * @brief The largest allocation that is cached; larger ones always go upstream. Values above
   * 2^62 bytes mean 2^62.
   */
  std::size_t max_block_size = std::size_t{1} << 20;
  /**
   * @brief Streams each thread keeps free lists for. A thread that uses one more gives up the
   * blocks of the stream it used least recently (see "How blocks go back upstream").
   */
  std::size_t max_streams_per_thread = 8;
  /**
   * @brief The most frees on one stream, by one thread, between two fences: events recorded on
   * the stream (about 0.3 us each) after which the blocks freed before may go back upstream from
   * any thread. A thread's list of a stream fences every free at first, and one free more in
   * every 256 after that, up to this limit. 1 fences every free.
   */
  std::size_t fence_interval = 256;
  /** @brief The most bytes freed on one stream, by one thread, since its last fence. */
  std::size_t max_unfenced_bytes = std::size_t{8} << 20;
  /**
   * @brief Ask the driver whether a stream is being captured on every allocation and free (the
   * default), so that capture bypasses the cache. Two driver queries per allocate/deallocate
   * pair (`cuStreamIsCapturing`), most of a cache hit's cost on one thread (docs/benchmarks.md).
   * `false` saves them, for programs that never capture a stream while work on it allocates or
   * frees through this adaptor: an allocation during a capture, in any capture mode, would then
   * invalidate the capture (the driver refuses the stream-id query there), and a free during
   * capture would be cached instead of becoming a graph node.
   */
  bool detect_capture = true;
};

/** @brief What a `thread_cache_adaptor`'s caches have done, summed over all threads. */
struct thread_cache_statistics {
  std::uint64_t hits;          ///< allocations served from a cache
  std::uint64_t misses;        ///< cacheable allocations that went upstream
  std::uint64_t bypasses;      ///< allocations never cacheable: too large, over-aligned, captured
  std::uint64_t cached_bytes;  ///< bytes cached by live threads now
  std::uint64_t flushes;       ///< times cached blocks went back upstream in a batch
  /**
   * @brief Bytes given up by a thread (exit, more streams than its limit) or left at a stream
   * handle that a new stream took, freed after their stream's last fence: no other stream gets
   * them. They return to the next list of their stream; those of a destroyed stream stay
   * allocated from the upstream.
   */
  std::uint64_t unproven_bytes;
};

namespace detail {

/** @brief The state the copies of one `thread_cache_adaptor` share. */
template <class Upstream>
class thread_cache_state final : public cache_backend {
 public:
  thread_cache_state(Upstream upstream, thread_cache_options const& options, int device)
    : upstream_{std::move(upstream)},
      device_{device},
      detect_capture_{options.detect_capture},
      max_block_size_{std::min(options.max_block_size, largest_cacheable_block)},
      registry_{std::make_shared<cache_registry>(this, limits_of(options))}
  {
    require_known_device(device_, "thread_cache_adaptor");
    std::lock_guard lock{release_mutex_};
    (void)release_stream();  // now, before any capture; again at the first release if refused
  }

  thread_cache_state(thread_cache_state const&)            = delete;
  thread_cache_state& operator=(thread_cache_state const&) = delete;

  /**
   * @brief Returns every thread's fenced blocks upstream; threads that still hold a cache drop
   * it, and what is left unproven stays allocated from the upstream. In a child forked while a
   * thread of the parent was inside the registry (a flush returning blocks upstream), its lock is
   * never released: the adaptor is then only cut off from the registry, without waiting.
   */
  ~thread_cache_state()
  {
    bool const unloading = runtime_unloading().load(std::memory_order_relaxed);
    {
      auto const lock = lock_unless_orphaned(registry_->mutex);
      if (!lock.owns_lock()) {
        registry_->backend = nullptr;  // the child's one thread: no other reads it now
        return;                        // unloading: no stream to destroy either
      }
      if (!unloading) { registry_->flush_locked(); }
      registry_->backend = nullptr;
      registry_->caches.clear();
    }
    if (unloading || release_stream_ == nullptr) { return; }
    // The frees queued on the release stream go on after it is destroyed.
    if (auto const destroy = driver().stream_destroy; destroy != nullptr) {
      (void)destroy(release_stream_);
    }
  }

  std::size_t release_fenced(CUevent fence, std::vector<cached_block>& blocks) noexcept override
  {
    if (blocks.empty()) { return 0; }
    if (runtime_unloading().load(std::memory_order_relaxed)) {
      blocks.clear();  // the process is ending: nothing can reuse them
      return 0;
    }
    std::lock_guard lock{release_mutex_};
    // Relaxed: in global mode, a capture on another thread would make the driver refuse some of
    // the calls below (and invalidate that capture); this thread may be capturing too.
    relaxed_capture_mode const relaxed;
    CUstream const on = release_stream();
    if (fence != nullptr && (on == nullptr || !wait_for_fence(on, fence))) { return 0; }
    cuda::stream_ref const stream{on != nullptr ? reinterpret_cast<cudaStream_t>(on)
                                                : cudaStreamPerThread};
    std::size_t bytes = 0;
    for (cached_block const& b : blocks) {
      stream_deallocate(upstream_, stream, b.ptr, b.bytes, default_alignment);
      bytes += b.bytes;
    }
    blocks.clear();
    return bytes;
  }

  void wait_for_releases() noexcept override
  {
    CUstream stream{};
    {
      std::lock_guard lock{release_mutex_};
      stream = release_stream_;  // never destroyed while the state lives
    }
    if (stream == nullptr || runtime_unloading().load(std::memory_order_relaxed)) { return; }
    // A host wait on one stream of ours, in relaxed mode: harmless to any capture.
    (void)synchronize_stream(reinterpret_cast<cudaStream_t>(stream));
  }

  /**
   * @brief Where the fences of a list of a stream of `context` go (`fence_relay`): through the
   * release stream when `context` is another one than the device's primary context, else nowhere.
   */
  fence_relay relay_for(CUcontext context) noexcept
  {
    std::lock_guard lock{release_mutex_};
    CUstream const relay = release_stream();
    if (relay == nullptr || context == nullptr || context == primary_) { return {}; }
    return {relay, primary_};
  }

  /** @brief The resource (or ref) blocks come from and go back to. */
  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }
  [[nodiscard]] Upstream const& upstream() const noexcept { return upstream_; }

  /** @brief The device whose primary context holds the release stream (`no_device`: none). */
  [[nodiscard]] int device() const noexcept { return device_; }

  /** @brief Whether allocations and frees ask if their stream is being captured. */
  [[nodiscard]] bool detect_capture() const noexcept { return detect_capture_; }

  /** @brief True when a request of `bytes` and `alignment` may be served from a cache. */
  [[nodiscard]] bool cacheable(std::size_t bytes, std::size_t alignment) const noexcept
  {
    return bytes != 0 && bytes <= max_block_size_ && is_valid_alignment(alignment);
  }

  /** @brief The calling thread's cache; nullptr once the thread's caches are gone (its exit). */
  [[gnu::always_inline]] thread_cache* local_cache() { return detail::local_cache(registry_); }

  /**
   * @brief Returns what a thread's cache gave up (`taken`) upstream and keeps the unproven part:
   * the one release-and-count path of the adaptor's calls.
   */
  void release(taken_blocks& taken) noexcept { (void)registry_->release(taken); }

  /** @brief Runs `take` (a registry's flush) under its mutex, then waits for what it returned. */
  std::size_t flush(std::size_t (cache_registry::*take)() noexcept) noexcept
  {
    std::size_t bytes = 0;
    {
      std::lock_guard lock{registry_->mutex};
      bytes = ((*registry_).*take)();
    }
    wait_for_releases();
    return bytes;
  }

  /** @brief The counts of every thread, the flushes and the unproven bytes, now. */
  [[nodiscard]] thread_cache_statistics statistics() const
  {
    auto const lock = lock_unless_orphaned(registry_->mutex);
    if (!lock.owns_lock()) {
      throw_error<logic_error>(
        "thread_cache_adaptor::statistics",
        "this process was forked while another thread was inside the adaptor's registry, whose "
        "state the child cannot read; read the statistics in the parent");
    }
    cache_counts const sum = registry_->counts_locked();
    return {sum.hits,
            sum.misses,
            sum.bypasses,
            sum.cached_bytes,
            registry_->flushes.load(std::memory_order_relaxed),
            registry_->unproven_bytes()};
  }

  /** @brief Remembers `ptr` as graph memory (allocated during stream capture): never cached. */
  void remember_graph_block(void* ptr) { graph_blocks_.insert(ptr); }

  /** @brief True (and forgets it) when `ptr` was allocated during stream capture. */
  bool forget_graph_block(void* ptr) noexcept
  {
    return !graph_blocks_.empty() && graph_blocks_.erase(ptr);
  }

 private:
  /**
   * @brief The stream blocks go back upstream on: non-blocking, in the primary context of the
   * adaptor's device, made on first use and never captured. Null without a driver or device
   * (then no GPU work exists) or when it cannot be made. `release_mutex_` held.
   */
  CUstream release_stream() noexcept
  {
    if (release_stream_ == nullptr) {
      release_stream_ = make_primary_stream(device_, primary_, primary_hold_);
    }
    return release_stream_;
  }

  static cache_limits limits_of(thread_cache_options const& o)
  {
    auto const at_least_one = [](std::size_t value, char const* name) {
      if (value == 0) {
        throw_error<std::invalid_argument>("thread_cache_adaptor",
                                           std::string{name} + " is 0; it must be at least 1");
      }
    };
    at_least_one(o.max_streams_per_thread, "max_streams_per_thread");
    at_least_one(o.fence_interval, "fence_interval");
    std::size_t const largest = std::min(o.max_block_size, largest_cacheable_block);
    std::size_t const classes = largest == 0 ? 0 : size_class_of(largest) + 1;
    return {o.max_cached_bytes_per_thread,
            o.max_streams_per_thread,
            classes,
            o.fence_interval,
            o.max_unfenced_bytes};
  }

  primary_context_hold primary_hold_;  ///< first: released after the stream and the fences
  Upstream upstream_;
  int const device_;
  bool const detect_capture_;
  std::size_t const max_block_size_;
  std::shared_ptr<cache_registry> const registry_;
  pointer_set graph_blocks_;  ///< pointers allocated during stream capture
  std::mutex release_mutex_;
  CUstream release_stream_{};
  CUcontext primary_{};  ///< the release stream's context, the device's primary one
};

}  // namespace detail

/**
 * @brief Caches freed blocks per thread and per stream in front of `Upstream`, and hands them out
 * again without calling it.
 *
 * `Upstream` is any stream-ordered resource (held by copy: rmm-next's resources are cheap
 * handles) or resource ref (what it refers to must outlive the adaptor), for example an
 * `async_device_resource`. The adaptor has the upstream's properties and satisfies the same
 * `cuda::mr` concepts, so it binds to the same refs. Copies share one cache and compare equal.
 *
 * How blocks move:
 * - A block freed on stream S by thread T goes into T's free list for S and its size class
 *   (256-byte steps up to 1 KiB, then four classes per doubling). The next allocation of that
 *   class ordered on S by T gets it back at once: stream order makes that safe.
 * - A cached block is never handed to another stream. Lists are keyed by the stream handle (and,
 *   for the default streams, by the context they name) and labelled with the stream's
 *   process-unique id (`cuStreamGetId`), so a stream created at the handle of a destroyed one
 *   never receives the old stream's blocks.
 * - Blocks may be freed by any thread on any stream: they join that thread's list for that stream.
 * - Caches are bounded (`thread_cache_options`). A free beyond the per-thread cap, and any
 *   allocation larger than `max_block_size` or aligned to more than 256 bytes, goes straight
 *   upstream.
 * - While a stream is being captured into a graph, its allocations and frees bypass the cache and
 *   become graph nodes as before; graph memory is never cached, also when freed after capture.
 * - If the upstream runs out of memory, every thread's fenced blocks go back upstream, and the
 *   allocation is retried once before `out_of_memory` reaches the caller.
 *
 * How blocks go back upstream: every `fence_interval` frees on a stream, a thread records an event
 * on it (a fence). Blocks freed before a list's fence go back upstream on a stream of the
 * adaptor's own that waits for the fence: never after a device or context synchronization, so a
 * release made from any thread, context or device is ordered after the blocks' last use, and no
 * capture anywhere in the process is harmed. That happens on `flush()` (which then waits for
 * them on the host), out of memory, when a thread exits or moves on to more streams than
 * `max_streams_per_thread`, when a new stream is found at a list's handle, and when the last copy
 * of the adaptor is destroyed. Blocks freed after their stream's last fence have nothing that
 * proves their last use done: they stay with their stream (`statistics().unproven_bytes` once
 * their thread has given them up) until it is used again, and those of a stream destroyed
 * meanwhile stay allocated from the upstream. Code that makes a stream per task should reuse
 * streams from a pool. docs/thread_cache.md gives the reasoning and the costs.
 *
 * `allocate_sync` / `deallocate_sync` go to the upstream directly. Memory from `allocate` must go
 * back through `deallocate` with the same size and alignment, and likewise for the `_sync` pair.
 *
 * The adaptor's device is the upstream's (`upstream.device()` when it has one), else the one
 * given, else the device current when the adaptor is constructed: the adaptor's own stream lives
 * in its primary context, and the upstream must accept frees ordered on it. Statistics are
 * per-thread counters summed on read.
 */
template <class Upstream>
  requires detail::stream_ordered_upstream<Upstream>
class thread_cache_adaptor
  : public cuda::forward_property<thread_cache_adaptor<Upstream>, Upstream>,
    public detail::compat_members<thread_cache_adaptor<Upstream>> {
 public:
  /**
   * @brief Caches in front of `upstream`, with the limits of `options`.
   * @throws std::invalid_argument if `options.max_streams_per_thread` or `fence_interval` is 0.
   */
  template <detail::upstream_argument<thread_cache_adaptor, Upstream> Arg = Upstream>
  explicit thread_cache_adaptor(Arg&& upstream, thread_cache_options const& options = {})
    : thread_cache_adaptor(std::in_place, std::forward<Arg>(upstream), options)
  {
  }

  /**
   * @brief Caches in front of `upstream`, an upstream of device `device` (for refs, which do not
   * say their device), with the limits of `options`.
   * @throws std::invalid_argument if `options.max_streams_per_thread` or `fence_interval` is 0.
   * @throws std::out_of_range if `device` is not one of the driver's devices.
   */
  template <detail::upstream_argument<thread_cache_adaptor, Upstream> Arg = Upstream>
  thread_cache_adaptor(Arg&& upstream, int device, thread_cache_options const& options = {})
    : state_{std::make_shared<detail::thread_cache_state<Upstream>>(
        Upstream(std::forward<Arg>(upstream)), options, device)}
  {
  }

  /**
   * @brief Allocates `bytes` in the order of `stream`, from the calling thread's cache for
   * `stream` when it holds a block of that size class.
   * @throws out_of_memory if the upstream is exhausted even after every cache was flushed.
   * @throws whatever else the upstream throws.
   */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    if (!cacheable(bytes, alignment)) { return bypass_allocate(stream, bytes, alignment); }
    cudaStream_t const handle = stream.get();
    // Capture first: asking a capturing stream for its id would invalidate the capture.
    if (state_->detect_capture() && !detail::stream_is_eager(handle)) {
      return bypass_allocate(stream, bytes, alignment);
    }
    std::uint64_t const id = detail::stream_id(handle);
    if (id == 0) { return bypass_allocate(stream, bytes, alignment); }
    std::size_t const cls             = detail::size_class_of(bytes);
    detail::thread_cache* const cache = state_->local_cache();
    if (cache == nullptr) { return allocate_upstream(stream, detail::size_class_bytes(cls)); }
    CUcontext const key = key_context(handle);
    {
      detail::spin_lock_guard const lock{cache->lock};
      if (auto* list = cache->recent(handle, key); list != nullptr && list->id == id) {
        if (void* ptr = cache->pop(*list, cls)) {
          cache->count_hit();
          return ptr;
        }
      }
    }
    return allocate_from_list(stream, key, id, cls, *cache);
  }

  /**
   * @brief Frees `ptr` in the order of `stream` into the calling thread's cache for `stream`, or
   * upstream when it is not cacheable or the cache is full. nullptr does nothing.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept
  {
    // Unloading, or a forked child: the driver is not to be asked, and nothing can reuse it.
    if (ptr == nullptr || detail::runtime_unloading().load(std::memory_order_relaxed)) { return; }
    if (!cacheable(bytes, alignment)) {
      detail::stream_deallocate(state_->upstream(), stream, ptr, bytes, alignment);
      return;
    }
    std::size_t const cls     = detail::size_class_of(bytes);
    std::size_t const rounded = detail::size_class_bytes(cls);
    cudaStream_t const handle = stream.get();
    bool const uncacheable =
      forget_graph_block(ptr) || (state_->detect_capture() && !detail::stream_is_eager(handle));
    detail::thread_cache* const cache = uncacheable ? nullptr : local_cache_noexcept();
    if (cache != nullptr) {
      CUcontext const key = key_context(handle);
      bool cached         = false;
      try {
        detail::spin_lock_guard const lock{cache->lock};
        auto* list = cache->recent(handle, key);
        if (list != nullptr && list->id != 0 && !cache->fence_due(*list, cls)) {
          cached = cache->push(*list, cls, ptr);
        }
      } catch (...) {  // std::bad_alloc growing a list: the path below frees upstream
      }
      if (cached) { return; }
      deallocate_into_list(stream, ptr, cls, key, *cache);
      return;
    }
    detail::stream_deallocate(state_->upstream(), stream, ptr, rounded, default_alignment);
  }

  /**
   * @brief Allocates from the upstream synchronously, bypassing the caches.
   * @throws whatever the upstream throws.
   */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
    requires detail::synchronous_upstream<Upstream>
  {
    return detail::sync_allocate(state_->upstream(), bytes, alignment);
  }

  /** @brief Frees memory from `allocate_sync` to the upstream synchronously. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
    requires detail::synchronous_upstream<Upstream>
  {
    detail::sync_deallocate(state_->upstream(), ptr, bytes, alignment);
  }

  /// Compile errors for a literal 0 stream; before CCCL 3.1, CCCL 3.0's names of the members above.
  using detail::compat_members<thread_cache_adaptor<Upstream>>::allocate;
  using detail::compat_members<thread_cache_adaptor<Upstream>>::deallocate;

  /**
   * @brief Returns every thread's fenced blocks upstream now, and waits on the host until the
   * upstream has them back (until their streams' work before the fences is done). Blocks freed
   * after their stream's last fence stay cached. Makes no call that harms a capture.
   * @return The bytes returned.
   */
  std::size_t flush() noexcept { return state_->flush(&detail::cache_registry::flush_locked); }

  /**
   * @brief Returns every cached block upstream, also those whose last use nothing proves done
   * (`statistics().unproven_bytes`, and the blocks freed after their stream's last fence): first
   * waits on the host for every context whose streams they were freed on (`cuCtxSynchronize`).
   * A context synchronization invalidates any capture of a stream of that context: call this
   * only where none runs, for example after destroying streams, where `flush()` does not do.
   * @return The bytes returned.
   */
  std::size_t synchronize_and_flush() noexcept
  {
    return state_->flush(&detail::cache_registry::synchronize_and_flush_locked);
  }

  /**
   * @brief Hits, misses, bypasses, bytes cached and flushes, summed over all threads now.
   * @throws logic_error in a child forked while a thread of the parent was inside the adaptor's
   * registry (a flush): its lock is never released there.
   */
  [[nodiscard]] thread_cache_statistics statistics() const { return state_->statistics(); }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return state_->upstream(); }

  /** @brief The adaptor's device, whose primary context holds its release stream (-1,
   * `detail::no_device`: none). */
  [[nodiscard]] int device() const noexcept { return state_->device(); }

  /** @brief True when both share one cache, i.e. one is a copy of the other. */
  friend bool operator==(thread_cache_adaptor const& lhs, thread_cache_adaptor const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

 private:
  /** @brief The upstream converted first, so that its device is read from what is held. */
  thread_cache_adaptor(std::in_place_t, Upstream upstream, thread_cache_options const& options)
    : state_{std::make_shared<detail::thread_cache_state<Upstream>>(
        std::move(upstream), options, detail::device_of_upstream(upstream))}
  {
  }

  /**
   * @brief The rest of `allocate` (no block in the most recent list): finds or makes the list of
   * `stream`, gives up a stale one's blocks, pops, or allocates upstream.
   */
  [[gnu::noinline]] void* allocate_from_list(cuda::stream_ref stream,
                                             CUcontext key,
                                             std::uint64_t id,
                                             std::size_t cls,
                                             detail::thread_cache& cache)
  {
    cudaStream_t const handle = stream.get();
    detail::taken_blocks stale;
    void* ptr = nullptr;
    {
      std::lock_guard lock{cache.lock};
      auto& list = cache.list_for(handle, key, label(handle, key, id), stale);
      if (list.id != id) {  // another stream now lives at this handle
        cache.relabel(list, id, stale);
        assign_context(*state_, list, handle, key);
      }
      ptr = cache.pop(list, cls);
    }
    state_->release(stale);
    if (ptr != nullptr) {
      cache.count_hit();
      return ptr;
    }
    cache.count_miss();
    return allocate_upstream(stream, detail::size_class_bytes(cls), default_alignment, &cache);
  }

  /**
   * @brief The rest of `deallocate` (not the most recent list, or a fence is due): finds or makes
   * the list of `stream`, checks its label before fencing, pushes, or frees upstream.
   */
  [[gnu::noinline]] void deallocate_into_list(cuda::stream_ref stream,
                                              void* ptr,
                                              std::size_t cls,
                                              CUcontext key,
                                              detail::thread_cache& cache) noexcept
  {
    cudaStream_t const handle = stream.get();
    detail::taken_blocks given_up;
    bool cached = false;
    try {
      std::lock_guard lock{cache.lock};
      auto& list       = cache.list_for(handle, key, label(handle, key, 0), given_up);
      bool const fence = list.id != 0 && cache.fence_due(list, cls);
      if (fence) {  // the list's label is checked before its stream is fenced
        if (std::uint64_t const id = detail::stream_id(handle); id != list.id) {
          cache.relabel(list, id, given_up);
          assign_context(*state_, list, handle, key);
        }
      }
      cached = list.id != 0 && cache.push(list, cls, ptr);
      if (cached && fence) { detail::thread_cache::fence(list); }
    } catch (...) {  // std::bad_alloc growing a list: free upstream instead
    }
    if (!cached) {
      detail::stream_deallocate(
        state_->upstream(), stream, ptr, detail::size_class_bytes(cls), default_alignment);
    }
    state_->release(given_up);
  }

  [[nodiscard]] bool cacheable(std::size_t bytes, std::size_t alignment) const noexcept
  {
    return state_->cacheable(bytes, alignment);
  }

  /** @brief The context a default-stream handle names (the current one); null for others. */
  static CUcontext key_context(cudaStream_t handle) noexcept
  {
    return detail::is_default_stream(handle) ? detail::current_context_or_null() : nullptr;
  }

  /**
   * @brief What labels a new list of `handle`: its id (`id`, or asked when 0) and its context.
   */
  auto label(cudaStream_t handle, CUcontext key, std::uint64_t id) const noexcept
  {
    return [state = state_.get(), handle, key, id](detail::thread_cache::stream_list& l) noexcept {
      l.id = id != 0 ? id : detail::stream_id(handle);
      assign_context(*state, l, handle, key);
    };
  }

  /**
   * @brief Gives `l` the context of `handle` (`key`, the context a default-stream handle names,
   * when not null) if it had another, with that context's fence relay. Not on a hit: only when a
   * list is (re)labelled.
   */
  static void assign_context(detail::thread_cache_state<Upstream>& state,
                             detail::thread_cache::stream_list& l,
                             cudaStream_t handle,
                             CUcontext key) noexcept
  {
    CUcontext const context = key != nullptr ? key : detail::stream_context(handle);
    if (l.context != context) {
      detail::thread_cache::set_context(l, context, state.relay_for(context));
    }
  }

  detail::thread_cache* local_cache_noexcept() noexcept
  {
    try {
      return state_->local_cache();
    } catch (...) {  // std::bad_alloc making the thread's cache
      return nullptr;
    }
  }

  /** @brief An allocation the cache never serves; graph memory is remembered as such. */
  void* bypass_allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    bool const fits = cacheable(bytes, alignment);
    std::size_t const upstream_bytes =
      fits ? detail::size_class_bytes(detail::size_class_of(bytes)) : bytes;
    if (detail::thread_cache* cache = state_->local_cache()) { cache->count_bypass(); }
    void* ptr = allocate_upstream(stream, upstream_bytes, fits ? default_alignment : alignment);
    if (fits && ptr != nullptr) {
      try {
        state_->remember_graph_block(ptr);
      } catch (...) {
        detail::stream_deallocate(state_->upstream(), stream, ptr, upstream_bytes, alignment);
        throw;
      }
    }
    return ptr;
  }

  /** @brief True (and forgets it) when `ptr` was allocated during stream capture. */
  bool forget_graph_block(void* ptr) noexcept { return state_->forget_graph_block(ptr); }

  /**
   * @brief Allocates from the upstream; on exhaustion flushes every cache and retries once.
   * `cache` is the calling thread's, when `stream` is eager and known: its list for `stream` is
   * fenced first, so that its blocks go back too.
   */
  void* allocate_upstream(cuda::stream_ref stream,
                          std::size_t bytes,
                          std::size_t alignment       = default_alignment,
                          detail::thread_cache* cache = nullptr)
  {
    try {
      return detail::stream_allocate(state_->upstream(), stream, bytes, alignment);
    } catch (out_of_memory const&) {
      if (!flush_for_retry(stream, cache)) { throw; }
    } catch (bad_alloc const&) {  // not an exhaustion: flushing cannot help
      throw;
    } catch (std::bad_alloc const&) {  // exhaustion reported by a resource outside rmm-next
      if (!flush_for_retry(stream, cache)) { throw; }
    }
    return detail::stream_allocate(state_->upstream(), stream, bytes, alignment);
  }

  /**
   * @brief Flushes every cache (after fencing the caller's list for `stream`, when `cache` is
   * given); a driver pool upstream then releases its unused memory, so that a large request can
   * be mapped anew within the pool's maximum size. False if nothing went back.
   */
  bool flush_for_retry(cuda::stream_ref stream, detail::thread_cache* cache) noexcept
  {
    if (cache != nullptr) {
      cudaStream_t const handle = stream.get();
      detail::taken_blocks none;
      try {
        std::lock_guard lock{cache->lock};
        CUcontext const key = key_context(handle);
        auto& list          = cache->list_for(handle, key, label(handle, key, 0), none);
        detail::thread_cache::fence(list);
      } catch (...) {  // std::bad_alloc: flush what is fenced already
      }
      state_->release(none);
    }
    if (flush() == 0) { return false; }
    if constexpr (requires(Upstream const& u) {
                    { u.pool_handle() } -> std::same_as<cudaMemPool_t>;
                  }) {
      detail::relaxed_capture_mode const relaxed;
      (void)cudaMemPoolTrimTo(state_->upstream().pool_handle(), 0);
      (void)cudaGetLastError();
    }
    return true;
  }

  std::shared_ptr<detail::thread_cache_state<Upstream>> state_;
};

/** @brief `thread_cache_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
thread_cache_adaptor(Upstream, thread_cache_options const& = {}) -> thread_cache_adaptor<Upstream>;

/** @brief `thread_cache_adaptor{upstream, device}` holds a copy of `upstream`. */
template <class Upstream>
thread_cache_adaptor(Upstream, int, thread_cache_options const& = {})
  -> thread_cache_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<thread_cache_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<thread_cache_adaptor<device_async_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  !cuda::has_property<thread_cache_adaptor<device_async_resource_ref>, cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
