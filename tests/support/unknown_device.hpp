/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The one check of a constructor given device ids past the visible ones.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace rmm_next::test {

/**
 * @brief Expects `make(device)` to throw `std::out_of_range` for `count` and `count + 1000`, with
 * the one message of an id outside [0, `count`), naming `what` (the class made).
 */
template <class Make>
void expect_unknown_devices_refused(Make&& make, std::string const& what, int count)
{
  for (int const device : {count, count + 1000}) {
    try {
      make(device);
      ADD_FAILURE() << what << " took device " << device;
    } catch (std::out_of_range const& e) {
      EXPECT_EQ(std::string{e.what()},
                "rmm_next::" + what + ": device id " + std::to_string(device) +
                  " is out of range [0, " + std::to_string(count) + "): " + std::to_string(count) +
                  " device(s) are visible");
    }
  }
}

}  // namespace rmm_next::test
