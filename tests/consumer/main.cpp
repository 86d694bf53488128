/*
 * Copyright (c) 2025, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A consumer of the rmm-next package: plain g++, no GPU needed (nothing is constructed).

#include <rmm_next/rmm_next.hpp>

#include <cstdio>
#include <type_traits>

static_assert(std::is_class_v<rmm_next::async_device_resource>);

int main()
{
  std::puts("rmm-next consumer: OK");
  return 0;
}
