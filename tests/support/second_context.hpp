/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A second context of a device for GPU tests, made with cuCtxCreate through the runtime's
// cudaGetDriverEntryPointByVersion (libcuda is never linked).

#include <rmm_next/detail/driver_api.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

namespace rmm_next::test {

/** @brief A second context of device 0 (cuCtxCreate), destroyed with the object. */
class second_context {
 public:
  /** @brief Makes the context; the thread's current context stays the one it had. */
  second_context()
  {
    void* create{};
    void* destroy{};
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 13000
    using create_fn = CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice);
    EXPECT_EQ(
      cudaGetDriverEntryPointByVersion("cuCtxCreate", &create, 13000, cudaEnableDefault, &found),
      cudaSuccess);
#else
    using create_fn = CUresult (*)(CUcontext*, unsigned int, CUdevice);
    EXPECT_EQ(
      cudaGetDriverEntryPointByVersion("cuCtxCreate", &create, 3020, cudaEnableDefault, &found),
      cudaSuccess);
#endif
    EXPECT_EQ(
      cudaGetDriverEntryPointByVersion("cuCtxDestroy", &destroy, 4000, cudaEnableDefault, &found),
      cudaSuccess);
    destroy_ = reinterpret_cast<CUresult (*)(CUcontext)>(destroy);
    CUcontext saved{};
    EXPECT_EQ(rmm_next::detail::driver().ctx_get_current(&saved), CUDA_SUCCESS);
#if CUDART_VERSION >= 13000
    EXPECT_EQ(reinterpret_cast<create_fn>(create)(&context_, nullptr, 0, 0), CUDA_SUCCESS);
#else
    EXPECT_EQ(reinterpret_cast<create_fn>(create)(&context_, 0, 0), CUDA_SUCCESS);
#endif
    (void)rmm_next::detail::driver().ctx_set_current(saved);  // cuCtxCreate made it current
  }
  second_context(second_context const&)            = delete;
  second_context& operator=(second_context const&) = delete;
  ~second_context()
  {
    if (context_ != nullptr) { (void)destroy_(context_); }
  }

  /** @brief Makes the context current on the calling thread. */
  void make_current() const
  {
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(context_), CUDA_SUCCESS);
  }

  [[nodiscard]] CUcontext get() const noexcept { return context_; }

 private:
  CUcontext context_{};
  CUresult (*destroy_)(CUcontext){};
};

}  // namespace rmm_next::test
