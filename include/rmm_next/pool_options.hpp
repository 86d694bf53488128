/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/current_pool.hpp>  // the other pool choices, for code that includes only this
#include <rmm_next/default_pool.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <optional>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Options of a pool that a resource creates and owns (`cudaMemPoolCreate`).
 *
 * The pool is destroyed with the last copy of the resource.
 */
struct pool_options {
  /// Bytes allocated and freed once at construction so that the pool starts with them reserved.
  std::optional<std::size_t> initial_pool_size{};
  /// Bytes the pool keeps reserved across synchronizations; default UINT64_MAX (keep all).
  std::optional<std::size_t> release_threshold{};
  /// Upper bound of the pool's reserved memory (`cudaMemPoolProps::maxSize`); default: no bound.
  std::optional<std::size_t> maximum_pool_size{};
  /// Handle type the pool's memory can be exported as; `none` disables IPC.
  allocation_handle_type export_handle_type{allocation_handle_type::none};
  /// Create the pool for hardware decompression (`cudaMemPoolCreateUsageHwDecompress`).
  bool hardware_decompress{false};
  /// Location of the pool's memory. Device pools: that device (the resource's device if unset).
  /// Managed pools: the preferred location (a device, `cudaMemLocationTypeHost`, or
  /// `cudaMemLocationTypeNone`); the resource's device if unset. Pinned pools: the host, or a
  /// host NUMA node (`cudaMemLocationTypeHostNuma`).
  std::optional<cudaMemLocation> location{};
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
