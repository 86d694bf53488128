/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// For CPU tests whose streams are made-up handles (a process without a driver has no real
// streams; a handle's value is its lane). The adaptors ask the driver about their streams, and a
// driver would be handed invalid handles, so such a test program skips every case where a CUDA
// device is usable; its GPU counterpart covers the adaptor on real streams there.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace rmm_next::test {

/** @brief A GoogleTest environment that skips the whole program where a CUDA device is usable. */
class without_a_driver : public ::testing::Environment {
 public:
  /** @param counterpart The GPU test program that covers the same adaptor on real streams. */
  explicit without_a_driver(std::string counterpart) : counterpart_{std::move(counterpart)} {}

  void SetUp() override
  {
    int count{};
    bool const device = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    (void)cudaGetLastError();
    if (device) { GTEST_SKIP() << "a CUDA device is usable: " << counterpart_ << " covers it"; }
  }

 private:
  std::string counterpart_;
};

/** @brief Registers `without_a_driver`; call it at namespace scope to initialise a constant. */
inline ::testing::Environment* skip_where_a_device_is_usable(std::string counterpart)
{
  return ::testing::AddGlobalTestEnvironment(new without_a_driver{std::move(counterpart)});
}

}  // namespace rmm_next::test
