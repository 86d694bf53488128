/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Every public header includes this file first. Below C++20 the compiler stops here with one
// message, instead of reporting a screen of errors from rmm-next's first `requires` clause on.
// MSVC keeps __cplusplus at 199711L unless /Zc:__cplusplus is given: _MSVC_LANG is its version.
#if defined(_MSVC_LANG) && _MSVC_LANG < 202002L || !defined(_MSVC_LANG) && __cplusplus < 202002L
#error \
  "rmm_next: compiled below C++20, which rmm-next needs; use -std=c++20 (MSVC: /std:c++20) or link the CMake target rmm-next::rmm-next"
// g++ and clang go on after #error; a missing include is fatal everywhere. nvcc stops after
// preprocessing on its own.
#if !defined(__NVCC__)
#include <rmm-next stops here: C++20 is required>
#endif
#endif
