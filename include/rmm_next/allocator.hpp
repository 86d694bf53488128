/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/allocator_base.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief A standard allocator that allocates from a copy of a concrete resource, with no type
 * erasure.
 *
 * Memory comes from the resource's synchronous interface (`allocate_sync` /
 * `deallocate_sync`; `allocate` / `deallocate` on CCCL 3.0): it is usable by the host (for
 * host-accessible resources) and by any stream as soon as `allocate` returns. Deallocation
 * returns memory at once, so work that still uses it on other streams must be complete.
 * Standard containers construct their elements on the host, so `Resource` must be
 * `host_accessible` (`async_pinned_resource`, `async_managed_resource`); instantiating the
 * allocator over device-only memory fails to compile with a message pointing at `thrust_allocator`.
 *
 * The rmm-next resources are cheap copyable handles, so the allocator holds a copy: it keeps the
 * pool alive and stays valid after the resource it was made from is gone. Two allocators compare
 * equal when their resources do (for the async resources: the same pool), so memory from one can
 * be freed by the other. Containers take the allocator with them on copy and move assignment and
 * on swap: memory always goes back to the resource it came from.
 *
 * Allocations are aligned to `alignof(T)`; over-aligned types (`alignof(T) > 256`) are rejected
 * at compile time.
 *
 * @tparam T The element type.
 * @tparam Resource A copyable, host-accessible synchronous memory resource.
 */
template <class T, class Resource>
  requires detail::synchronous_resource_with<Resource>
class allocator : public detail::allocator_base<T> {
  static_assert(cuda::has_property<Resource, cuda::mr::host_accessible>,
                "rmm_next::allocator<T, Resource>: Resource is not host_accessible, but standard "
                "containers construct, copy and destroy their elements on the host; for device "
                "memory use rmm_next::thrust_allocator<T> with thrust::device_vector");

 public:
  using resource_type = Resource;

  /** @brief The same allocator for elements of type `U`. */
  template <class U>
  struct rebind {
    using other = allocator<U, Resource>;
  };

  /** @brief Allocates from a default-constructed `Resource` (for the async resources: the
   * current device's current pool). */
  allocator()
    requires std::default_initializable<Resource>
  = default;

  /** @brief Allocates from a copy of `resource`. */
  allocator(Resource const& resource) noexcept(  // NOLINT(google-explicit-constructor)
    std::is_nothrow_copy_constructible_v<Resource>)
    : resource_{resource}
  {
  }

  /** @brief Copies share the resource. Moves copy too: a moved-from allocator stays usable and
   * equal, as the allocator requirements demand. */
  allocator(allocator const&)            = default;
  allocator& operator=(allocator const&) = default;

  /** @brief Allocates from the resource of `other` (the rebind conversion). */
  template <class U>
  allocator(allocator<U, Resource> const& other) noexcept(  // NOLINT(google-explicit-constructor)
    std::is_nothrow_copy_constructible_v<Resource>)
    : resource_{other.resource()}
  {
  }

  /**
   * @brief Allocates memory for `n` objects of type `T`, aligned to `alignof(T)`.
   * @return nullptr when `n` is 0.
   * @throws std::bad_array_new_length if `n * sizeof(T)` overflows.
   * @throws what the resource throws (`bad_alloc`, `out_of_memory`, ...).
   */
  [[nodiscard]] T* allocate(std::size_t n)
  {
    std::size_t const bytes = detail::array_bytes<T>(n);
    return static_cast<T*>(detail::sync_allocate(resource_, bytes, alignof(T)));
  }

  /** @brief Frees `ptr`, which `allocate(n)` of an equal allocator returned. */
  void deallocate(T* ptr, std::size_t n) noexcept
  {
    detail::sync_deallocate(resource_, ptr, n * sizeof(T), alignof(T));
  }

  /** @brief The resource this allocator allocates from. */
  [[nodiscard]] Resource const& resource() const noexcept { return resource_; }

 private:
  Resource resource_;
};

/** @brief True when memory from `lhs` may be freed by `rhs`: their resources compare equal. */
template <class T, class U, class Resource>
bool operator==(allocator<T, Resource> const& lhs, allocator<U, Resource> const& rhs) noexcept
{
  return lhs.resource() == rhs.resource();
}

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
