/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

/**
 * @file
 * @brief Sizes and addresses rounded up without overflow, and the alignment checks, for every
 * resource and adaptor that pads or counts requests (`aligned_adaptor`, `limiting_adaptor`,
 * `vmm_resource`), including the check of the adaptors' alignment arguments.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief True for the alignments the async resources accept: powers of two up to 256. */
constexpr bool is_valid_alignment(std::size_t alignment) noexcept
{
  // A power of two: one bit set (a bit trick, where std::has_single_bit may be a library call).
  return alignment != 0 && (alignment & (alignment - 1)) == 0 && alignment <= default_alignment;
}

/**
 * @brief Rounds `n` up to a multiple of `multiple` (a power of two) into `out`.
 * @return false, leaving `out` unchanged, when the result does not fit in a `std::size_t`.
 */
constexpr bool round_up(std::size_t n, std::size_t multiple, std::size_t& out) noexcept
{
  std::size_t const mask = multiple - 1;
  if (n > std::numeric_limits<std::size_t>::max() - mask) { return false; }
  out = (n + mask) & ~mask;
  return true;
}

/**
 * @brief Rounds `n` up to a multiple of `multiple` (> 0, any value: a driver's granularity) into
 * `out`.
 * @return false, leaving `out` unchanged, when the result does not fit in a `std::size_t`.
 */
constexpr bool round_up_to_multiple(std::size_t n, std::size_t multiple, std::size_t& out) noexcept
{
  std::size_t const rest = n % multiple;
  if (rest == 0) {
    out = n;
    return true;
  }
  if (n > std::numeric_limits<std::size_t>::max() - (multiple - rest)) { return false; }
  out = n + (multiple - rest);
  return true;
}

/** @brief `ptr` moved up to the next multiple of `alignment` (a power of two). */
inline void* align_pointer_up(void* ptr, std::size_t alignment) noexcept
{
  auto const address = reinterpret_cast<std::uintptr_t>(ptr);
  auto const mask    = static_cast<std::uintptr_t>(alignment - 1);
  return reinterpret_cast<void*>((address + mask) & ~mask);
}

/** @brief Throws `bad_alloc` from `what` unless `alignment` is a power of two. */
inline void check_power_of_two_alignment(std::string_view what, std::size_t alignment)
{
  if (!std::has_single_bit(alignment)) {
    throw_error<bad_alloc>(what,
                           "alignment " + std::to_string(alignment) +
                             " is not a power of two; pass 1, 2, 4, ... (256 by default)");
  }
}

/**
 * @brief `alignment`, the argument of an adaptor's constructor, if it is a power of two; else
 * throws `std::invalid_argument` from `what` naming it and suggesting `examples`.
 */
inline std::size_t checked_alignment_argument(std::string_view what,
                                              std::size_t alignment,
                                              std::string_view examples)
{
  if (!std::has_single_bit(alignment)) {
    throw_error<std::invalid_argument>(what,
                                       "alignment " + std::to_string(alignment) +
                                         " is not a power of two; pass " + std::string{examples});
  }
  return alignment;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
