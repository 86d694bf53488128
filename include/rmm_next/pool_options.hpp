/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

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

/** @brief Selects the driver's default pool for the resource's location
 * (`cudaMemGetDefaultMemPool`), whatever `cudaMemSetMemPool` made current. */
struct default_pool {
  /// Release threshold to set on the pool. Without one, a threshold of 0 is raised to UINT64_MAX.
  std::optional<std::size_t> release_threshold{};
};

/** @brief The kinds of OS handle an owned pool's memory can be exported as (for IPC). */
enum class allocation_handle_type : int {
  none                  = cudaMemHandleTypeNone,
  posix_file_descriptor = cudaMemHandleTypePosixFileDescriptor,
  win32                 = cudaMemHandleTypeWin32,
  win32_kmt             = cudaMemHandleTypeWin32Kmt,
  fabric                = cudaMemHandleTypeFabric,
};

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
