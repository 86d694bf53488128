/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/error_macros.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <string_view>

/**
 * @file
 * @brief Device queries that throw on failure: count, current device, range checks, attributes
 * and the driver version.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief The number of visible devices; throws `cuda_error` naming `what` (the user's call) and
 * saying that no driver or device is usable when the runtime cannot start. Callers name the
 * user's call; the default is for code that has none to name.
 */
inline int device_count(std::string_view what = "cuda_error")
{
  int count{};
  RMM_NEXT_CUDA_TRY(cudaGetDeviceCount(&count), what);
  return count;
}

/** @brief The current device; throws `cuda_error` naming `what` (the user's call). */
inline int current_device(std::string_view what = "cuda_error")
{
  int device{};
  RMM_NEXT_CUDA_TRY(cudaGetDevice(&device), what);
  return device;
}

/**
 * @brief Checks that `device` is in [0, `count`); throws `std::out_of_range` naming `what` (the
 * user's call), the id and the count otherwise.
 */
inline int checked_device(int device, int count, std::string_view what)
{
  if (device < 0 || device >= count) {
    throw_error<std::out_of_range>(what,
                                   "device id " + std::to_string(device) + " is out of range: " +
                                     std::to_string(count) + " CUDA device(s) are visible");
  }
  return device;
}

/** @brief Checks that `device` names a visible device (see the overload above). */
inline int checked_device(int device, std::string_view what)
{
  return checked_device(device, device_count(what), what);
}

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

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
