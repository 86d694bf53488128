/*
 * Copyright (c) 2025, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// main() for gpu-labelled tests: exits 77 (CTest SKIP_RETURN_CODE) with a one-line reason when
// no usable CUDA device exists, or fails when RMM_NEXT_REQUIRE_GPU=1 asks for a device.

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int skip_return_code = 77;

bool gpu_required()
{
  char const* value = std::getenv("RMM_NEXT_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace

int main(int argc, char** argv)
{
  int device_count         = 0;
  cudaError_t const status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    static_cast<void>(cudaGetLastError());  // leave no sticky error behind
    char const* reason = status != cudaSuccess ? cudaGetErrorString(status) : "0 devices";
    if (gpu_required()) {
      std::printf("FAILED: RMM_NEXT_REQUIRE_GPU=1 but no usable CUDA device (%s)\n", reason);
      return EXIT_FAILURE;
    }
    std::printf("SKIPPED: no usable CUDA device (%s)\n", reason);
    return skip_return_code;
  }

  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
