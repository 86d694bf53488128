/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/export.hpp>

#include <cstddef>
#include <optional>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Selects the driver's *current* pool for the resource's location
 * (`cudaMemGetMemPool`): the pool every `cudaMallocAsync` user shares, honouring
 * `cudaMemSetMemPool`. This is what default-constructed resources use.
 */
struct current_pool {
  /// Release threshold to set on the pool. Without one, a threshold of 0 is raised to UINT64_MAX.
  std::optional<std::size_t> release_threshold{};
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
