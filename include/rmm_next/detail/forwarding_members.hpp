/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/bound_upstream_calls.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cstddef>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief The allocate and free members of an adaptor that writes its logic once for both ways of
 * calling its upstream: each member calls `Derived::allocate_with(calls, bytes, alignment)` or
 * `Derived::deallocate_with(calls, ptr, bytes, alignment)` with `calls` bound to
 * `Derived::upstream_` the way the member was called (`stream_ordered_calls` on its stream, or
 * `synchronous_calls`). The stream-ordered pair exists when `Upstream` allocates in stream order,
 * the synchronous pair when it allocates synchronously; `compat_members` adds the rest.
 *
 * `Derived` inherits it, befriends it, and brings the names into scope:
 * `using detail::forwarding_members<Derived, Upstream>::allocate;` (and `deallocate`).
 */
template <class Derived, class Upstream>
class forwarding_members : public compat_members<Derived> {
 public:
  using compat_members<Derived>::allocate;
  using compat_members<Derived>::deallocate;

  /** @brief Allocates `bytes` in the order of `stream`, as the adaptor's class says. */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
    requires stream_ordered_upstream<Upstream>
  {
    return derived().allocate_with(
      stream_ordered_calls<Upstream>{derived().upstream_, stream}, bytes, alignment);
  }

  /** @brief Frees `ptr`, allocated with the same `bytes` and `alignment`, in the order of `stream`.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept
    requires stream_ordered_upstream<Upstream>
  {
    derived().deallocate_with(
      stream_ordered_calls<Upstream>{derived().upstream_, stream}, ptr, bytes, alignment);
  }

  /** @brief Allocates `bytes` synchronously, as the adaptor's class says. */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
    requires synchronous_upstream<Upstream>
  {
    return derived().allocate_with(
      synchronous_calls<Upstream>{derived().upstream_}, bytes, alignment);
  }

  /** @brief Frees `ptr`, allocated with the same `bytes` and `alignment`, synchronously. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
    requires synchronous_upstream<Upstream>
  {
    derived().deallocate_with(
      synchronous_calls<Upstream>{derived().upstream_}, ptr, bytes, alignment);
  }

 private:
  Derived& derived() noexcept { return static_cast<Derived&>(*this); }
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
