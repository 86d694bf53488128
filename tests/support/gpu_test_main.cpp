/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// main() for gpu-labelled tests: exits 77 (CTest SKIP_RETURN_CODE) with a one-line reason when
// no usable CUDA device exists, or fails when RMM_NEXT_REQUIRE_GPU=1 asks for a device.

#include "gpu_check.hpp"

#include <gtest/gtest.h>

int main(int argc, char** argv)
{
  rmm_next_test::require_devices();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
