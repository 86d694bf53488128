/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A second context of a device for GPU tests and their helper processes, made with cuCtxCreate
// through the runtime's cudaGetDriverEntryPointByVersion (libcuda is never linked). No GoogleTest
// (the importer processes use it too): a driver call that fails throws std::runtime_error naming
// it, which fails the test that made the call.

#include <rmm_next/detail/driver_api.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace rmm_next::test {

/** @brief A second context of device 0 (cuCtxCreate), destroyed with the object. */
class second_context {
 public:
  /**
   * @brief Makes the context; the thread's current context stays the one it had.
   * @throws std::runtime_error if the driver cannot make it.
   */
  second_context()
  {
    void* create{};
    void* destroy{};
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 13000
    using create_fn = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
    check(
      cudaGetDriverEntryPointByVersion("cuCtxCreate", &create, 13000, cudaEnableDefault, &found),
      "cudaGetDriverEntryPointByVersion(cuCtxCreate)");
#else
    using create_fn = CUresult (*)(CUcontext*, unsigned int, CUdevice);
    check(cudaGetDriverEntryPointByVersion("cuCtxCreate", &create, 3020, cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion(cuCtxCreate)");
#endif
    check(
      cudaGetDriverEntryPointByVersion("cuCtxDestroy", &destroy, 4000, cudaEnableDefault, &found),
      "cudaGetDriverEntryPointByVersion(cuCtxDestroy)");
    if (create == nullptr || destroy == nullptr) {
      throw std::runtime_error{"second_context: the driver has no cuCtxCreate or cuCtxDestroy"};
    }
    destroy_ = reinterpret_cast<CUresult (*)(CUcontext)>(destroy);
    CUcontext saved{};
    check(rmm_next::detail::driver().ctx_get_current(&saved), "cuCtxGetCurrent");
#if CUDART_VERSION >= 13000
    check(reinterpret_cast<create_fn>(create)(&context_, nullptr, 0, 0), "cuCtxCreate");
#else
    check(reinterpret_cast<create_fn>(create)(&context_, 0, 0), "cuCtxCreate");
#endif
    (void)rmm_next::detail::driver().ctx_set_current(saved);  // cuCtxCreate made it current
  }
  second_context(second_context const&)            = delete;
  second_context& operator=(second_context const&) = delete;
  ~second_context()
  {
    if (context_ != nullptr) { (void)destroy_(context_); }
  }

  /**
   * @brief Makes the context current on the calling thread.
   * @throws std::runtime_error if the driver refuses.
   */
  void make_current() const
  {
    check(rmm_next::detail::driver().ctx_set_current(context_), "cuCtxSetCurrent");
  }

  [[nodiscard]] CUcontext get() const noexcept { return context_; }

 private:
  static void check(cudaError_t status, char const* what)
  {
    if (status != cudaSuccess) {
      throw std::runtime_error{std::string{"second_context: "} + what + " returned " +
                               cudaGetErrorName(status)};
    }
  }
  static void check(CUresult status, char const* what)
  {
    if (status != CUDA_SUCCESS) {
      throw std::runtime_error{std::string{"second_context: "} + what + " returned CUresult " +
                               std::to_string(static_cast<int>(status))};
    }
  }

  CUcontext context_{};
  CUresult (*destroy_)(CUcontext){};
};

}  // namespace rmm_next::test
