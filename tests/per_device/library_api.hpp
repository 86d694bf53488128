/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What each of the two test libraries (built with -fvisibility=hidden) exports: one function
// returning a table of its own functions, so that main() can compare what each library sees.

#include <rmm_next/resource_ref.hpp>

#define PER_DEVICE_TEST_EXPORT __attribute__((visibility("default")))

namespace per_device_test {

using ref = rmm_next::device_async_resource_ref;

struct library_api {
  /** @brief &rmm_next::get_per_device_resource_map() as this library sees it. */
  void const* (*process_map)();
  /** @brief A function-local static of a hidden inline function: one per library. */
  void const* (*hidden_static)();
  // The free functions, called from inside the library (need a CUDA device).
  ref (*get)(int device);
  ref (*set)(int device, ref r);
  ref (*reset)(int device);
  // The library's own per_device_resource_map (2 devices, fake resources: no CUDA call).
  ref (*own_get)(int device);
  ref (*own_set)(int device, ref r);
};

PER_DEVICE_TEST_EXPORT library_api const& library_a();
PER_DEVICE_TEST_EXPORT library_api const& library_b();

}  // namespace per_device_test
