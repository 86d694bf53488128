/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The body of both test libraries: library_a.cpp (g++) and library_b.cu (nvcc) include it.

#include "library_api.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>

namespace per_device_test {

/** @brief Hidden (no export attribute): each library has its own copy of `value`. */
inline void const* hidden_static()
{
  static int value{};
  return &value;
}

namespace {

/** @brief What a library does instead of sharing the process-wide map: owns one. */
rmm_next::per_device_resource_map<ref>& own_resources()
{
  static rmm_next::per_device_resource_map<ref> map{
    [](int device) { return rmm_next::test::fake_resource{1000 + device}; }, 2};
  return map;
}

library_api make_api()
{
  return library_api{
    [] { return static_cast<void const*>(&rmm_next::get_per_device_resource_map()); },
    [] { return hidden_static(); },
    [](int device) { return rmm_next::get_per_device_resource_ref(device); },
    [](int device, ref r) { return rmm_next::set_per_device_resource_ref(device, r); },
    [](int device) { return rmm_next::reset_per_device_resource_ref(device); },
    [](int device) { return own_resources().get(device); },
    [](int device, ref r) { return own_resources().set(device, r); },
  };
}

}  // namespace
}  // namespace per_device_test
