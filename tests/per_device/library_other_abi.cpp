/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Test library built as if against another rmm-next version: g++, -fvisibility=hidden, and
// RMM_NEXT_ABI_NAMESPACE defined to a key no real version has (tests/per_device/tests.cmake).
#include "library_other_abi.hpp"

#include <rmm_next/detail/export.hpp>  // RMM_NEXT_STRINGIFY
#include <rmm_next/per_device_resource.hpp>

per_device_test::other_abi_api const& per_device_test::library_other_abi()
{
  static other_abi_api const api{
    [] { return static_cast<void const*>(&rmm_next::get_per_device_resource_map()); },
    RMM_NEXT_STRINGIFY(RMM_NEXT_ABI_NAMESPACE)};
  return api;
}
