/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Test library B: nvcc, -fvisibility=hidden (as a CUDA library such as cuDF is built).
#include "library_impl.hpp"

per_device_test::library_api const& per_device_test::library_b()
{
  static library_api const api = make_api();
  return api;
}
