/*
 * Copyright (c) 2025, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A consumer of the rmm-next package: plain g++, no GPU needed (nothing is constructed).

#include <rmm_next/rmm_next.hpp>

#include <cstdio>
#include <type_traits>

static_assert(std::is_class_v<rmm_next::async_device_resource>);
#if defined(RMM_NEXT_PACKAGE_VERSION)  // from find_package(rmm-next)
static_assert(RMM_NEXT_VERSION == (RMM_NEXT_PACKAGE_VERSION),
              "the rmm-next package's version differs from <rmm_next/version.hpp>");
#endif

int main()
{
  std::puts("rmm-next consumer: OK");
  return 0;
}
