/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Helpers of the NVTX test programs: point NVTX at the injection library, and turn recorded
// calls into short lines ("push async_device_resource::allocate", "register p 1000", "pop") that
// a test compares whole, so that a failure prints the full trace.

#include "recorder.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace rmm_next_test::nvtx {

/**
 * @brief Sets NVTX_INJECTION64_PATH to the injection library this program was built with, unless
 * the environment already names one (CTest does). Runs at static initialization, before NVTX is
 * first called.
 */
inline bool const injection_path_set = [] {
  return setenv("NVTX_INJECTION64_PATH", RMM_NEXT_TEST_NVTX_INJECTION, 0) == 0;
}();

/** @brief Names for pointers in a trace ("p", "q", ...); others print as "?". */
using pointer_names = std::map<void const*, std::string>;

/**
 * @brief One line per range or region call; calls outside the "rmm_next" domain say which domain
 * they are in. Domain creation and string registration happen on a class's first use, whichever
 * test that is, so they are left out (`count` checks them).
 */
inline std::vector<std::string> trace(std::vector<event> const& events,
                                      pointer_names const& names = {})
{
  auto name_of = [&names](void const* p) {
    auto const it = names.find(p);
    return it == names.end() ? std::string{"?"} : it->second;
  };
  std::vector<std::string> lines;
  for (event const& e : events) {
    std::string line;
    switch (e.kind) {
      case call::domain_create:
      case call::register_string: continue;
      case call::range_push: line = "push " + e.text; break;
      case call::range_pop: line = "pop"; break;
      case call::region_register:
        line = "register " + name_of(e.ptr) + " " + std::to_string(e.bytes);
        break;
      case call::region_unregister: line = "unregister " + name_of(e.ptr); break;
      case call::region_name: line = "name " + name_of(e.ptr) + " " + e.text; break;
    }
    if (e.domain != "rmm_next") { line += " [domain '" + e.domain + "']"; }
    lines.push_back(line);
  }
  return lines;
}

/** @brief How many recorded calls are `kind` with `text` (or any text when empty). */
inline long count(std::vector<event> const& events, call kind, std::string const& text = {})
{
  long n = 0;
  for (event const& e : events) {
    if (e.kind == kind && (text.empty() || e.text == text)) { ++n; }
  }
  return n;
}

/** @brief Per recording thread: pushes and pops balance and the depth never goes below zero. */
inline void expect_balanced(std::vector<event> const& events)
{
  std::map<std::uint64_t, long> depth;
  for (event const& e : events) {
    if (e.kind == call::range_push) { ++depth[e.thread]; }
    if (e.kind == call::range_pop) {
      EXPECT_GT(depth[e.thread], 0) << "pop without a push on thread " << e.thread;
      --depth[e.thread];
    }
  }
  for (auto const& [thread, d] : depth) {
    EXPECT_EQ(d, 0) << "unbalanced ranges on thread " << thread;
  }
}

}  // namespace rmm_next_test::nvtx
