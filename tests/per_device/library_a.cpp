/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Test library A: plain g++, -fvisibility=hidden.
#include "library_impl.hpp"

per_device_test::library_api const& per_device_test::library_a()
{
  static library_api const api = make_api();
  return api;
}
