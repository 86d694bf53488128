/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/any_resource.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <mutex>
#include <vector>

/**
 * @file
 * @brief The process-wide `per_device_resource_map`, RMM's free functions over it (the `_ref`
 * setters of RMM 25.12–26.04 and the owning setters of RMM 26.06 and later), and
 * `enable_thread_cache` and `enable_segment_cache`, which put a cache in front of it.
 *
 * Prefer a map of your own (`per_device_resource_map`): what is set here changes the memory of
 * every library in the process that uses these functions.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief The process-wide map behind the free functions below.
 *
 * The initial resource of a device is an `async_device_resource` on that device's current pool
 * (`cudaMemGetMemPool`), made on the device's first use.
 *
 * One instance per process, even when several shared libraries built with `-fvisibility=hidden`
 * include this header: the function has default visibility (`RMM_NEXT_EXPORT`), so the dynamic
 * linker binds every library to one definition and one function-local static. That holds for
 * libraries built against the same rmm-next (major and minor version) and CCCL, which fix the
 * map's layout; libraries built against other versions see another symbol, in another ABI
 * namespace (`RMM_NEXT_ABI_NAMESPACE`), and have a map of their own.
 *
 * The map is created on first use and intentionally never destroyed. Destroying it at exit would
 * race with the CUDA runtime's own teardown (its resources free streams) and with other static
 * objects whose destructors still read it; leaked, it stays usable until the process ends, which
 * then returns its memory. Its device count comes from `cudaGetDeviceCount` on first use.
 *
 * @throws cuda_error from its members when no usable CUDA driver or device exists.
 */
RMM_NEXT_EXPORT inline per_device_resource_map<device_async_resource_ref>&
get_per_device_resource_map()
{
  static auto* const map = new per_device_resource_map<device_async_resource_ref>{
    [](int device) { return async_device_resource{device}; }};
  return *map;
}

/**
 * @brief The process-wide ref of the current device.
 * @throws cuda_error if no usable CUDA driver or device exists.
 */
inline device_async_resource_ref get_current_device_resource_ref()
{
  return detail::per_device_resource_map_access::get_current(get_per_device_resource_map(),
                                                             "get_current_device_resource_ref");
}

/**
 * @brief The process-wide ref of `device`.
 * @throws std::out_of_range if `device` is not a visible device.
 */
inline device_async_resource_ref get_per_device_resource_ref(int device)
{
  return detail::per_device_resource_map_access::get(
    get_per_device_resource_map(), device, "get_per_device_resource_ref");
}

/**
 * @brief Makes `ref` the process-wide ref of the current device, for every library using it.
 * The caller keeps the resource alive while it is set (or until the process ends).
 * @return The previous ref; before the device's initial resource was made, a stand-in for it
 * that makes it when used (`per_device_resource_map::set`): setting it back is a reset.
 */
inline device_async_resource_ref set_current_device_resource_ref(device_async_resource_ref ref)
{
  return detail::per_device_resource_map_access::set_current(
    get_per_device_resource_map(), ref, "set_current_device_resource_ref");
}

/**
 * @brief Makes `ref` the process-wide ref of `device`; see `set_current_device_resource_ref`.
 * @return The previous ref.
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 */
inline device_async_resource_ref set_per_device_resource_ref(int device,
                                                             device_async_resource_ref ref)
{
  return detail::per_device_resource_map_access::set(
    get_per_device_resource_map(), device, ref, "set_per_device_resource_ref");
}

/**
 * @brief Makes the initial `async_device_resource` the process-wide ref of the current device.
 * @return The previous ref.
 */
inline device_async_resource_ref reset_current_device_resource_ref()
{
  return detail::per_device_resource_map_access::reset_current(get_per_device_resource_map(),
                                                               "reset_current_device_resource_ref");
}

/**
 * @brief Makes the initial `async_device_resource` the process-wide ref of `device`.
 * @return The previous ref.
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 */
inline device_async_resource_ref reset_per_device_resource_ref(int device)
{
  return detail::per_device_resource_map_access::reset(
    get_per_device_resource_map(), device, "reset_per_device_resource_ref");
}

/**
 * @brief Hands `resource` over to the process-wide map as the resource of `device`, as RMM 26.06
 * and later's `rmm::mr::set_per_device_resource` does: the map keeps it alive while it is set, and
 * `get_per_device_resource_ref(device)` and `get_current_device_resource_ref()` (on `device`)
 * refer to it. A resource passed by lvalue is copied in (rmm-next's resources are handles: the
 * copy shares the pool).
 *
 * What the map does with a resource a `_ref` setter or a reset then replaces, and what happens to
 * refs, is said at `per_device_resource_map` (Lifetime). A resource still set when the process
 * exits is never destroyed (the map is never destroyed), so its destructor makes no CUDA call
 * during the runtime's teardown.
 *
 * @return The previous resource, now the caller's: the one handed over before, or one made from
 * the previous ref (`per_device_resource_map::set`). Setting it back restores the previous state;
 * for a device not used yet, that is a reset.
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 * @throws rmm_next::logic_error if `resource` holds nothing (moved from); nothing changes.
 */
inline any_device_resource set_per_device_resource(int device, any_device_resource resource)
{
  return detail::per_device_resource_map_access::set_owned(
    get_per_device_resource_map(), device, std::move(resource), "set_per_device_resource");
}

/**
 * @brief `set_per_device_resource(current device, resource)` (RMM's
 * `rmm::mr::set_current_device_resource`).
 * @throws cuda_error if no usable CUDA driver or device exists.
 */
inline any_device_resource set_current_device_resource(any_device_resource resource)
{
  return detail::per_device_resource_map_access::set_current_owned(
    get_per_device_resource_map(), std::move(resource), "set_current_device_resource");
}

/**
 * @brief Makes the initial `async_device_resource` the process-wide resource of `device` again
 * and hands the previous one back, as `set_per_device_resource` does (RMM's
 * `rmm::mr::reset_per_device_resource`).
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 */
inline any_device_resource reset_per_device_resource(int device)
{
  return detail::per_device_resource_map_access::release(
    get_per_device_resource_map(), device, "reset_per_device_resource");
}

/**
 * @brief `reset_per_device_resource(current device)` (RMM's
 * `rmm::mr::reset_current_device_resource`).
 * @throws cuda_error if no usable CUDA driver or device exists.
 */
inline any_device_resource reset_current_device_resource()
{
  return detail::per_device_resource_map_access::release_current(get_per_device_resource_map(),
                                                                 "reset_current_device_resource");
}

namespace detail {

/**
 * @brief Puts an `Adaptor` (a cache over a `device_async_resource_ref`) made with `options` in
 * front of `device`'s process-wide ref, once: while one it made is the device's ref, nothing
 * changes. The adaptors live until the process ends. @return The ref the adaptor wraps.
 */
template <class Adaptor, class Options>
device_async_resource_ref put_in_front(int device, Options const& options)
{
  struct installed {
    Adaptor* cache;
    device_async_resource_ref wrapped;
  };
  static std::mutex mutex;
  static auto* const by_device = new std::vector<installed>();  // never destroyed, as the map
  std::lock_guard lock{mutex};
  device_async_resource_ref const current = get_per_device_resource_ref(device);
  for (installed const& i : *by_device) {
    if (current == device_async_resource_ref{*i.cache}) { return i.wrapped; }
  }
  auto* cache = new Adaptor{current, device, options};
  by_device->push_back({cache, current});
  return set_per_device_resource_ref(device, device_async_resource_ref{*cache});
}

}  // namespace detail

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
  return detail::put_in_front<thread_cache_adaptor<device_async_resource_ref>>(device, options);
}

/**
 * @brief Puts a `segment_cache_adaptor` in front of the process-wide resource of `device`, as
 * `enable_thread_cache` does a thread cache: every user of the device's process-wide ref then
 * allocates through it. Calling this again while that adaptor is still the device's ref changes
 * nothing.
 * @return The ref the adaptor wraps (set it back to remove the cache; what the cache holds stays
 * allocated from it).
 * @throws std::out_of_range if `device` is not a visible device; nothing changes.
 */
inline device_async_resource_ref enable_segment_cache(int device,
                                                      segment_cache_options const& options = {})
{
  return detail::put_in_front<segment_cache_adaptor<device_async_resource_ref>>(device, options);
}

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
