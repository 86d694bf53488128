/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Statistics of a driver pool, read from its attributes (`statistics()` of the async
 * resources).
 *
 * The last five members are the attributes CUDA 13.3 added to pools
 * (`cudaMemPoolAttrAllocationType` to `cudaMemPoolAttrHwDecompressEnabled`, which CCCL 3.5 reads
 * too). They are read where the runtime has them: in a program compiled against CUDA 13.3 or later,
 * from a driver that answers them; elsewhere they are empty (an older driver's refusal is cleared,
 * never left sticky).
 */
struct pool_statistics {
  std::uint64_t reserved_bytes;       ///< memory the pool holds from the OS/driver now
  std::uint64_t reserved_bytes_high;  ///< high watermark of `reserved_bytes`
  std::uint64_t used_bytes;           ///< memory handed out to allocations now
  std::uint64_t used_bytes_high;      ///< high watermark of `used_bytes`
  std::uint64_t release_threshold;    ///< bytes kept across synchronizations

  /// What the pool allocates: pinned (device or host) or managed memory.
  std::optional<cudaMemAllocationType> allocation_type{};
  /// The handle types the pool's memory can be exported as, OR'ed (none for an imported pool).
  std::optional<allocation_handle_type> export_handle_types{};
  /// Where the pool's memory lives; `cudaMemLocationTypeInvisible` (id `cudaInvalidDeviceId`) for
  /// a pool imported from a device this process cannot see.
  std::optional<cudaMemLocation> location{};
  /// The bound on the pool's reserved memory, in bytes (possibly rounded up); 0: none.
  std::optional<std::uint64_t> maximum_pool_size{};
  /// Whether the pool was created for hardware decompression.
  std::optional<bool> hardware_decompress{};
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
