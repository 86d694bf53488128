/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What the test library built for "another rmm-next version" (library_other_abi.cpp, another
// RMM_NEXT_ABI_NAMESPACE) exports. No rmm-next type crosses: they are other types there.

#define PER_DEVICE_TEST_OTHER_ABI_EXPORT __attribute__((visibility("default")))

namespace per_device_test {

struct other_abi_api {
  /** @brief &rmm_next::get_per_device_resource_map() as this library sees it. */
  void const* (*process_map)();
  /** @brief The name of the library's rmm-next ABI namespace. */
  char const* abi_namespace;
};

PER_DEVICE_TEST_OTHER_ABI_EXPORT other_abi_api const& library_other_abi();

}  // namespace per_device_test
