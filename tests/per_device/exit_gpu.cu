/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A program that leaves resources set at exit and must still exit with status 0:
// - on every device, the process-wide map holds a ref to the program's own async_device_resource,
//   a static destroyed after main (after the CUDA runtime may have begun tearing down);
// - a library's own static per_device_resource_map made async_device_resources on every device;
// - allocations from both are still outstanding;
// - a static object constructed before CUDA starts reads the process-wide map in its destructor,
//   after main, when the runtime is gone: the map is never destroyed and a read of a device whose
//   ref was set makes no CUDA call.
// Modes: "return" (from main), "exit" (std::exit from deep inside). Exits 77 without a device.

#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace {

using rmm_next::async_device_resource;
using rmm_next::device_async_resource_ref;

struct reads_map_after_main {
  int devices = 0;
  ~reads_map_after_main()
  {
    for (int d = 0; d < devices; ++d) {
      (void)rmm_next::get_per_device_resource_ref(d);
    }
  }
};
reads_map_after_main reader;  // constructed before any CUDA call: destroyed last

std::vector<async_device_resource> own_resources;  // destroyed after main, refs still set

rmm_next::per_device_resource_map<device_async_resource_ref> library_resources{
  [](int device) { return async_device_resource{device}; }};

[[noreturn]] void exit_from_deep_inside() { std::exit(0); }

}  // namespace

int main(int argc, char** argv)
{
  bool const use_exit = argc > 1 && std::strcmp(argv[1], "exit") == 0;
  int const count     = rmm_next_test::require_devices();

  own_resources.reserve(static_cast<std::size_t>(count));
  for (int d = 0; d < count; ++d) {
    own_resources.emplace_back(rmm_next::pool_options{.initial_pool_size = 1 << 20}, d);
    rmm_next::set_per_device_resource_ref(d, own_resources.back());
    (void)rmm_next::get_per_device_resource_ref(d).allocate_sync(256, rmm_next::default_alignment);
    (void)library_resources.get(d).allocate_sync(256, rmm_next::default_alignment);
  }
  reader.devices = count;

  std::printf("leaving with resources set on %d device(s) (%s)\n",
              count,
              use_exit ? "std::exit" : "return from main");
  if (use_exit) { exit_from_deep_inside(); }
  return 0;
}
