/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <new>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief Asks a `device_guard` for the device's primary context (see its constructors). */
struct primary_context_t {
  explicit primary_context_t() = default;
};
inline constexpr primary_context_t primary_context{};

/**
 * @brief Makes a device current for its lifetime, then gives the thread back exactly the context
 * it had, also none.
 *
 * Restoring by context, not by device number, matters: since CUDA 12 `cudaSetDevice` creates the
 * device's primary context (hundreds of MB), so "restoring" device 0 on a thread that had no
 * context would create one on a GPU the program never used. The guard leaves the runtime's error
 * state alone unless its own call failed, so a pending error from the caller's kernel survives.
 */
class device_guard {
 public:
  /**
   * @brief Makes `device` current.
   * @throws cuda_error if it cannot.
   */
  explicit device_guard(int device)
  {
    if (cudaError_t const s = enter(device); s != cudaSuccess) {
      throw_cuda_error(s, "cudaSetDevice", "device_guard");
    }
  }

  /** @brief Makes `device` current if it can (nothing for `no_device`); `ok()` says whether it did.
   */
  device_guard(int device, std::nothrow_t) noexcept
  {
    if (is_device_id(device) && enter(device) != cudaSuccess) {
      (void)cudaGetLastError();  // the failure is ours: clear it
      ok_ = false;
    }
  }

  /**
   * @brief Makes `device`'s primary context current, also where another context of `device` (one
   * made with `cuCtxCreate`) is: for what must outlive the caller's context, which its owner may
   * destroy.
   * @throws cuda_error if it cannot.
   */
  device_guard(int device, primary_context_t)
  {
    if (cudaError_t const s = enter(device, true); s != cudaSuccess) {
      throw_cuda_error(s, "cudaSetDevice", "device_guard");
    }
  }

  /** @brief As the constructor above, if it can; `ok()` says whether it did. */
  device_guard(int device, primary_context_t, std::nothrow_t) noexcept
  {
    if (is_device_id(device) && enter(device, true) != cudaSuccess) {
      (void)cudaGetLastError();
      ok_ = false;
    }
  }

  device_guard(device_guard const&)            = delete;
  device_guard& operator=(device_guard const&) = delete;

  ~device_guard()
  {
    if (switched_) { (void)driver().ctx_set_current(saved_); }
  }

  /** @brief False when the nothrow constructor could not make the device current. */
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  cudaError_t enter(int device, bool primary = false) noexcept
  {
    driver_api const& api = driver();
    if (api.ctx_get_current == nullptr || api.ctx_set_current == nullptr ||
        api.ctx_get_current(&saved_) != CUDA_SUCCESS) {
      // No way to give the context back exactly: only a device that is current already will do.
      int now{no_device};
      if (cudaError_t const s = cudaGetDevice(&now); s != cudaSuccess) { return s; }
      return now == device ? cudaSuccess : cudaErrorNotSupported;
    }
    // Judged by the context, not by cudaGetDevice: on a thread whose context was taken away
    // (as this guard does when it found none), the runtime still names the last device set, and
    // a call made in that state would make a context of its choosing.
    if (device_of_current_context(saved_) == device &&
        (!primary || is_primary_context(saved_, static_cast<CUdevice>(device)))) {
      return cudaSuccess;
    }
    // cudaSetDevice binds the device's primary context to the thread.
    if (cudaError_t const s = cudaSetDevice(device); s != cudaSuccess) { return s; }
    switched_ = true;
    return cudaSuccess;
  }

  CUcontext saved_{};
  bool switched_{false};
  bool ok_{true};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
