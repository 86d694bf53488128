/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/export.hpp>

#include <cstddef>
#include <functional>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief The shareable handle types a `vmm_resource` asks `cuMemCreate` for (a bit set; the values
 * are the driver's `CUmemAllocationHandleType` bits).
 */
enum class vmm_handle_types : unsigned {
  none     = 0,
  posix_fd = 0x1,  ///< CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: exportable to another process
  fabric   = 0x8,  ///< CU_MEM_HANDLE_TYPE_FABRIC: exportable across nodes (NVLink fabric, IMEX)
};

/** @brief The union of two handle type sets. */
constexpr vmm_handle_types operator|(vmm_handle_types a, vmm_handle_types b) noexcept
{
  return static_cast<vmm_handle_types>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

/** @brief The intersection of two handle type sets. */
constexpr vmm_handle_types operator&(vmm_handle_types a, vmm_handle_types b) noexcept
{
  return static_cast<vmm_handle_types>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

/** @brief True when `set` holds every type of `types` (and `types` is not empty). */
constexpr bool has_handle_types(vmm_handle_types set, vmm_handle_types types) noexcept
{
  return types != vmm_handle_types::none && (set & types) == types;
}

/** @brief Which granularity the segments of a `vmm_resource` are rounded to. */
enum class vmm_granularity {
  minimum,      ///< cuMemGetAllocationGranularity, CU_MEM_ALLOC_GRANULARITY_MINIMUM
  recommended,  ///< cuMemGetAllocationGranularity, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
  multicast,    ///< cuMulticastGetGranularity (recommended), for memory bound to multicast objects
};

/** @brief Which devices may read and write the segments of a `vmm_resource`. */
enum class vmm_access {
  this_device,  ///< only the resource's device (as Megatron maps: peer mappings slow launches)
  all_peers,    ///< the device and every device that can access it (`cuDeviceCanAccessPeer`)
};

/**
 * @brief How a `vmm_resource` makes its segments. Use designated initializers:
 * `vmm_options{.segment_size = 256 << 20, .on_segment_map = register_it}`.
 */
/** @brief A segment of a `vmm_resource`: where it is mapped and how large it is. */
struct vmm_segment {
  void* base{};
  std::size_t bytes{};
};

struct vmm_options {
  /// Requested handle types. FABRIC is dropped when the device lacks it or `cuMemCreate` refuses
  /// it (as `ncclMemAlloc` does); a type asked for alone, or POSIX_FD, must be supported.
  vmm_handle_types handle_types = vmm_handle_types::posix_fd | vmm_handle_types::fabric;
  /// Asks for `gpuDirectRDMACapable` memory where the device supports it (ignored elsewhere).
  bool gpu_direct_rdma        = true;
  vmm_granularity granularity = vmm_granularity::recommended;
  vmm_access access           = vmm_access::all_peers;
  /// Bytes of each segment, rounded up to the granularity; a larger request gets a segment of its
  /// own size rounded up to the granularity. Equal requests give equal segments on every rank.
  std::size_t segment_size = std::size_t{64} << 20;
  /// Called once per segment after it is mapped and accessible, before any block of it is handed
  /// out (outside the resource's lock, but one segment at a time). An exception undoes the segment
  /// and reaches the allocating caller. Must not allocate from the same resource.
  std::function<void(void* base, std::size_t bytes)> on_segment_map{};
  /// Called once per segment before it is unmapped (when the last copy of the resource goes).
  /// Exceptions are swallowed.
  std::function<void(void* base, std::size_t bytes)> on_segment_unmap{};
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
