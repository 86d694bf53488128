/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// First: defines LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE before any CCCL include.
#include <rmm_next/detail/export.hpp>

#include <rmm_next/alignment.hpp>  // default_alignment, used with every allocate member

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

/**
 * @brief 1 when CCCL has the owning type-erased resources `cuda::mr::any_resource` and
 * `any_synchronous_resource` (CCCL 3.2 and later), 0 before.
 */
#if CCCL_MAJOR_VERSION > 3 || (CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION >= 2)
#define RMM_NEXT_CCCL_ANY_RESOURCE 1
#else
#define RMM_NEXT_CCCL_ANY_RESOURCE 0
#endif

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

#if RMM_NEXT_CCCL_STREAM_ORDERED_MR
/** @brief `R` allocates in stream order with `Properties`, as this CCCL spells it
 * (`cuda::mr::resource_with` on CCCL 3.1 and later). */
template <class R, class... Properties>
concept stream_ordered_resource_with = cuda::mr::resource_with<R, Properties...>;

/** @brief `R` allocates synchronously with `Properties`, as this CCCL spells it
 * (`cuda::mr::synchronous_resource_with` on CCCL 3.1 and later). */
template <class R, class... Properties>
concept synchronous_resource_with = cuda::mr::synchronous_resource_with<R, Properties...>;
#else
/** @brief `R` allocates in stream order with `Properties`, as this CCCL spells it
 * (`cuda::mr::async_resource_with` before CCCL 3.1). */
template <class R, class... Properties>
concept stream_ordered_resource_with = cuda::mr::async_resource_with<R, Properties...>;

/** @brief `R` allocates synchronously with `Properties`, as this CCCL spells it
 * (`cuda::mr::resource_with` before CCCL 3.1). */
template <class R, class... Properties>
concept synchronous_resource_with = cuda::mr::resource_with<R, Properties...>;
#endif

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
