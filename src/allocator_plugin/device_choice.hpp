/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

/**
 * @file
 * @brief Which resource serves each device: the choices the C functions make, applied to the
 * process-wide map, and the resources the plugin keeps alive for them.
 */

namespace rmm_next::plugin {

enum class resource_kind : int {
  current_pool = rmm_next_resource_current_pool,
  owned_pool   = rmm_next_resource_owned_pool,
  managed      = rmm_next_resource_managed,
  external     = rmm_next_resource_external,
};

using cache_adaptor   = thread_cache_adaptor<device_async_resource_ref>;
using segment_adaptor = segment_cache_adaptor<device_async_resource_ref>;

/** @brief A resource choice, kept as the default for devices the plugin has not used yet. */
struct resource_choice {
  std::optional<resource_kind> kind;  ///< none: leave the device's resource as it is
  pool_options pool{};
  std::optional<thread_cache_options> cache;
  std::optional<segment_cache_options> segment;  ///< a segment cache under the thread cache
};

inline pool_options to_pool_options(rmm_next_pool_options const* o)
{
  pool_options p;
  if (o == nullptr) { return p; }
  if (o->initial_pool_size != 0) { p.initial_pool_size = o->initial_pool_size; }
  if (o->release_threshold != SIZE_MAX) { p.release_threshold = o->release_threshold; }
  if (o->maximum_pool_size != 0) { p.maximum_pool_size = o->maximum_pool_size; }
  return p;
}

inline thread_cache_options to_cache_options(rmm_next_thread_cache_options const* o)
{
  thread_cache_options c;
  if (o == nullptr) { return c; }
  if (o->max_cached_bytes_per_thread != 0) {
    c.max_cached_bytes_per_thread = o->max_cached_bytes_per_thread;
  }
  if (o->max_block_size != 0) { c.max_block_size = o->max_block_size; }
  if (o->max_streams_per_thread != 0) { c.max_streams_per_thread = o->max_streams_per_thread; }
  c.detect_capture = o->skip_capture_detection == 0;
  return c;
}

inline segment_cache_options to_segment_options(rmm_next_segment_cache_options const* o)
{
  segment_cache_options c;
  if (o == nullptr) { return c; }
  if (o->max_idle_bytes != SIZE_MAX) {  // a bound the caller chose: no fraction unless given
    c.max_idle_bytes    = o->max_idle_bytes;
    c.max_idle_fraction = 0.0;
  }
  if (o->max_idle_fraction > 0.0 || std::isnan(o->max_idle_fraction)) {
    c.max_idle_fraction = o->max_idle_fraction;  // NaN: the cache's constructor refuses it
  } else if (o->max_idle_fraction < 0.0) {
    c.max_idle_fraction = 0.0;
  }
  if (o->fence_interval != 0) { c.fence_interval = o->fence_interval; }
  return c;
}

/**
 * @brief One device's choice. Resources the plugin puts in the map are never destroyed (refs to
 * them may have been handed out); a pool replaced later is trimmed instead.
 */
class alignas(64) device_slot {
 public:
  /** @brief Applies `choice` now (the caller holds `mutex`). */
  void apply(int device, resource_choice const& choice, std::int64_t live_bytes, char const* call)
  {
    if (choice.kind) {
      if (live_bytes != 0) {
        detail::throw_error<std::logic_error>(
          "allocator_plugin",
          std::string{call} + ": device " + std::to_string(device) + " still has " +
            std::to_string(live_bytes) +
            " bytes allocated through rmm-next; free them before changing its "
            "resource");
      }
      bool const had_cache                     = cache_in_place(device);
      thread_cache_options const cache_options = cache_options_;
      if (had_cache) { remove_cache(device); }
      bool const had_segments                     = segment_ != nullptr;
      segment_cache_options const segment_options = segment_options_;
      if (had_segments) { remove_segment_cache(device); }
      install_resource(device, *choice.kind, choice.pool);
      if (had_segments && !choice.segment) { install_segment_cache(device, segment_options); }
      if (had_cache && !choice.cache) { install_cache(device, cache_options); }
    }
    if (choice.segment) { install_segment_cache(device, *choice.segment); }
    if (choice.cache) { install_cache(device, *choice.cache); }
    note_installed(device);
  }

  /**
   * @brief Puts a segment cache over the device's resource, under the thread cache when one is in
   * place (so that small blocks stay the thread cache's). Nothing when one is in place already.
   */
  void install_segment_cache(int device, segment_cache_options const& options)
  {
    if (segment_ != nullptr) { return; }
    bool const had_cache                     = cache_in_place(device);
    thread_cache_options const cache_options = cache_options_;
    if (had_cache) { remove_cache(device); }
    device_async_resource_ref const upstream = get_per_device_resource_ref(device);
    segment_         = new segment_adaptor{upstream, device, options};  // lives for the process
    segment_wraps_   = upstream;
    segment_options_ = options;
    set_per_device_resource_ref(device, device_async_resource_ref{*segment_});
    if (had_cache) { install_cache(device, cache_options); }
    note_installed(device);
  }

  /** @brief Takes the segment cache out (its idle segments go back); the thread cache stays. */
  void remove_segment_cache(int device)
  {
    if (segment_ == nullptr) { return; }
    bool const had_cache                     = cache_in_place(device);
    thread_cache_options const cache_options = cache_options_;
    if (had_cache) { remove_cache(device); }
    if (get_per_device_resource_ref(device) == device_async_resource_ref{*segment_}) {
      set_per_device_resource_ref(device, *segment_wraps_);
    }
    (void)segment_->trim();
    segment_ = nullptr;  // kept alive (refs may remain, and its live blocks go back through it)
    segment_wraps_.reset();
    if (had_cache) { install_cache(device, cache_options); }
    note_installed(device);
  }

  [[nodiscard]] segment_adaptor* segment_cache() const noexcept { return segment_; }

  /**
   * @brief The plugin's own caches when they are the top of the device's resources as the plugin
   * left them: the segment cache alone, or the thread cache over the segment cache (`cache_top`
   * true); read without the slot's lock. Whether the device's resource is still that one is the
   * caller's to check.
   */
  struct own_top {
    void* top{};  ///< segment_adaptor* or cache_adaptor*; nullptr: no cache of the plugin's on top
    bool cache_top{};
  };
  [[nodiscard]] own_top cache_on_top() const noexcept
  {
    std::uintptr_t const word = top_.load(std::memory_order_acquire);
    return {reinterpret_cast<void*>(word & ~std::uintptr_t{1}), (word & 1) != 0};
  }

  /**
   * @brief The version of the per-device map (`per_device_resource_map_access::version`) at which
   * the device's resource was last found to be `cache_on_top()`, or `not_validated`.
   * Every change the plugin makes to the device's resource changes the map's version too, so a
   * version that still matches proves the resource unchanged without reading it.
   */
  [[nodiscard]] std::uint64_t top_validated_at() const noexcept
  {
    return top_validated_at_.load(std::memory_order_relaxed);
  }
  void note_top_validated(std::uint64_t version) noexcept
  {
    top_validated_at_.store(version, std::memory_order_relaxed);
  }
  static constexpr std::uint64_t not_validated = ~std::uint64_t{0};

  void install_cache(int device, thread_cache_options const& options)
  {
    if (cache_in_place(device)) { return; }
    device_async_resource_ref const upstream = get_per_device_resource_ref(device);
    cache_         = new cache_adaptor{upstream, device, options};  // lives until the process ends
    cache_wraps_   = upstream;
    cache_options_ = options;
    set_per_device_resource_ref(device, device_async_resource_ref{*cache_});
    note_installed(device);
  }

  void remove_cache(int device)
  {
    if (!cache_in_place(device)) { return; }
    set_per_device_resource_ref(device, *cache_wraps_);
    cache_->flush();
    cache_ = nullptr;  // kept alive (refs may remain), empty
    cache_wraps_.reset();
    note_installed(device);
  }

  [[nodiscard]] bool cache_in_place(int device) const
  {
    return cache_ != nullptr &&
           get_per_device_resource_ref(device) == device_async_resource_ref{*cache_};
  }

  /** @brief The kind in place now: `external` when someone else set the device's resource. */
  [[nodiscard]] resource_kind kind(int device) const
  {
    if (installed_ && get_per_device_resource_ref(device) != *installed_) {
      return resource_kind::external;
    }
    return kind_;
  }

  [[nodiscard]] cache_adaptor* cache() const noexcept { return cache_; }

  /** @brief The pool the device's resource allocates from, when the plugin knows it. */
  [[nodiscard]] cudaMemPool_t pool(int device) const
  {
    if (kind_ == resource_kind::owned_pool && owned_ != nullptr) { return owned_->pool_handle(); }
    if (kind_ == resource_kind::managed && managed_ != nullptr) { return managed_->pool_handle(); }
    cudaMemPool_t pool{};
    if (cudaDeviceGetMemPool(&pool, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return pool;
  }

  std::mutex mutex;
  std::atomic<bool> touched{false};

 private:
  // Read by every allocation and free without the lock: beside `touched`, on the slot's first
  // cache line.
  std::atomic<std::uintptr_t> top_{};  ///< `cache_on_top()`: the pointer, tagged 1 for the cache
  std::atomic<std::uint64_t> top_validated_at_{not_validated};

  void install_resource(int device, resource_kind kind, pool_options const& options)
  {
    cudaMemPool_t const previous_owned =
      kind_ == resource_kind::owned_pool && owned_ != nullptr ? owned_->pool_handle() : nullptr;
    switch (kind) {
      case resource_kind::owned_pool:
        owned_ = new async_device_resource{options, device};
        set_per_device_resource_ref(device, device_async_resource_ref{*owned_});
        break;
      case resource_kind::managed:
        managed_ = new async_managed_resource{current_pool{}, device};
        set_per_device_resource_ref(device, device_async_resource_ref{*managed_});
        break;
      default: reset_per_device_resource_ref(device); break;
    }
    kind_ = kind;
    if (previous_owned != nullptr) {  // nothing of it is in use: give its memory back
      (void)cudaMemPoolTrimTo(previous_owned, 0);
      (void)cudaGetLastError();
    }
  }

  /** @brief Notes what the device's resource is now, after the plugin changed it. */
  void note_installed(int device)
  {
    installed_ = get_per_device_resource_ref(device);
    // One word, so that no reader pairs one top with the other's kind.
    std::uintptr_t word = 0;
    if (segment_ != nullptr && !cache_in_place(device)) {
      word = reinterpret_cast<std::uintptr_t>(segment_);
    } else if (segment_ != nullptr && cache_wraps_ == device_async_resource_ref{*segment_}) {
      static_assert(alignof(cache_adaptor) > 1);
      word = reinterpret_cast<std::uintptr_t>(cache_) | 1;
    }
    top_.store(word, std::memory_order_release);
  }

  resource_kind kind_{resource_kind::current_pool};
  std::optional<device_async_resource_ref> installed_;
  async_device_resource* owned_{};
  async_managed_resource* managed_{};
  cache_adaptor* cache_{};
  std::optional<device_async_resource_ref> cache_wraps_;
  thread_cache_options cache_options_{};
  segment_adaptor* segment_{};
  std::optional<device_async_resource_ref> segment_wraps_;
  segment_cache_options segment_options_{};
};

}  // namespace rmm_next::plugin
