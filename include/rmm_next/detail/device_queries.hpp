/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error_macros.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

/**
 * @file
 * @brief Device queries that throw on failure: attributes and the driver version (the count, the
 * current device and the range check are `detail/device_id.hpp`'s).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief An integer device attribute. */
inline int device_attribute(cudaDeviceAttr attr, int device)
{
  int value{};
  RMM_NEXT_CUDA_TRY(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

/** @brief The version of the installed CUDA driver, e.g. 13000 for 13.0 (0 when none). */
inline int driver_version()
{
  int version{};
  RMM_NEXT_CUDA_TRY(cudaDriverGetVersion(&version));
  return version;
}

/** @brief Formats a CUDA version number such as 12060 as "12.6". */
inline std::string version_string(int version)
{
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
