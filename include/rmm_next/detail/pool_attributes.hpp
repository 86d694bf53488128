/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error_macros.hpp>
#include <rmm_next/pool_statistics.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>

/**
 * @file
 * @brief Reading and setting a pool's attributes, and the release-threshold rule for pools a
 * resource adopts.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief The release threshold that keeps every byte across synchronizations. */
inline constexpr std::uint64_t keep_all_threshold = UINT64_MAX;

/** @brief A pool attribute (`cudaMemPoolGetAttribute`), in relaxed capture mode. */
inline std::uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
  std::uint64_t value{};
  relaxed_capture_mode const relaxed;
  RMM_NEXT_CUDA_TRY(cudaMemPoolGetAttribute(pool, attr, &value));
  return value;
}

/** @brief Sets a pool attribute (`cudaMemPoolSetAttribute`), in relaxed capture mode. */
inline void set_pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr, std::uint64_t value)
{
  relaxed_capture_mode const relaxed;
  RMM_NEXT_CUDA_TRY(cudaMemPoolSetAttribute(pool, attr, &value));
}

/**
 * @brief A pool attribute of type `T` (as wide as the driver writes it), or empty when the driver
 * does not know the attribute (`cudaErrorInvalidValue` or `cudaErrorNotSupported`, cleared).
 * @throws cuda_error for any other failure.
 */
template <class T>
std::optional<T> pool_attribute_if_known(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
  T value{};
  relaxed_capture_mode const relaxed;
  cudaError_t const status = cudaMemPoolGetAttribute(pool, attr, &value);
  if (status == cudaSuccess) { return value; }
  if (status == cudaErrorInvalidValue || status == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  throw_cuda_error(status, "cudaMemPoolGetAttribute", "cuda_error");
}

/** @brief The statistics of `pool`: its byte counts, and CUDA 13.3's attributes where known. */
inline pool_statistics read_pool_statistics(cudaMemPool_t pool)
{
  pool_statistics s{
    pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent),
    pool_attribute(pool, cudaMemPoolAttrReservedMemHigh),
    pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent),
    pool_attribute(pool, cudaMemPoolAttrUsedMemHigh),
    pool_attribute(pool, cudaMemPoolAttrReleaseThreshold),
  };
#if CUDART_VERSION >= 13030  // the attributes exist from CUDA 13.3 on
  s.allocation_type =
    pool_attribute_if_known<cudaMemAllocationType>(pool, cudaMemPoolAttrAllocationType);
  if (auto const types = pool_attribute_if_known<cudaMemAllocationHandleType>(
        pool, cudaMemPoolAttrExportHandleTypes)) {
    s.export_handle_types = static_cast<allocation_handle_type>(*types);
  }
  auto const location_type =
    pool_attribute_if_known<cudaMemLocationType>(pool, cudaMemPoolAttrLocationType);
  auto const location_id = pool_attribute_if_known<int>(pool, cudaMemPoolAttrLocationId);
  if (location_type && location_id) {
    cudaMemLocation location{};
    location.type = *location_type;
    location.id   = *location_id;
    s.location    = location;
  }
  s.maximum_pool_size = pool_attribute_if_known<std::uint64_t>(pool, cudaMemPoolAttrMaxPoolSize);
  if (auto const decompress =
        pool_attribute_if_known<int>(pool, cudaMemPoolAttrHwDecompressEnabled)) {
    s.hardware_decompress = *decompress != 0;
  }
#endif
  return s;
}

/** @brief Applies the release-threshold rule for pools the resource adopts but does not own. */
inline void adopt_release_threshold(cudaMemPool_t pool, std::optional<std::size_t> threshold)
{
  if (threshold) {
    set_pool_attribute(pool, cudaMemPoolAttrReleaseThreshold, *threshold);
  } else if (pool_attribute(pool, cudaMemPoolAttrReleaseThreshold) == 0) {
    // With 0 every synchronization hands memory back and the next allocation maps it again.
    set_pool_attribute(pool, cudaMemPoolAttrReleaseThreshold, keep_all_threshold);
  }
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
