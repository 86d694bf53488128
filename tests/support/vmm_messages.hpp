/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What vmm_resource_gpu_test and its importer process say to each other over their socket: one
// request, sent with the segment's POSIX file descriptor, and one reply.

#include "importer_main.hpp"

#include <cstdint>

namespace rmm_next::test {

/** @brief The segment to import (its descriptor travels with this), and the block inside it. */
struct vmm_request {
  std::uint64_t segment_bytes;  ///< the size the segment was made with: the import maps it all
  std::uint64_t granularity;    ///< the alignment of the address range the importer reserves
  std::uint64_t offset;         ///< where the block starts in the segment
  std::uint64_t words;          ///< 32-bit words of the block
  std::uint32_t exporter_seed;  ///< the block holds `pattern(i, exporter_seed)`
  std::uint32_t importer_seed;  ///< the importer writes `pattern(i, importer_seed)`
  std::int32_t device;          ///< the device whose kernels use the memory
};

/** @brief Sent once the importer has unmapped and released its import. */
using vmm_reply = importer_reply;

}  // namespace rmm_next::test
