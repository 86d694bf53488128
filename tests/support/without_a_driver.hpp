/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Whether a CUDA device is usable, for CPU tests whose cases differ with one. And for CPU tests
// whose streams are made-up handles (a process without a driver has no real streams; a handle's
// value is its lane): the adaptors ask the driver about their streams, and a driver would be
// handed invalid handles, so such a program skips every case where a device is usable; its GPU
// counterpart covers the adaptor on real streams there.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace rmm_next::test {

/** @brief Whether a CUDA device is usable (a driver and at least one device); clears the error. */
inline bool has_usable_device() noexcept
{
  int count{};
  bool const usable = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return usable;
}

/**
 * @brief A GoogleTest environment that skips the whole program where a CUDA device is usable: it
 * says why and exits with 77, which CTest reports as skipped (SKIP_RETURN_CODE), before any case
 * runs. (A skip in an environment's SetUp would leave GoogleTest counting every case as passed.)
 */
class without_a_driver : public ::testing::Environment {
 public:
  /** @param counterpart The GPU test program that covers the same adaptor on real streams. */
  explicit without_a_driver(std::string counterpart) : counterpart_{std::move(counterpart)} {}

  void SetUp() override
  {
    if (has_usable_device()) {
      std::printf("skipped: a CUDA device is usable, and %s covers it\n", counterpart_.c_str());
      std::fflush(stdout);
      std::exit(77);
    }
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
