/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/pool_errors.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

/**
 * @file
 * @brief Run-time checks that the runtime, driver and device support pools of a kind; failures
 * throw `not_supported` naming the feature, what it needs and what was found.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief Checks at run time that the device and the driver support pools for `target`; throws
 * `not_supported` naming the feature, what it needs and what was found.
 */
inline void check_support(pool_target target)
{
  auto const [kind, device] = target;
  auto const dev            = "device " + std::to_string(device);
  if (device_attribute(cudaDevAttrMemoryPoolsSupported, device) == 0) {
    throw_not_supported(kind,
                        "stream-ordered memory pools need a device with "
                        "cudaDevAttrMemoryPoolsSupported; " +
                          dev + " reports 0");
  }
  if (kind == memory_kind::managed) {
#if CUDART_VERSION < 13000
    throw_not_supported(kind,
                        "managed memory pools need CUDA 13.0 or later; this program was "
                        "compiled against CUDA " +
                          version_string(CUDART_VERSION));
#else
    if (device_attribute(cudaDevAttrConcurrentManagedAccess, device) == 0) {
      throw_not_supported(kind,
                          "managed memory pools need a device with "
                          "cudaDevAttrConcurrentManagedAccess; " +
                            dev + " reports 0");
    }
#endif
  }
  if (kind == memory_kind::pinned) {
#if CUDART_VERSION < 12060
    throw_not_supported(kind,
                        "pinned memory pools need CUDA 12.6 or later; this program was "
                        "compiled against CUDA " +
                          version_string(CUDART_VERSION));
#else
    if (int const v = driver_version(); v < 12060) {
      throw_not_supported(kind,
                          "pinned memory pools need a CUDA driver of version 12.6 or "
                          "later; the installed driver is " +
                            version_string(v));
    }
#if CUDART_VERSION >= 13000
    if (device_attribute(cudaDevAttrHostMemoryPoolsSupported, device) == 0) {
      throw_not_supported(kind,
                          "pinned memory pools need a device with "
                          "cudaDevAttrHostMemoryPoolsSupported; " +
                            dev + " reports 0");
    }
#endif
#endif
  }
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
