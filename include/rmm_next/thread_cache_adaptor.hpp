/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/cccl30_members.hpp>
#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/thread_cache.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

/**
 * @file
 * @brief `thread_cache_adaptor<Upstream>`: per-thread, per-stream free lists in front of any
 * stream-ordered resource, so that most allocations and frees make no call into the upstream.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE {

/** @brief Limits of a `thread_cache_adaptor`'s caches. */
struct thread_cache_options {
  /** @brief Bytes each thread may hold cached; a free beyond this goes straight upstream. */
  std::size_t max_cached_bytes_per_thread = std::size_t{32} << 20;
  /** @brief The largest allocation that is cached; larger ones always go upstream. */
  std::size_t max_block_size = std::size_t{1} << 20;
  /**
   * @brief Streams each thread keeps free lists for. A thread that uses one more returns the
   * blocks of the stream it used least recently upstream, after synchronizing the device.
   */
  std::size_t max_streams_per_thread = 8;
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
  std::uint64_t cached_bytes;  ///< bytes cached by live threads, or waiting to go back, now
  std::uint64_t flushes;       ///< times cached blocks went back upstream in a batch
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
      max_block_size_{options.max_block_size},
      registry_{std::make_shared<cache_registry>(this, limits_of(options))}
  {
  }

  thread_cache_state(thread_cache_state const&)            = delete;
  thread_cache_state& operator=(thread_cache_state const&) = delete;

  /** @brief Returns every thread's blocks upstream; threads that still hold a cache drop it. */
  ~thread_cache_state()
  {
    std::lock_guard lock{registry_->mutex};
    if (!runtime_unloading().load(std::memory_order_relaxed)) { registry_->flush_locked(); }
    registry_->backend = nullptr;
    registry_->caches.clear();
  }

  std::size_t release_blocks(std::vector<cached_block>& blocks) noexcept override
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) { return 0; }
    std::lock_guard lock{deferred_mutex_};
    std::vector<cached_block>* work = &deferred_;  // with the blocks of earlier refused calls
    try {
      deferred_.insert(deferred_.end(), blocks.begin(), blocks.end());
      blocks.clear();
    } catch (...) {  // std::bad_alloc: `blocks` alone, this time
      work = &blocks;
    }
    if (work->empty()) { return 0; }
    device_guard const on_device{device_, std::nothrow};
    // Relaxed: this thread may synchronize while another thread captures a stream.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t const status = on_device.ok() ? cudaDeviceSynchronize() : cudaErrorInvalidDevice;
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (status != cudaSuccess) { (void)cudaGetLastError(); }  // ours; a caller's error stays
    // Without a driver or device no GPU work exists. Otherwise, if the synchronization failed
    // (refused during another thread's capture, or a lost context), the blocks may still be in
    // use: they wait for a later release.
    if (status != cudaSuccess && status != cudaErrorInsufficientDriver &&
        status != cudaErrorNoDevice) {
      deferred_bytes_.store(bytes_of(deferred_), std::memory_order_relaxed);
      return 0;
    }
    cuda::stream_ref const stream{cudaStreamPerThread};
    std::size_t bytes = 0;
    for (cached_block const& b : *work) {
      stream_deallocate(upstream_, stream, b.ptr, b.bytes, default_alignment);
      bytes += b.bytes;
    }
    work->clear();
    deferred_bytes_.store(bytes_of(deferred_), std::memory_order_relaxed);
    // Done before the caller allocates again, so the pool can hand the memory out at once.
    if (cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess) { (void)cudaGetLastError(); }
    return bytes;
  }

  /** @brief Bytes of blocks waiting for a release the driver refused. */
  [[nodiscard]] std::size_t deferred_bytes() const noexcept
  {
    return deferred_bytes_.load(std::memory_order_relaxed);
  }

  Upstream upstream_;
  int const device_;
  bool const detect_capture_;
  std::size_t const max_block_size_;
  std::shared_ptr<cache_registry> const registry_;

  /** @brief Blocks taken from caches whose release must wait (see release_blocks). */
  std::mutex deferred_mutex_;
  std::vector<cached_block> deferred_;
  std::atomic<std::size_t> deferred_bytes_{0};

  /** @brief Pointers allocated during stream capture (graph memory): never cached. */
  std::mutex graph_mutex_;
  std::unordered_set<void*> graph_blocks_;
  std::atomic<std::size_t> graph_block_count_{0};

 private:
  static std::size_t bytes_of(std::vector<cached_block> const& blocks) noexcept
  {
    std::size_t bytes = 0;
    for (cached_block const& b : blocks) {
      bytes += b.bytes;
    }
    return bytes;
  }

  static cache_limits limits_of(thread_cache_options const& o)
  {
    if (o.max_streams_per_thread == 0) {
      throw std::invalid_argument{
        "rmm_next::thread_cache_adaptor: max_streams_per_thread is 0; it must be at least 1"};
    }
    std::size_t const classes = o.max_block_size == 0 ? 0 : size_class_of(o.max_block_size) + 1;
    return {o.max_cached_bytes_per_thread, o.max_streams_per_thread, classes};
  }
};

template <class Upstream>
int device_of_upstream(Upstream const& upstream)
{
  if constexpr (requires {
                  { upstream.device() } -> std::convertible_to<int>;
                }) {
    return upstream.device();
  } else {
    int device{};
    if (cudaGetDevice(&device) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return device;
  }
}

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
 * - A cached block is never handed to another stream. It goes back upstream (where the driver
 *   pool's own stream-ordered reuse applies) when the thread's cache is flushed. Lists are keyed
 *   by the stream's process-unique id (`cuStreamGetId`), so a stream created at the handle of a
 *   destroyed one never receives the old stream's blocks.
 * - Blocks may be freed by any thread on any stream: they join that thread's list for that stream.
 * - Caches are bounded (`thread_cache_options`). A free beyond the per-thread cap, and any
 *   allocation larger than `max_block_size` or aligned to more than 256 bytes, goes straight
 *   upstream.
 * - While a stream is being captured into a graph, its allocations and frees bypass the cache and
 *   become graph nodes as before; graph memory is never cached, also when freed after capture.
 * - If the upstream runs out of memory, every thread's cache is flushed and the allocation is
 *   retried once before `out_of_memory` reaches the caller.
 * - Blocks go back upstream without naming their streams, which may be gone: the adaptor's device
 *   is synchronized first. That happens when a thread exits (its cache), when the last copy of the
 *   adaptor is destroyed (every cache), on `flush()` and out of memory, and when a thread moves on
 *   to more streams than `max_streams_per_thread`. Code that makes a stream per task should reuse
 *   streams from a pool.
 *
 * `allocate_sync` / `deallocate_sync` go to the upstream directly. Memory from `allocate` must go
 * back through `deallocate` with the same size and alignment, and likewise for the `_sync` pair.
 *
 * The adaptor's device is the upstream's (`upstream.device()` when it has one), else the device
 * current when the adaptor is constructed. Statistics are per-thread counters summed on read.
 */
template <class Upstream>
  requires detail::stream_ordered_upstream<Upstream>
class thread_cache_adaptor
  : public cuda::forward_property<thread_cache_adaptor<Upstream>, Upstream>,
    public detail::cccl30_members<thread_cache_adaptor<Upstream>> {
 public:
  /**
   * @brief Caches in front of `upstream`, with the limits of `options`.
   * @throws std::invalid_argument if `options.max_streams_per_thread` is 0.
   */
  template <detail::upstream_argument<thread_cache_adaptor, Upstream> Arg = Upstream>
  explicit thread_cache_adaptor(Arg&& upstream, thread_cache_options const& options = {})
    : thread_cache_adaptor(std::in_place, std::forward<Arg>(upstream), options)
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
    if (state_->detect_capture_ && !detail::stream_is_eager(handle)) {
      return bypass_allocate(stream, bytes, alignment);
    }
    std::uint64_t const id = detail::stream_id(handle);
    if (id == 0) { return bypass_allocate(stream, bytes, alignment); }
    std::size_t const cls             = detail::size_class_of(bytes);
    detail::thread_cache* const cache = detail::local_cache(state_->registry_);
    if (cache == nullptr) { return allocate_upstream(stream, detail::size_class_bytes(cls)); }
    std::vector<detail::cached_block> stale;
    {
      std::lock_guard lock{cache->lock};
      auto& list = cache->list_for(handle, [id] { return id; }, stale);
      if (list.id != id) {  // another stream now lives at this handle
        cache->take_all(list, stale);
        list.id = id;
      }
      if (void* ptr = cache->pop(list, cls)) {
        cache->count_hit();
        return ptr;
      }
    }
    cache->count_miss();
    release(stale);
    return allocate_upstream(stream, detail::size_class_bytes(cls));
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
    if (ptr == nullptr) { return; }
    if (!cacheable(bytes, alignment)) {
      detail::stream_deallocate(state_->upstream_, stream, ptr, bytes, alignment);
      return;
    }
    std::size_t const cls     = detail::size_class_of(bytes);
    std::size_t const rounded = detail::size_class_bytes(cls);
    cudaStream_t const handle = stream.get();
    bool const uncacheable =
      forget_graph_block(ptr) || (state_->detect_capture_ && !detail::stream_is_eager(handle));
    detail::thread_cache* const cache = uncacheable ? nullptr : local_cache_noexcept();
    std::vector<detail::cached_block> evicted;
    bool cached = false;
    if (cache != nullptr) {
      std::uint64_t id = 1;  // the list's label is read only when the list is made
      try {
        std::lock_guard lock{cache->lock};
        auto& list =
          cache->list_for(handle, [&] { return id = detail::stream_id(handle); }, evicted);
        cached = id != 0 && cache->push(list, cls, ptr);
      } catch (...) {  // std::bad_alloc growing a list: free upstream instead
      }
    }
    if (!cached) {
      detail::stream_deallocate(state_->upstream_, stream, ptr, rounded, default_alignment);
    }
    release(evicted);
  }

  /**
   * @brief Allocates from the upstream synchronously, bypassing the caches.
   * @throws whatever the upstream throws.
   */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
    requires detail::synchronous_upstream<Upstream>
  {
    return detail::sync_allocate(state_->upstream_, bytes, alignment);
  }

  /** @brief Frees memory from `allocate_sync` to the upstream synchronously. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
    requires detail::synchronous_upstream<Upstream>
  {
    detail::sync_deallocate(state_->upstream_, ptr, bytes, alignment);
  }

  /// CCCL 3.0's names of the members above.
  using detail::cccl30_members<thread_cache_adaptor<Upstream>>::allocate;
  using detail::cccl30_members<thread_cache_adaptor<Upstream>>::deallocate;

  /**
   * @brief Returns every thread's cached blocks upstream now (after synchronizing the device).
   * @return The bytes returned.
   */
  std::size_t flush() noexcept
  {
    std::lock_guard lock{state_->registry_->mutex};
    return state_->registry_->flush_locked();
  }

  /** @brief Hits, misses, bypasses, bytes cached and flushes, summed over all threads now. */
  [[nodiscard]] thread_cache_statistics statistics() const
  {
    detail::cache_registry& r = *state_->registry_;
    std::lock_guard lock{r.mutex};
    detail::cache_counts sum = r.retired;
    for (detail::thread_cache const* cache : r.caches) {
      detail::cache_counts const c = cache->counts();
      sum.hits += c.hits;
      sum.misses += c.misses;
      sum.bypasses += c.bypasses;
      sum.cached_bytes += c.cached_bytes;
    }
    return {sum.hits,
            sum.misses,
            sum.bypasses,
            sum.cached_bytes + state_->deferred_bytes(),
            r.flushes.load(std::memory_order_relaxed)};
  }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return state_->upstream_; }

  /** @brief The device whose work is synchronized before blocks go back upstream (-1: none). */
  [[nodiscard]] int device() const noexcept { return state_->device_; }

  /** @brief True when both share one cache, i.e. one is a copy of the other. */
  friend bool operator==(thread_cache_adaptor const& lhs, thread_cache_adaptor const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

 private:
  thread_cache_adaptor(std::in_place_t, Upstream upstream, thread_cache_options const& options)
    : thread_cache_adaptor(detail::device_of_upstream(upstream), std::move(upstream), options)
  {
  }

  thread_cache_adaptor(int device, Upstream&& upstream, thread_cache_options const& options)
    : state_{std::make_shared<detail::thread_cache_state<Upstream>>(
        std::move(upstream), options, device)}
  {
  }

  [[nodiscard]] bool cacheable(std::size_t bytes, std::size_t alignment) const noexcept
  {
    return bytes != 0 && bytes <= state_->max_block_size_ && alignment <= default_alignment &&
           alignment != 0 && (alignment & (alignment - 1)) == 0;
  }

  detail::thread_cache* local_cache_noexcept() noexcept
  {
    try {
      return detail::local_cache(state_->registry_);
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
    if (detail::thread_cache* cache = detail::local_cache(state_->registry_)) {
      cache->count_bypass();
    }
    void* ptr = allocate_upstream(stream, upstream_bytes, fits ? default_alignment : alignment);
    if (fits && ptr != nullptr) {
      std::lock_guard lock{state_->graph_mutex_};
      state_->graph_blocks_.insert(ptr);
      state_->graph_block_count_.store(state_->graph_blocks_.size(), std::memory_order_relaxed);
    }
    return ptr;
  }

  /** @brief True (and forgets it) when `ptr` was allocated during stream capture. */
  bool forget_graph_block(void* ptr) noexcept
  {
    if (state_->graph_block_count_.load(std::memory_order_relaxed) == 0) { return false; }
    std::lock_guard lock{state_->graph_mutex_};
    bool const found = state_->graph_blocks_.erase(ptr) != 0;
    state_->graph_block_count_.store(state_->graph_blocks_.size(), std::memory_order_relaxed);
    return found;
  }

  /** @brief Allocates from the upstream; on exhaustion flushes every cache and retries once. */
  void* allocate_upstream(cuda::stream_ref stream,
                          std::size_t bytes,
                          std::size_t alignment = default_alignment)
  {
    try {
      return detail::stream_allocate(state_->upstream_, stream, bytes, alignment);
    } catch (out_of_memory const&) {
      if (!flush_for_retry()) { throw; }
    } catch (bad_alloc const&) {  // not an exhaustion: flushing cannot help
      throw;
    } catch (std::bad_alloc const&) {  // exhaustion reported by a resource outside rmm-next
      if (!flush_for_retry()) { throw; }
    }
    return detail::stream_allocate(state_->upstream_, stream, bytes, alignment);
  }

  /**
   * @brief Flushes every cache; a driver pool upstream then releases its unused memory, so that a
   * large request can be mapped anew within the pool's maximum size. False if nothing was cached.
   */
  bool flush_for_retry() noexcept
  {
    if (flush() == 0) { return false; }
    if constexpr (requires(Upstream const& u) {
                    { u.pool_handle() } -> std::same_as<cudaMemPool_t>;
                  }) {
      (void)cudaMemPoolTrimTo(state_->upstream_.pool_handle(), 0);
      (void)cudaGetLastError();
    }
    return true;
  }

  /** @brief Returns blocks taken from this thread's cache upstream. */
  void release(std::vector<detail::cached_block>& blocks) noexcept
  {
    if (blocks.empty()) { return; }
    if (state_->release_blocks(blocks) != 0) {
      state_->registry_->flushes.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::shared_ptr<detail::thread_cache_state<Upstream>> state_;
};

/** @brief `thread_cache_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
thread_cache_adaptor(Upstream, thread_cache_options const& = {}) -> thread_cache_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<thread_cache_adaptor<async_device_resource>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<thread_cache_adaptor<async_device_resource>,
                                                cuda::mr::device_accessible>);
static_assert(detail::stream_ordered_resource_with<thread_cache_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(
  !cuda::has_property<thread_cache_adaptor<async_device_resource>, cuda::mr::host_accessible>);

/**
 * @brief Puts a `thread_cache_adaptor` in front of the process-wide resource of `device`, so that
 * every user of `get_per_device_resource_ref(device)` and `get_current_device_resource_ref()` on
 * that device allocates through it. One line:
 * @code
 * rmm_next::enable_thread_cache(0);
 * @endcode
 *
 * The adaptor wraps the ref set for `device` now and lives until the process ends. Calling this
 * again while that adaptor is still the device's ref changes nothing.
 * @return The ref the adaptor wraps (set it back to remove the cache).
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 */
inline device_async_resource_ref enable_thread_cache(int device,
                                                     thread_cache_options const& options = {})
{
  using adaptor = thread_cache_adaptor<device_async_resource_ref>;
  struct installed {
    adaptor* cache;
    device_async_resource_ref wrapped;
  };
  static std::mutex mutex;
  static auto* const by_device = new std::vector<installed>();  // never destroyed, as the map
  std::lock_guard lock{mutex};
  device_async_resource_ref const current = get_per_device_resource_ref(device);
  for (installed const& i : *by_device) {
    if (current == device_async_resource_ref{*i.cache}) { return i.wrapped; }
  }
  auto* cache = new adaptor{current, options};
  by_device->push_back({cache, current});
  return set_per_device_resource_ref(device, device_async_resource_ref{*cache});
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE
