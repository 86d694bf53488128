/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cstddef>

/**
 * @file
 * @brief `stand_in_resource`: the initial resource of one device of a `per_device_resource_map`
 * before it exists, which `set` and `reset` hand back so that they need not make it.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief The factory's resource of one device of `Map` before it exists: its first allocation
 * makes it (through the map, as a read would) and every call forwards to it.
 *
 * `Map` gives the stand-in `initial_ref(device)`, the factory's `Ref` made now if needed, and
 * `made_ref(device)`, that `Ref` or null while it is not made (a free before any allocation has
 * nothing to free).
 */
template <class Ref, class Map>
class stand_in_resource : public compat_members<stand_in_resource<Ref, Map>> {
 public:
  stand_in_resource(Map const* map, int device) noexcept : map_{map}, device_{device} {}

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    Ref target = map_->initial_ref(device_);
    return sync_allocate(target, bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    if (Ref const* made = map_->made_ref(device_)) {
      Ref target = *made;  // made by the allocation of `ptr`
      sync_deallocate(target, ptr, bytes, alignment);
    }
  }
  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
    requires stream_ordered_upstream<Ref>
  {
    Ref target = map_->initial_ref(device_);
    return stream_allocate(target, stream, bytes, alignment);
  }
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
    requires stream_ordered_upstream<Ref>
  {
    if (Ref const* made = map_->made_ref(device_)) {
      Ref target = *made;
      stream_deallocate(target, stream, ptr, bytes, alignment);
    }
  }
  /// Compile errors for a literal 0 stream; before CCCL 3.1, CCCL 3.0's names of the members
  /// above.
  using compat_members<stand_in_resource>::allocate;
  using compat_members<stand_in_resource>::deallocate;

  friend bool operator==(stand_in_resource const& lhs, stand_in_resource const& rhs) noexcept
  {
    return lhs.map_ == rhs.map_ && lhs.device_ == rhs.device_;
  }
  // The properties a `Ref` of the map may ask for: what the factory makes has those of `Ref`.
  friend constexpr void get_property(stand_in_resource const&, cuda::mr::device_accessible) noexcept
  {
  }
  friend constexpr void get_property(stand_in_resource const&, cuda::mr::host_accessible) noexcept
  {
  }

 private:
  Map const* map_;
  int device_;
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
