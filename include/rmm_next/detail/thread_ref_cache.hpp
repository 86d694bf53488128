/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cuda.h>  // CUcontext, a type only

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

/**
 * @file
 * @brief The refs a thread read from a `per_device_resource_map` last, kept per thread with the
 * map's number and version: while no `set` or `reset` happened, a read is a load and a copy.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief A process-unique number for each map, never reused (unlike addresses): the caches'
 * key. */
inline std::uint64_t next_map_id() noexcept
{
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

/**
 * @brief A ref a thread read, with where and when from. Plain storage, so that the per-thread
 * array needs no initializer or destructor call (refs own nothing).
 */
template <class Ref>
struct cached_ref {
  std::uint64_t map_id;  ///< 0: empty (maps are numbered from 1)
  std::uint64_t version;
  int device;
  alignas(Ref) unsigned char storage[sizeof(Ref)];

  [[nodiscard]] bool holds(std::uint64_t id, int d, std::uint64_t v) const noexcept
  {
    return map_id == id && device == d && version == v;
  }
  [[nodiscard]] Ref const& ref() const noexcept
  {
    return *std::launder(reinterpret_cast<Ref const*>(storage));
  }
  void store(std::uint64_t id, int d, std::uint64_t v, Ref const& r)
  {
    if (map_id != 0) {
      std::destroy_at(std::launder(reinterpret_cast<Ref*>(storage)));
      map_id = 0;
    }
    ::new (static_cast<void*>(storage)) Ref(r);
    map_id  = id;
    device  = d;
    version = v;
  }
};

/** @brief A ref a thread read through `get_current`, with the context it was read in. */
template <class Ref>
struct current_ref {
  cached_ref<Ref> entry;
  CUcontext context;
};

/** @brief This thread's `get_current` entry (one per `Ref` type, shared by the maps). */
template <class Ref>
current_ref<Ref>& thread_current_ref() noexcept
{
  thread_local current_ref<Ref> entry;
  return entry;
}

/** @brief How many refs of one `Ref` type a thread keeps, over every map and device. */
inline constexpr std::size_t thread_cached_refs = 8;

/** @brief This thread's entry for `device` of the map numbered `map_id`. */
template <class Ref>
cached_ref<Ref>& thread_cached_ref(std::uint64_t map_id, int device) noexcept
{
  thread_local cached_ref<Ref> entries[thread_cached_refs];
  return entries[(static_cast<std::size_t>(device) + map_id) % thread_cached_refs];
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
