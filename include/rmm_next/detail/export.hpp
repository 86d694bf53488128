/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/version.hpp>

// CCCL before 3.1 hides cuda::mr behind this macro, which must precede the first include of
// <cuda/memory_resource>. Defined here only (not by the CMake target), so that a plain include
// path works too. A translation unit that included <cuda/memory_resource> before rmm-next without
// the macro has no cuda::mr: say so at once instead of failing at rmm-next's first use of it.
#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#if defined(_CUDA_MEMORY_RESOURCE) && defined(CCCL_VERSION) && CCCL_VERSION < 3001000
#error \
  "rmm_next: <cuda/memory_resource> was included before rmm-next without LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE, so this CCCL hides cuda::mr; include rmm-next first or define the macro"
#endif
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cuda/std/version>  // CCCL_VERSION

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

/**
 * @brief The inline namespace every rmm-next declaration lives in, keyed on rmm-next's major and
 * minor version and on the CCCL version, which fixes the layout of the resource refs rmm-next
 * stores: `rmm_next::v0_1_cccl3000001` for rmm-next 0.1 with CCCL 3.0.1.
 *
 * Code keeps spelling `rmm_next::...`; the linker sees the key. Libraries built against the same
 * rmm-next and CCCL share the process-wide map (`get_per_device_resource_map()`) and every other
 * exported definition; libraries built against different ones get distinct symbols and their own
 * maps, never one object read two ways. Like RMM's `rmm::_RMM_26_10`.
 *
 * Defining `RMM_NEXT_ABI_NAMESPACE` before the first rmm-next include names another namespace,
 * shared only with code built with the same name (the tests use it to stand for another version).
 */
#ifndef RMM_NEXT_ABI_NAMESPACE
#define RMM_NEXT_ABI_NAMESPACE \
  RMM_NEXT_ABI_NAMESPACE_DETAIL(RMM_NEXT_VERSION_MAJOR, RMM_NEXT_VERSION_MINOR, CCCL_VERSION)
#endif
#define RMM_NEXT_ABI_NAMESPACE_DETAIL(major, minor, cccl) \
  RMM_NEXT_ABI_NAMESPACE_PASTE(major, minor, cccl)
#define RMM_NEXT_ABI_NAMESPACE_PASTE(major, minor, cccl) v##major##_##minor##_cccl##cccl

/** @brief The tokens of `x` after macro expansion, as a string literal (e.g. the ABI namespace). */
#define RMM_NEXT_STRINGIFY(x)        RMM_NEXT_STRINGIFY_DETAIL(x)
#define RMM_NEXT_STRINGIFY_DETAIL(x) #x
