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
 * @brief Managed (unified) memory from a CUDA driver pool (`cudaMallocFromPoolAsync`).
 *
 * Default-constructed it uses the current managed pool of the current device (`cudaMemGetMemPool`,
 * managed type, device location). The preferred location of an owned pool is
 * `pool_options::location` (a device, the host, or none). Needs CUDA 13.0 and a device with
 * concurrent managed access; otherwise construction throws `not_supported`.
 *
 * A cheap copyable handle: copies share the pool. Memory is `device_accessible` and
 * `host_accessible`.
 */
class async_managed_resource : public detail::async_pool_resource<async_managed_resource> {
  using base = detail::async_pool_resource<async_managed_resource>;

 public:
  static constexpr detail::memory_kind kind = detail::memory_kind::managed;

  using base::base;
  async_managed_resource() = default;

  /** @brief The memory is accessible from device code. */
  friend constexpr void get_property(async_managed_resource const&,
                                     cuda::mr::device_accessible) noexcept
  {
  }
  /** @brief The memory is accessible from host code. */
  friend constexpr void get_property(async_managed_resource const&,
                                     cuda::mr::host_accessible) noexcept
  {
  }
};

static_assert(detail::stream_ordered_resource_with<async_managed_resource,
                                                   cuda::mr::device_accessible,
                                                   cuda::mr::host_accessible>);
static_assert(detail::synchronous_resource_with<async_managed_resource,
                                                cuda::mr::device_accessible,
                                                cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
