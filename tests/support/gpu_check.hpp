/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// How gpu tests and examples run as tests treat a machine without a usable CUDA device: exit 77
// (CTest's SKIP_RETURN_CODE) with a one-line reason, also appended to the file named by
// RMM_NEXT_SKIPPED_LOG (set by the build tree's CTestCustom.cmake), or fail when
// RMM_NEXT_REQUIRE_GPU=1.

#include <rmm_next/detail/throw_error.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rmm_next_test {

inline constexpr int skip_return_code = 77;

/**
 * @brief The number of usable devices; when there is none, prints the reason ("no CUDA driver is
 * installed", a driver older than the runtime, no device visible, ...) and exits 77 (skipped), or
 * 1 when RMM_NEXT_REQUIRE_GPU=1 asks for a device.
 */
inline int require_devices()
{
  int count{};
  cudaError_t const status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) { return count; }
  (void)cudaGetLastError();
  std::string reason = status == cudaSuccess ? "no CUDA device is visible"
                                             : rmm_next::detail::no_usable_device_reason(status);
  if (reason.empty()) {
    reason = std::string{cudaGetErrorName(status)} + ": " + cudaGetErrorString(status);
  }
  char const* required = std::getenv("RMM_NEXT_REQUIRE_GPU");
  if (required != nullptr && std::strcmp(required, "1") == 0) {
    std::printf("FAILED: RMM_NEXT_REQUIRE_GPU=1 but no usable CUDA device (%s)\n", reason.c_str());
    std::exit(EXIT_FAILURE);
  }
  reason = "no usable CUDA device (" + reason + ")";
  std::printf("SKIPPED: %s\n", reason.c_str());
  // CTest shows a skipped test's output only with -V; after the tests it prints this file.
  if (char const* log = std::getenv("RMM_NEXT_SKIPPED_LOG"); log != nullptr) {
    if (std::FILE* file = std::fopen(log, "a"); file != nullptr) {
      std::fprintf(file, "%s\n", reason.c_str());
      std::fclose(file);
    }
  }
  std::exit(skip_return_code);
}

/** @brief How many `expect` checks of a program (an example run as a test) have failed. */
inline int& failures()
{
  static int count = 0;
  return count;
}

/** @brief Prints "FAILED: <what>" and counts a failure unless `ok`. */
inline void expect(bool ok, char const* what)
{
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures();
  }
}

}  // namespace rmm_next_test
