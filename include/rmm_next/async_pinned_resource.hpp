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

#include <optional>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Pinned (page-locked) host memory from a CUDA driver pool (`cudaMallocFromPoolAsync`).
 *
 * Default-constructed it uses the host's current pinned pool (`cudaMemGetMemPool`, pinned type,
 * host location), shared with every user of that pool in the process. Before CUDA 13.0 there is
 * no host pool to share: the resource creates its own on the host NUMA node closest to its device.
 *
 * Host pools start host-only. Construction grants kernels read-write access
 * (`cudaMemPoolSetAccess`) on every visible device, or on the devices the caller names; the
 * grant is made on the pool, so it holds for every user of that pool.
 *
 * A cheap copyable handle: copies share the pool. Memory is `host_accessible` and
 * `device_accessible`. Needs CUDA 12.6 (runtime and driver) and a device with
 * `cudaDevAttrHostMemoryPoolsSupported`; otherwise construction throws `not_supported`.
 */
class async_pinned_resource : public detail::async_pool_resource<async_pinned_resource> {
  using base = detail::async_pool_resource<async_pinned_resource>;

 public:
  static constexpr detail::memory_kind kind = detail::memory_kind::pinned;

  using base::base;
  async_pinned_resource() = default;

  /**
   * @brief The pool chosen by `source`, with device access granted to `accessible_devices` only.
   * @param source `current_pool{}`, `default_pool{}`, `pool_options` or a `cudaMemPool_t`.
   * @param device The resource's device (its stream's device); the current one if none.
   * @param accessible_devices Devices whose kernels may read and write the memory.
   * @throws std::out_of_range if a device id is not visible.
   */
  template <class Source>
    requires detail::is_pool_source<Source>
  async_pinned_resource(Source const& source,
                        std::optional<int> device,
                        std::vector<int> const& accessible_devices)
    : base(base::bind_source(source, device, &accessible_devices))
  {
  }

  /** @brief The memory is accessible from host code. */
  friend constexpr void get_property(async_pinned_resource const&,
                                     cuda::mr::host_accessible) noexcept
  {
  }
  /** @brief The memory is accessible from device code. */
  friend constexpr void get_property(async_pinned_resource const&,
                                     cuda::mr::device_accessible) noexcept
  {
  }
};

static_assert(detail::stream_ordered_resource_with<async_pinned_resource,
                                                   cuda::mr::host_accessible,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<async_pinned_resource,
                                                cuda::mr::host_accessible,
                                                cuda::mr::device_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
