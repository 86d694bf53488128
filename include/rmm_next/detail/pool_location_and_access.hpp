/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/error_macros.hpp>

#include <cuda_runtime_api.h>

#include <span>
#include <string_view>
#include <vector>

/**
 * @file
 * @brief Where a pool lives (its default location for a kind and device) and which devices' kernels
 * may use its memory (queries and grants).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief The location a pool for `target` lives at, unless told otherwise. */
inline cudaMemLocation default_location(pool_target target)
{
  auto const [kind, device] = target;
  cudaMemLocation loc{};
  if (kind != memory_kind::pinned) {
    loc.type = cudaMemLocationTypeDevice;
    loc.id   = device;
    return loc;
  }
#if CUDART_VERSION >= 13000
  loc.type = cudaMemLocationTypeHost;
  loc.id   = 0;
#else
  // Before CUDA 13.0 host pools are made per NUMA node: the node closest to the device.
  int numa = -1;
  if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, device) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  loc.type = cudaMemLocationTypeHostNuma;
  loc.id   = numa < 0 ? 0 : numa;
#endif
  return loc;
}

/** @brief True when kernels on `device` may read and write `pool`'s memory (`cudaMemPoolGetAccess`;
 * a failed query, cleared, says no). */
inline bool has_read_write_access(cudaMemPool_t pool, int device) noexcept
{
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id   = device;
  cudaMemAccessFlags flags{};
  relaxed_capture_mode const relaxed;
  if (cudaMemPoolGetAccess(&flags, pool, &location) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return flags == cudaMemAccessFlagsProtReadWrite;
}

/**
 * @brief Grants kernels on `devices` (ids already checked) read-write access to `pool`
 * (`cudaMemPoolSetAccess`); `what` names the user's call.
 */
inline void grant_device_access(cudaMemPool_t pool,
                                std::span<int const> devices,
                                std::string_view what)
{
  std::vector<cudaMemAccessDesc> descs;
  for (int const d : devices) {
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id   = d;
    desc.flags         = cudaMemAccessFlagsProtReadWrite;
    descs.push_back(desc);
  }
  if (!descs.empty()) {
    relaxed_capture_mode const relaxed;
    RMM_NEXT_CUDA_TRY(cudaMemPoolSetAccess(pool, descs.data(), descs.size()), what);
  }
}

/**
 * @brief Grants kernels on `devices` (null: every visible device) read-write access to a
 * host-located pool, which starts host-only.
 */
inline void grant_device_access(cudaMemPool_t pool, std::vector<int> const* devices)
{
  std::vector<int> ids;
  if (devices != nullptr) {
    for (int const d : *devices) {
      ids.push_back(checked_device(d, resource_name(memory_kind::pinned)));
    }
  } else {
    int const count = device_count(resource_name(memory_kind::pinned));
    for (int d = 0; d < count; ++d) {
      if (device_attribute(cudaDevAttrMemoryPoolsSupported, d) != 0) { ids.push_back(d); }
    }
  }
  grant_device_access(pool, ids, resource_name(memory_kind::pinned));
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
