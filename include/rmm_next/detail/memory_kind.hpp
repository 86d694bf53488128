/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdio>

/**
 * @file
 * @brief The kind of memory a pool hands out, the one thing that sets the three async resources
 * apart, and what follows from it: the resource's name, the allocation type, the name tools see;
 * with the device, what a pool serves (`pool_target`).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief What a pool hands out: the one thing that sets the three async resources apart. */
enum class memory_kind { device, managed, pinned };

/**
 * @brief What a pool serves: a kind of memory for one device (for pinned memory, the device whose
 * stream and context the resource uses). Travels as one value from the device's resolution to the
 * pool's state, which keeps it.
 */
struct pool_target {
  memory_kind kind;
  int device;
};

/** @brief The public class name of the resource of `kind`, for messages. */
constexpr char const* resource_name(memory_kind kind) noexcept
{
  switch (kind) {
    case memory_kind::device: return "async_device_resource";
    case memory_kind::managed: return "async_managed_resource";
    default: return "async_pinned_resource";
  }
}

/** @brief The allocation type of pools of `kind` (managed before CUDA 13.0: none, pinned). */
#if CUDART_VERSION >= 13000
inline cudaMemAllocationType allocation_type(memory_kind kind) noexcept
{
  return kind == memory_kind::managed ? cudaMemAllocationTypeManaged : cudaMemAllocationTypePinned;
}
#else
inline cudaMemAllocationType allocation_type(memory_kind) noexcept
{
  return cudaMemAllocationTypePinned;
}
#endif

/**
 * @brief What tools call the allocations of a resource (see `nvtx_name_region`): its class, device
 * and pool, "async_device_resource dev 0 pool 0x7f3a2c000b40", or without the pool where that
 * would exceed the 49 printable ASCII characters compute-sanitizer accepts.
 */
inline std::array<char, 50> allocation_name(pool_target target, cudaMemPool_t pool)
{
  auto const [kind, device] = target;
  std::array<char, 50> name{};
  int const n = std::snprintf(name.data(),
                              name.size(),
                              "%s dev %d pool %p",
                              resource_name(kind),
                              device,
                              static_cast<void*>(pool));
  if (n < 0 || static_cast<std::size_t>(n) >= name.size()) {
    std::snprintf(name.data(), name.size(), "%s dev %d", resource_name(kind), device);
  }
  return name;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
