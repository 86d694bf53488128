/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_support.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

/**
 * @file
 * @brief Which device a resource works for: the one named or the current one, or for a viewed pool
 * the device the pool belongs to; validated and checked for support.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/** @brief The device the resource works for: `device`, or the current one; validated. */
inline int resolve_device(memory_kind kind, std::optional<int> device)
{
  int const id = device_or_current(device, resource_name(kind));
  check_support(kind, id);
  return id;
}

/**
 * @brief The device a resource viewing the caller's `pool` works for. A device pool belongs to
 * the device whose kernels use it without a grant: it is found among the devices with read-write
 * access (`cudaMemPoolGetAccess`), not taken from whichever device is current. A device the
 * caller names must have that access; when several devices have it (peer access granted), the
 * caller must name one. Other kinds of pool: as `resolve_device`.
 */
inline int resolve_view_device(memory_kind kind, cudaMemPool_t pool, std::optional<int> device)
{
  if (kind != memory_kind::device || pool == nullptr) { return resolve_device(kind, device); }
  int const count = device_count(resource_name(kind));
  if (device) { checked_device(*device, count, resource_name(kind)); }
  std::vector<int> users;
  std::string listed;
  for (int d = 0; d < count; ++d) {
    if (has_read_write_access(pool, d)) {
      listed += (users.empty() ? "" : ", ") + std::to_string(d);
      users.push_back(d);
    }
  }
  if (device && std::find(users.begin(), users.end(), *device) == users.end()) {
    throw_error<logic_error>(resource_name(kind),
                             "the viewed pool is not accessible from device " +
                               std::to_string(*device) + "; name the device the pool belongs to");
  }
  if (!device && users.size() > 1) {
    throw_error<logic_error>(
      resource_name(kind),
      "the viewed pool is accessible from devices " + listed +
        ", so its own device cannot be told; name it: " + resource_name(kind) + "{pool, device}");
  }
  int const id = device          ? *device
                 : users.empty() ? current_device(resource_name(kind))
                                 : users.front();
  check_support(kind, id);
  return id;
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
