/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What ipc_gpu_test and its importer process say to each other over their socket, after the pool
// handle (rmm_next::send_pool_handle): one request, one reply.

#include "importer_main.hpp"

#include <rmm_next/ipc.hpp>

#include <cstdint>

namespace rmm_next::test {

/** @brief The allocation to import, the pattern it holds and the pattern to write back. */
struct ipc_request {
  rmm_next::pool_pointer_export allocation;
  std::uint64_t words;
  std::uint32_t exporter_seed;  ///< the allocation holds `pattern(i, exporter_seed)`
  std::uint32_t importer_seed;  ///< the importer writes `pattern(i, importer_seed)`
  std::int32_t device;          ///< the device whose kernels use the memory
  /// 1: the importer imports the pool and the allocation, and frees the import, each while
  /// another of its threads captures a graph in global mode, which must survive.
  std::int32_t beside_a_capture;
};

/** @brief Sent once the importer has freed its imported pointer. */
using ipc_reply = importer_reply;

}  // namespace rmm_next::test
