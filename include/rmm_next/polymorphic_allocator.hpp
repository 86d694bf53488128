/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/allocator_base.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cstddef>
#include <type_traits>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

template <class T, class... Properties>
class polymorphic_allocator;

namespace detail {

template <class T>
inline constexpr bool is_polymorphic_allocator = false;
template <class T, class... Properties>
inline constexpr bool is_polymorphic_allocator<polymorphic_allocator<T, Properties...>> = true;

}  // namespace detail

/**
 * @brief A standard allocator over a type-erased, non-owning synchronous resource ref.
 *
 * Any resource with `Properties` can back it, and the allocator's type names only the
 * properties, not the resource: `std::vector<float, host_polymorphic_allocator<float>>` holds
 * pinned or managed memory alike. The ref is `cuda::mr::synchronous_resource_ref<Properties...>`
 * on CCCL 3.1 and later (on CCCL 3.0, a thin type over `cuda::mr::resource_ref<Properties...>`).
 *
 * The allocator does not own the resource: the resource must outlive every allocator and every
 * container that uses it. Memory comes from `allocate_sync` and goes back through
 * `deallocate_sync`, as with `allocator<T, Resource>`. Two allocators compare equal when their
 * resources do. Containers take the allocator with them on copy and move assignment and on swap,
 * so memory always goes back to the resource it came from (unlike `std::pmr`, whose allocator
 * stays with the container).
 *
 * Allocations are aligned to `alignof(T)`; over-aligned types (`alignof(T) > 256`) are rejected
 * at compile time.
 *
 * @tparam T The element type.
 * @tparam Properties The properties the resource must have, e.g. `cuda::mr::host_accessible`.
 */
template <class T, class... Properties>
class polymorphic_allocator : public detail::allocator_base<T> {
 public:
  /** @brief The ref the allocator holds. */
  using resource_ref_type = detail::sync_ref<Properties...>;

  /** @brief The same allocator for elements of type `U`. */
  template <class U>
  struct rebind {
    using other = polymorphic_allocator<U, Properties...>;
  };

  /** @brief Allocates from the resource `ref` refers to. */
  polymorphic_allocator(resource_ref_type ref) noexcept  // NOLINT(google-explicit-constructor)
    : ref_{ref}
  {
  }

  /**
   * @brief Allocates from `resource` (a resource with `Properties`, or a ref with a superset of
   * them), which must outlive the allocator and its copies.
   */
  template <class Resource>
    requires(!detail::is_polymorphic_allocator<std::remove_cv_t<Resource>> &&
             !std::is_same_v<std::remove_cv_t<Resource>, resource_ref_type> &&
             std::is_constructible_v<resource_ref_type, Resource&>)
  polymorphic_allocator(Resource& resource) noexcept  // NOLINT(google-explicit-constructor)
    : ref_{resource}
  {
  }

  /** @brief Copies refer to the same resource; moves copy (a moved-from allocator stays usable). */
  polymorphic_allocator(polymorphic_allocator const&) noexcept            = default;
  polymorphic_allocator& operator=(polymorphic_allocator const&) noexcept = default;

  /** @brief Allocates from the resource of `other` (the rebind conversion). */
  template <class U>
  polymorphic_allocator(  // NOLINT(google-explicit-constructor)
    polymorphic_allocator<U, Properties...> const& other) noexcept
    : ref_{other.resource()}
  {
  }

  /**
   * @brief Allocates memory for `n` objects of type `T`, aligned to `alignof(T)`.
   * @return nullptr when `n` is 0 (for the rmm-next resources).
   * @throws std::bad_array_new_length if `n * sizeof(T)` overflows.
   * @throws what the resource throws (`bad_alloc`, `out_of_memory`, ...).
   */
  [[nodiscard]] T* allocate(std::size_t n)
  {
    return static_cast<T*>(ref_.allocate_sync(detail::array_bytes<T>(n), alignof(T)));
  }

  /** @brief Frees `ptr`, which `allocate(n)` of an equal allocator returned. */
  void deallocate(T* ptr, std::size_t n) noexcept
  {
    ref_.deallocate_sync(ptr, n * sizeof(T), alignof(T));
  }

  /** @brief The ref this allocator allocates from. */
  [[nodiscard]] resource_ref_type resource() const noexcept { return ref_; }

 private:
  resource_ref_type ref_;
};

/** @brief True when memory from `lhs` may be freed by `rhs`: their resources compare equal. */
template <class T, class U, class... Properties>
bool operator==(polymorphic_allocator<T, Properties...> const& lhs,
                polymorphic_allocator<U, Properties...> const& rhs) noexcept
{
  return lhs.resource() == rhs.resource();
}

/** @brief A polymorphic allocator for host-accessible memory (pinned, managed, ...). */
template <class T>
using host_polymorphic_allocator = polymorphic_allocator<T, cuda::mr::host_accessible>;

/** @brief A polymorphic allocator for memory both host and device code may use (pinned,
 * managed). */
template <class T>
using host_device_polymorphic_allocator =
  polymorphic_allocator<T, cuda::mr::host_accessible, cuda::mr::device_accessible>;

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
