/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/error_macros.hpp>

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
