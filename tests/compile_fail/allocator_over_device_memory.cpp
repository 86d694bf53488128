/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Must not compile: std::vector would construct its elements from the host in device memory.
// tests/CMakeLists.txt expects the static_assert of rmm_next::allocator naming thrust_allocator.
#include <rmm_next/allocator.hpp>
#include <rmm_next/async_device_resource.hpp>

#include <vector>

int main()
{
  rmm_next::async_device_resource device_memory;
  std::vector<int, rmm_next::allocator<int, rmm_next::async_device_resource>> v(
    10, 1, device_memory);
  return v[0];
}
