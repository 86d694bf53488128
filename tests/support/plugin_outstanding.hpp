/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The live allocations librmm_next_allocator.so tracks, read through its C interface.

#include <rmm_next/allocator_plugin.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rmm_next::test {

/** @brief `rmm_next_outstanding(device)` and each of its entries; a failure is a test failure. */
inline std::vector<rmm_next_allocation> outstanding(int device)
{
  std::int64_t const n = rmm_next_outstanding(device);
  EXPECT_GE(n, 0) << rmm_next_last_error();
  std::vector<rmm_next_allocation> list(static_cast<std::size_t>(n < 0 ? 0 : n));
  for (std::size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(rmm_next_outstanding_entry(i, &list[i]), 0) << rmm_next_last_error();
  }
  return list;
}

}  // namespace rmm_next::test
