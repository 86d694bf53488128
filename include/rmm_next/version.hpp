/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

// The one place of rmm-next's version: CMakeLists.txt reads these three lines for project() and
// the package version, so keep their form (`#define RMM_NEXT_VERSION_<PART> <number>`).

/** @brief rmm-next's version, by component (plain numbers, so that they can name things). */
#define RMM_NEXT_VERSION_MAJOR 0
#define RMM_NEXT_VERSION_MINOR 1
#define RMM_NEXT_VERSION_PATCH 0

/** @brief rmm-next's version, as MAJOR * 10000 + MINOR * 100 + PATCH. */
#define RMM_NEXT_VERSION \
  (RMM_NEXT_VERSION_MAJOR * 10000 + RMM_NEXT_VERSION_MINOR * 100 + RMM_NEXT_VERSION_PATCH)
