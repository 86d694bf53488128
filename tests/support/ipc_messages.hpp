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

/** @brief What the importer does with the allocation, beside importing, using and freeing it. */
enum class ipc_scenario : std::int32_t {
  import_once,  ///< one import
  /// two imports of the allocation, used through both, destroyed in turn: they share one mapping,
  /// which stays usable through the second after the first is gone, and is freed once
  import_twice,
  second_context,  ///< every step with a second context of the device current (cuCtxCreate)
  /// a child forked after the imports, whose import is refused with a typed error, destroys its
  /// copies of the parent's imports and exits cleanly; the parent then uses and frees its own
  forked_child,
  /// the pool and the allocation imported with a second context current, which is destroyed
  /// before the import is used again from the primary context and freed there
  context_destroyed,
};

/** @brief No capture beside the importer's steps (`ipc_request::capture_mode`). */
inline constexpr std::int32_t no_capture = -1;

/** @brief The allocation to import, the pattern it holds and the pattern to write back. */
struct ipc_request {
  rmm_next::pool_pointer_export allocation;
  std::uint64_t words;
  std::uint32_t exporter_seed;  ///< the allocation holds `pattern(i, exporter_seed)`
  std::uint32_t importer_seed;  ///< the importer writes `pattern(i, importer_seed)`
  std::int32_t device;          ///< the device whose kernels use the memory
  /// `no_capture`, or a `cudaStreamCaptureMode`: the importer imports the pool and the
  /// allocation, and frees the import, each while another of its threads captures a graph in that
  /// mode, which must survive.
  std::int32_t capture_mode;
  ipc_scenario scenario;
};

/** @brief Sent once the importer has freed its imported pointer. */
using ipc_reply = importer_reply;

}  // namespace rmm_next::test
