/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/export.hpp>

#include <cstdint>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief Statistics of a driver pool, read from its attributes (`statistics()` of the async
 * resources). */
struct pool_statistics {
  std::uint64_t reserved_bytes;       ///< memory the pool holds from the OS/driver now
  std::uint64_t reserved_bytes_high;  ///< high watermark of `reserved_bytes`
  std::uint64_t used_bytes;           ///< memory handed out to allocations now
  std::uint64_t used_bytes_high;      ///< high watermark of `used_bytes`
  std::uint64_t release_threshold;    ///< bytes kept across synchronizations
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
