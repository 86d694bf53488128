/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Two shared libraries built with -fvisibility=hidden (A with g++, B with nvcc) share one
// process-wide per_device_resource_map, while each library's own map stays its own. A third,
// built with another rmm-next ABI namespace (as a library built against another rmm-next or CCCL
// version is), has a process-wide map of its own.
//
//   per_device_two_libraries                 no GPU needed: instance identity, own maps
//   per_device_two_libraries --with-device   also set/get/reset through the free functions
//                                            across the libraries (exits 77 without a device)

#include "gpu_check.hpp"
#include "library_api.hpp"
#include "library_other_abi.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/detail/export.hpp>  // RMM_NEXT_STRINGIFY
#include <rmm_next/per_device_resource.hpp>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void check(bool ok, char const* what)
{
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) { ++failures; }
}

}  // namespace

int main(int argc, char** argv)
{
  using per_device_test::library_a;
  using per_device_test::library_b;
  using per_device_test::ref;
  bool const with_device = argc > 1 && std::strcmp(argv[1], "--with-device") == 0;

  auto const& a = library_a();
  auto const& b = library_b();

  // Without the export the libraries would each have their own copy: the control shows that
  // hidden visibility is in effect, so the identity below is the export's doing.
  check(a.hidden_static() != b.hidden_static(),
        "control: a hidden inline function's static differs between the libraries");
  check(a.process_map() == b.process_map(),
        "library A and library B see the same process-wide map");
  check(a.process_map() == &rmm_next::get_per_device_resource_map(),
        "the executable sees that map too");

  // The ABI namespace: rmm-next's major and minor version and the CCCL version.
  std::string const abi          = RMM_NEXT_STRINGIFY(RMM_NEXT_ABI_NAMESPACE);
  std::string const expected_abi = "v" + std::to_string(RMM_NEXT_VERSION_MAJOR) + "_" +
                                   std::to_string(RMM_NEXT_VERSION_MINOR) + "_cccl" +
                                   std::to_string(CCCL_VERSION);
  check(abi == expected_abi, "the ABI namespace is named for the rmm-next and CCCL versions");
  auto const& other = per_device_test::library_other_abi();
  check(abi != other.abi_namespace, "control: the other library's ABI namespace differs");
  check(other.process_map() != a.process_map(),
        "a library of another rmm-next ABI has a process-wide map of its own");

  // Each library's own map is its own: setting one changes neither the other nor the process map.
  rmm_next::test::fake_resource mine{1};
  ref const b_before = b.own_get(0);
  ref const previous = a.own_set(0, ref{mine});
  check(a.own_get(0) == ref{mine}, "library A's own map holds what A set");
  check(b.own_get(0) == b_before, "library B's own map is unchanged");
  check(!(b.own_get(0) == ref{mine}), "library B's own map does not see A's resource");
  check(a.own_set(0, previous) == ref{mine}, "library A restores its previous ref");

  if (with_device) {
    int const count = rmm_next_test::require_devices();
    rmm_next::test::fake_resource shared{2};
    ref const initial = b.get(0);
    check(a.set(0, ref{shared}) == initial, "set in A returns the initial ref B saw");
    check(b.get(0) == ref{shared}, "B sees the ref A set");
    check(rmm_next::get_per_device_resource_ref(0) == ref{shared}, "the executable sees it too");
    check(b.reset(0) == ref{shared}, "reset in B returns the ref A set");
    check(a.get(0) == initial, "A sees B's reset");
    if (count > 1) { check(a.get(1) == b.get(1), "device 1: both see the same ref"); }
  }

  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
