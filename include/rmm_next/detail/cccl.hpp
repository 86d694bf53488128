/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// CCCL before 3.1 hides cuda::mr behind this macro; it must precede the first CCCL include.
#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cuda/std/version>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

/**
 * @brief 1 when CCCL has the stream-ordered `cuda::mr::resource` / `synchronous_resource`
 * interface (CCCL 3.1 and later), 0 for the `allocate_async` interface of CCCL 2.x and 3.0.
 */
#if CCCL_MAJOR_VERSION > 3 || (CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION >= 1)
#define RMM_NEXT_CCCL_STREAM_ORDERED_MR 1
#else
#define RMM_NEXT_CCCL_STREAM_ORDERED_MR 0
#endif

#include <cstddef>

namespace rmm_next {

/** @brief The alignment of every allocation from the async resources (as `cudaMalloc`). */
inline constexpr std::size_t default_alignment = 256;

}  // namespace rmm_next
