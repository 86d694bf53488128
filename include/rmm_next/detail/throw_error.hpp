/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/error.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <utility>

/**
 * @file
 * @brief How rmm-next raises errors: one message scheme, `rmm_next::<what>: <what happened>`, where
 * `what` names the class or function the user called (never an internal header or line), and the
 * typed exception for a failed CUDA call (runtime or driver), with the reason when no driver or
 * device is usable.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief "rmm_next::<what>: <happened>", the text of every rmm-next error. */
inline std::string error_message(std::string_view what, std::string_view happened)
{
  std::string msg{"rmm_next::"};
  msg.append(what).append(": ").append(happened);
  return msg;
}

/**
 * @brief Throws `Exception{error_message(what, happened), args...}`: the one way rmm-next raises
 * an error other than a failed CUDA call (`throw_cuda_error`).
 */
template <class Exception, class... Args>
[[noreturn]] void throw_error(std::string_view what, std::string_view happened, Args&&... args)
{
  throw Exception{error_message(what, happened), std::forward<Args>(args)...};
}

/**
 * @brief Throws `Exception{"rmm_next::" + message}` for a `message` that already reads "<what>:
 * <what happened>" (`RMM_NEXT_EXPECTS`).
 */
template <class Exception>
[[noreturn]] void throw_error(std::string_view message)
{
  throw Exception{std::string{"rmm_next::"}.append(message)};
}

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
 * @brief The function name of a call's source text: "cudaGetDevice" for "cudaGetDevice(&device)".
 */
constexpr std::string_view function_name(std::string_view call) noexcept
{
  std::string_view const name = call.substr(0, call.find('('));
  std::size_t const end       = name.find_last_not_of(' ');
  return end == std::string_view::npos ? name : name.substr(0, end + 1);
}

/**
 * @brief What a user can do about the `no_usable_device_reason` of `status`, or an empty string.
 */
inline std::string_view no_usable_device_advice(cudaError_t status)
{
  if (status == cudaErrorNoDevice) {
    return "check CUDA_VISIBLE_DEVICES and that the device is present";
  }
  if (status == cudaErrorInsufficientDriver) {
    return "install or update the NVIDIA driver, or run on a machine that has one";
  }
  return {};
}

/**
 * @brief Clears the runtime's last error and throws the typed error for `status`, in the scheme
 * of `error_message`: `what` is the user's call, `call` the CUDA function that failed.
 *
 * For `cudaErrorInsufficientDriver` and `cudaErrorNoDevice` the message says whether the driver
 * is missing, too old, or no device is visible; `cudaErrorNotSupported` is thrown as
 * `not_supported`.
 */
[[noreturn]] inline void throw_cuda_error(cudaError_t status,
                                          std::string_view call,
                                          std::string_view what)
{
  (void)cudaGetLastError();  // never leave the error sticky
  std::string msg = error_message(what,
                                  std::string{call} + " returned " + cudaGetErrorName(status) +
                                    " (" + cudaGetErrorString(status) + ")");
  if (std::string const reason = no_usable_device_reason(status); !reason.empty()) {
    msg += "; no usable CUDA driver or device: " + reason;
    msg.append("; ").append(no_usable_device_advice(status));
  }
  if (is_sticky_error(status)) { msg += "; the CUDA context is lost: restart the process"; }
  if (status == cudaErrorNotSupported) { throw not_supported{msg, status}; }
  throw cuda_error{status, msg};
}

/** @brief The driver's name of `result` ("CUDA_ERROR_OUT_OF_MEMORY"), or its number. */
inline std::string driver_error_name(CUresult result)
{
  char const* name{};
  if (auto const fn = driver().get_error_name;
      fn != nullptr && fn(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return name;
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

/**
 * @brief Throws the typed error of a failed driver call: `not_supported` for
 * CUDA_ERROR_NOT_SUPPORTED, `out_of_memory` for CUDA_ERROR_OUT_OF_MEMORY (with `oom_detail`, which
 * names the sizes), `cuda_error` otherwise (its code the runtime's error of the same number).
 */
[[noreturn]] inline void throw_driver_error(CUresult result,
                                            std::string_view call,
                                            std::string_view what,
                                            std::string const& oom_detail = {})
{
  std::string const failed = std::string{call} + " returned " + driver_error_name(result);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    throw_error<out_of_memory>(what, "out_of_memory: " + oom_detail + " (" + failed + ")");
  }
  if (result == CUDA_ERROR_NOT_SUPPORTED) {
    throw_error<not_supported>(what, failed, cudaErrorNotSupported);
  }
  throw cuda_error{static_cast<cudaError_t>(result), error_message(what, failed)};
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
