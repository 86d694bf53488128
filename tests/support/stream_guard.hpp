/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A non-blocking CUDA stream owned by a test: created on the current device, destroyed with the
// object (gtest failures, not exceptions, report CUDA errors).

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

namespace rmm_next::test {

/** @brief A non-blocking stream on the current device, destroyed with the object. */
class stream_guard {
 public:
  stream_guard()
  {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  stream_guard(stream_guard const&)            = delete;
  stream_guard& operator=(stream_guard const&) = delete;
  ~stream_guard() { EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess); }

  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(google-explicit-constructor)

 private:
  cudaStream_t stream_{};
};

}  // namespace rmm_next::test
