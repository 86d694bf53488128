/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

/**
 * @brief Gives a declaration default visibility, also in libraries built with
 * `-fvisibility=hidden`, so that the dynamic linker binds every library of a process to one
 * definition (and one function-local static) of it.
 *
 * Empty on Windows, where a header-only library cannot export from every DLL that includes it.
 */
#if defined(_WIN32)
#define RMM_NEXT_EXPORT
#else
#define RMM_NEXT_EXPORT __attribute__((visibility("default")))
#endif
