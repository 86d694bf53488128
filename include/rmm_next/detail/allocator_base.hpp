/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>

#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief True when the resources can align a `T`: `alignof(T)` is at most 256. */
template <class T>
inline constexpr bool is_allocatable_alignment = alignof(T) <= default_alignment;

/** @brief The largest number of `T` whose size in bytes fits a `std::size_t`. */
template <class T>
inline constexpr std::size_t max_array_size = std::numeric_limits<std::size_t>::max() / sizeof(T);

/**
 * @brief The size in bytes of `n` objects of type `T`, for an allocator's `allocate`. Rejects, at
 * compile time, a `T` aligned beyond what the resources guarantee: here rather than in the
 * allocator class, which must accept a `T` that is still incomplete.
 * @throws std::bad_array_new_length if it does not fit a `std::size_t`.
 */
template <class T>
constexpr std::size_t array_bytes(std::size_t n)
{
  static_assert(is_allocatable_alignment<T>,
                "rmm_next::allocator: alignof(T) exceeds the 256 bytes the resources guarantee");
  if (n > max_array_size<T>) { throw std::bad_array_new_length{}; }
  return n * sizeof(T);
}

/**
 * @brief What rmm-next's allocators share: the element type, size types, and the propagation
 * policy. The allocator travels with the memory on container copy and move assignment and on
 * swap, so memory always goes back to the resource (and stream) it came from; allocators of one
 * type may differ (`is_always_equal` is false). `T` may be incomplete until `allocate` is used,
 * as the standard containers that allow incomplete element types require.
 */
template <class T>
struct allocator_base {
  using value_type                             = T;
  using size_type                              = std::size_t;
  using difference_type                        = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap            = std::true_type;
  using is_always_equal                        = std::false_type;
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
