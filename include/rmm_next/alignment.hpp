/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/export.hpp>

#include <cstddef>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief The alignment of every allocation from the async resources (as `cudaMalloc`). */
inline constexpr std::size_t default_alignment = 256;

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
