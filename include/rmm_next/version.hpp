/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

/** @brief rmm-next's version, as MAJOR * 10000 + MINOR * 100 + PATCH. */
#define RMM_NEXT_VERSION       100
#define RMM_NEXT_VERSION_MAJOR (RMM_NEXT_VERSION / 10000)
#define RMM_NEXT_VERSION_MINOR (RMM_NEXT_VERSION / 100 % 100)
#define RMM_NEXT_VERSION_PATCH (RMM_NEXT_VERSION % 100)
