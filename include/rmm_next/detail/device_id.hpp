/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error_macros.hpp>

#include <cuda_runtime_api.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

/**
 * @file
 * @brief How a device travels: an `int` id in [0, count) (as `cudaSetDevice` takes it), the names
 * of what -1 means where an id is absent, the one reading of "the current device" and the one
 * count-and-range check, each with one message.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/// @name What -1 means in a device's place
/// Each use of -1 has its own name, so that a reader knows which one a function means.
/// @{
/** @brief An answer: no device, or the driver cannot tell (no driver, no context, a bad handle). */
inline constexpr int no_device = -1;
/** @brief An argument of the allocator plugin's C functions: the current device. */
inline constexpr int current_device_arg = -1;
/** @brief An argument of the allocator plugin's C functions: every device (the default choice,
 * and every device already used). */
inline constexpr int every_device = -1;
/** @brief A device count not read yet. */
inline constexpr int unknown_device_count = -1;
/// @}

/** @brief True for an id that names a device (not one of the sentinels above). */
constexpr bool is_device_id(int device) noexcept { return device >= 0; }

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

/**
 * @brief Throws `std::out_of_range` naming `what` (the user's call), the id and the count: the
 * one message of an id outside [0, `count`).
 */
[[noreturn]] inline void throw_device_out_of_range(int device, int count, std::string_view what)
{
  throw_error<std::out_of_range>(what,
                                 "device id " + std::to_string(device) + " is out of range [0, " +
                                   std::to_string(count) + "): " + std::to_string(count) +
                                   " device(s) are visible");
}

/** @brief `device` when it is in [0, `count`); throws `throw_device_out_of_range` otherwise. */
inline int checked_device(int device, int count, std::string_view what)
{
  if (device < 0 || device >= count) { throw_device_out_of_range(device, count, what); }
  return device;
}

/** @brief Checks that `device` names a visible device (see the overload above). */
inline int checked_device(int device, std::string_view what)
{
  return checked_device(device, device_count(what), what);
}

/**
 * @brief The current device, or `no_device` when no usable driver or device exists (the error is
 * cleared). Read from the thread's current context (`cuCtxGetCurrent`, then
 * `device_of_current_context`) instead of `cudaGetDevice`: about 10 ns instead of 30 to 40 ns.
 * Follows `cudaSetDevice` and `cuCtxSetCurrent`; falls back to `cudaGetDevice` when the thread has
 * no current context yet.
 */
inline int current_device_or_none() noexcept
{
  if (int const device = device_of_current_context(current_context_or_null());
      is_device_id(device)) {
    return device;
  }
  int device{};
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return no_device;
  }
  return device;
}

/**
 * @brief The current device, as `current_device_or_none`.
 * @throws cuda_error naming `what` (the user's call) if no usable driver or device exists.
 */
inline int current_device(std::string_view what = "cuda_error")
{
  if (int const device = current_device_or_none(); is_device_id(device)) { return device; }
  int device{};
  RMM_NEXT_CUDA_TRY(cudaGetDevice(&device), what);
  return device;
}

/**
 * @brief `device` checked against the visible devices, or the current device when empty: the
 * device a resource or call works for. The count is read first, so a missing driver is named by
 * `cudaGetDeviceCount`.
 * @throws cuda_error when no usable driver or device exists.
 * @throws std::out_of_range if `device` is not a visible device.
 */
inline int device_or_current(std::optional<int> device, std::string_view what)
{
  int const count = device_count(what);
  return device ? checked_device(*device, count, what) : current_device(what);
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
