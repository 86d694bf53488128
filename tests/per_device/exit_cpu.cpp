/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A program that leaves resources set in a static per_device_resource_map and exits, by
// returning from main ("return") or through std::exit from deep inside ("exit"). Its resources
// are statics too, some destroyed before the map and some after it. Must exit with status 0.
// Needs no GPU: the map's device count is given.

#include "support/fake_resource.hpp"

#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using rmm_next::device_async_resource_ref;
using rmm_next::test::fake_resource;

fake_resource destroyed_after_map{1};  // constructed before the map: destroyed after it

rmm_next::per_device_resource_map<device_async_resource_ref> library_resources{
  [](int device) { return fake_resource{100 + device}; }, 2};

fake_resource destroyed_before_map{2};  // constructed after the map: destroyed before it

void* outstanding[2]{};  // memory still allocated at exit (reachable: no leak report)

[[noreturn]] void exit_from_deep_inside() { std::exit(0); }

}  // namespace

int main(int argc, char** argv)
{
  bool const use_exit = argc > 1 && std::strcmp(argv[1], "exit") == 0;

  (void)library_resources.get(0);  // the factory's resource of device 0 exists
  library_resources.set(0, device_async_resource_ref{destroyed_after_map});
  library_resources.set(1, device_async_resource_ref{destroyed_before_map});

  outstanding[0] = library_resources.get(0).allocate_sync(64, 64);
  outstanding[1] = library_resources.get(1).allocate_sync(64, 64);

  std::printf("leaving with resources set (%s)\n", use_exit ? "std::exit" : "return from main");
  if (use_exit) { exit_from_deep_inside(); }
  return 0;
}
