/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include "plugin_counters.hpp"

#include <rmm_next/detail/pointer_registry.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

/**
 * @file
 * @brief Every allocation the plugin handed out and has not seen freed, whatever function made it:
 * what its free needs (CuPy's free passes only the pointer) and what orders it. A free of a
 * pointer absent from it is refused.
 */

namespace rmm_next::plugin {

/** @brief Which resource of its device served an allocation. */
enum class served_by : unsigned char {
  device_resource,  ///< the per-device resource (the PyTorch, CuPy, Numba and plain functions)
  vmm_resource,     ///< the device's `vmm_resource` (`rmm_next_vmm_alloc`)
};

/** @brief What the plugin knows of one live allocation. */
struct allocation_record {
  std::size_t bytes{};
  cudaStream_t stream{};  ///< where it was allocated: CuPy's free runs there
  int device{};
  source from{source::other};
  served_by by{served_by::device_resource};
  unsigned long long capture{0};    ///< the capture that allocated it (graph memory), or 0
  std::vector<cudaStream_t> users;  ///< streams PyTorch recorded for it (`record_stream`)
};

/** @brief The plugin's live allocations, by pointer. */
using live_allocations = detail::pointer_registry<allocation_record>;

}  // namespace rmm_next::plugin
