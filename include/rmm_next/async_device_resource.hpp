/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/async_pool_resource.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/pool_options.hpp>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Device memory from a CUDA driver pool (`cudaMallocFromPoolAsync` / `cudaFreeAsync`).
 *
 * Default-constructed it uses the current device's *current* pool (`cudaMemGetMemPool`, pinned
 * type, device location), sharing memory with every `cudaMallocAsync` user in the process. Other
 * pools: `default_pool{}`, a `pool_options` (an owned pool), or a caller's `cudaMemPool_t`.
 *
 * A cheap copyable handle: copies share the pool; an owned pool is destroyed with the last copy.
 * Thread-safe. Memory is `device_accessible`.
 */
class async_device_resource : public detail::async_pool_resource<async_device_resource> {
  using base = detail::async_pool_resource<async_device_resource>;

 public:
  static constexpr detail::memory_kind kind = detail::memory_kind::device;

  using base::base;
  async_device_resource() = default;

  /** @brief The memory is accessible from device code. */
  friend constexpr void get_property(async_device_resource const&,
                                     cuda::mr::device_accessible) noexcept
  {
  }
};

static_assert(
  detail::stream_ordered_resource_with<async_device_resource, cuda::mr::device_accessible>);
static_assert(
  detail::synchronous_resource_with<async_device_resource, cuda::mr::device_accessible>);
static_assert(!cuda::has_property<async_device_resource, cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
