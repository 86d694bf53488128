/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#define RMM_NEXT_STRINGIFY_DETAIL(x) #x
#define RMM_NEXT_STRINGIFY(x)        RMM_NEXT_STRINGIFY_DETAIL(x)

/**
 * @brief Throws `rmm_next::logic_error` (or the exception type given as third argument) with
 * "rmm_next::" + `msg` when `cond` is false; `msg` reads "<what>: <what happened>".
 */
#define RMM_NEXT_EXPECTS(...)                                                               \
  RMM_NEXT_EXPECTS_SELECT(__VA_ARGS__, RMM_NEXT_EXPECTS_3, RMM_NEXT_EXPECTS_2, unused)( \
    __VA_ARGS__)
#define RMM_NEXT_EXPECTS_SELECT(_1, _2, _3, name, ...) name
#define RMM_NEXT_EXPECTS_2(cond, msg) RMM_NEXT_EXPECTS_3(cond, msg, ::rmm_next::logic_error)
#define RMM_NEXT_EXPECTS_3(cond, msg, exception_type)                                        \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      throw exception_type{std::string{"rmm_next::"} + (msg)};                               \
    }                                                                                        \
  } while (0)

/**
 * @brief Calls a CUDA runtime function; on failure clears the sticky error and throws
 * `rmm_next::cuda_error` naming the call and the error (not rmm-next's source location, which
 * says nothing to the user).
 */
#define RMM_NEXT_CUDA_TRY(call)                                                         \
  do {                                                                                  \
    cudaError_t const rmm_next_status_ = (call);                                        \
    if (rmm_next_status_ != cudaSuccess) {                                              \
      ::rmm_next::detail::throw_cuda_error(rmm_next_status_, #call, "rmm_next");        \
    }                                                                                   \
  } while (0)

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief True for the errors after which the CUDA context is lost ("sticky"): every later call
 * returns the same error, and using CUDA again takes a new process (an illegal address, a failed
 * launch, a device-side assert, ...).
 */
constexpr bool is_sticky_error(cudaError_t status) noexcept
{
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
#if CUDART_VERSION >= 12080  // the error exists from CUDA 12.8 on
    case cudaErrorTensorMemoryLeak:
#endif
    case cudaErrorMpsClientTerminated: return true;
    default: return false;
  }
}

/**
 * @brief Why no CUDA device can be used, when `status` says so, else an empty string.
 *
 * The runtime reports `cudaErrorInsufficientDriver` both when the driver is older than the runtime
 * and when there is no driver at all; `cudaDriverGetVersion` tells them apart (0: no driver).
 */
inline std::string no_usable_device_reason(cudaError_t status)
{
  if (status == cudaErrorNoDevice) { return "no CUDA device is visible"; }
  if (status != cudaErrorInsufficientDriver) { return {}; }
  int driver{};
  int runtime{};
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    return "no CUDA driver is installed";
  }
  (void)cudaRuntimeGetVersion(&runtime);
  auto const version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  return "the CUDA driver supports CUDA " + version(driver) + ", older than this CUDA runtime (" +
         version(runtime) + ")";
}

/**
 * @brief Clears the runtime's last error and throws the typed error for `status`.
 *
 * For `cudaErrorInsufficientDriver` and `cudaErrorNoDevice` the message says whether the driver
 * is missing, too old, or no device is visible; `cudaErrorNotSupported` is thrown as
 * `not_supported`.
 */
[[noreturn]] inline void throw_cuda_error(cudaError_t status, char const* call, char const* where)
{
  (void)cudaGetLastError();  // never leave the error sticky
  std::string msg = std::string{"CUDA error at "} + where + ": " + call + " returned " +
                    cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  if (std::string const reason = no_usable_device_reason(status); !reason.empty()) {
    msg += "; no usable CUDA driver or device: " + reason;
  }
  if (is_sticky_error(status)) { msg += "; the CUDA context is lost: restart the process"; }
  if (status == cudaErrorNotSupported) { throw not_supported{msg, status}; }
  throw cuda_error{status, msg};
}

/** @brief Set once the process has begun exiting after the CUDA runtime was initialized. */
inline std::atomic<bool>& runtime_unloading() noexcept
{
  static std::atomic<bool> flag{false};
  return flag;
}

/**
 * @brief Registers, once, an exit handler that marks the runtime as unloading.
 *
 * Called after the first successful CUDA call of a resource, so that the handler runs before the
 * runtime's own teardown (exit handlers run in reverse order of registration). Objects destroyed
 * after it (statics created before the runtime) then skip their CUDA calls.
 */
inline void watch_runtime_teardown() noexcept
{
  static bool const registered = [] {
    return std::atexit([] { runtime_unloading().store(true, std::memory_order_relaxed); }) == 0;
  }();
  (void)registered;
}

/**
 * @brief Reports a failure in a `noexcept` release path: silent while the runtime unloads,
 * otherwise a message and a debug assertion. Clears the sticky error.
 */
inline void report_release_failure(cudaError_t status, [[maybe_unused]] char const* what) noexcept
{
  (void)cudaGetLastError();
  if (status == cudaErrorCudartUnloading || status == cudaErrorContextIsDestroyed ||
      runtime_unloading().load(std::memory_order_relaxed)) {
    return;
  }
#ifndef NDEBUG
  std::fprintf(stderr, "rmm_next: %s failed: %s (%s)\n", what, cudaGetErrorName(status),
               cudaGetErrorString(status));
  assert(false && "rmm_next: a CUDA release call failed");
#endif
}

/**
 * @brief The number of visible devices; throws `cuda_error` saying that no driver or device is
 * usable when the runtime cannot start.
 */
inline int device_count()
{
  int count{};
  RMM_NEXT_CUDA_TRY(cudaGetDeviceCount(&count));
  return count;
}

/** @brief The current device. */
inline int current_device()
{
  int device{};
  RMM_NEXT_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

/**
 * @brief Checks that `device` is in [0, `count`); throws `std::out_of_range` naming the id and
 * the count otherwise.
 */
inline int checked_device(int device, int count)
{
  if (device < 0 || device >= count) {
    throw std::out_of_range{"rmm_next: device id " + std::to_string(device) +
                            " is out of range: " + std::to_string(count) +
                            " CUDA device(s) are visible"};
  }
  return device;
}

/** @brief Checks that `device` names a visible device (see the overload above). */
inline int checked_device(int device) { return checked_device(device, device_count()); }

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
