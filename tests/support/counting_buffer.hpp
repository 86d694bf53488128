/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A stream buffer for tests of what an adaptor writes to an std::ostream and when it flushes it.

#include <sstream>

namespace rmm_next::test {

/** @brief Keeps what it is given (`str()`) and counts the flushes of its stream (`sync`). */
class counting_buffer : public std::stringbuf {
 public:
  int syncs = 0;

 protected:
  int sync() override
  {
    ++syncs;
    return std::stringbuf::sync();
  }
};

}  // namespace rmm_next::test
