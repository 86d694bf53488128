/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The half of nvtx_bench compiled with RMM_NEXT_DISABLE_NVTX (benchmarks/CMakeLists.txt): the
// same block of allocate + deallocate pairs as nvtx_bench.cpp's (nvtx_bench_pairs.hpp), without
// NVTX. The resource is made in nvtx_bench.cpp; this file only calls its allocate/deallocate,
// which carry another symbol name here (RMM_NEXT_NVTX_ABI), so the two files never share them.

#include "nvtx_bench_pairs.hpp"

#include <rmm_next/async_device_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

#ifndef RMM_NEXT_DISABLE_NVTX
#error "nvtx_bench_off.cpp must be compiled with RMM_NEXT_DISABLE_NVTX"
#endif
static_assert(!rmm_next::detail::nvtx_enabled);

namespace rmm_next_bench {

[[gnu::noinline]] void pairs_nvtx_off(rmm_next::async_device_resource& resource,
                                      std::size_t bytes,
                                      cudaStream_t stream,
                                      std::size_t count)
{
  allocate_free_pairs(resource, bytes, stream, count);
}

}  // namespace rmm_next_bench
