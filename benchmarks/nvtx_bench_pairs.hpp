/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The loop nvtx_bench times, included by both of its translation units (NVTX on and NVTX off) so
// that they run the same code. Internal linkage: each file keeps its own copy.

#include <rmm_next/async_device_resource.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace rmm_next_bench {
namespace {

/** @brief `count` stream-ordered allocate + deallocate pairs of `bytes` on `stream`. */
inline void allocate_free_pairs(rmm_next::async_device_resource& resource,
                                std::size_t bytes,
                                cudaStream_t stream,
                                std::size_t count)
{
  for (std::size_t i = 0; i < count; ++i) {
    void* ptr = resource.allocate(cuda::stream_ref{stream}, bytes, rmm_next::default_alignment);
    benchmark::DoNotOptimize(ptr);
    resource.deallocate(cuda::stream_ref{stream}, ptr, bytes, rmm_next::default_alignment);
  }
}

}  // namespace
}  // namespace rmm_next_bench
