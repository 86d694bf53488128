/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// One step the adaptor GPU tests repeat: a kernel fills a buffer with a pattern, another counts
// the words that do not hold it, on one stream, and the host reads the count.

#include "kernels.cuh"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

namespace rmm_next::test {

/** @brief Fills `words` words at `ptr` on `stream`, checks them with a kernel: the mismatches. */
inline unsigned long long fill_and_count_mismatches(std::uint32_t* ptr,
                                                    std::size_t words,
                                                    std::uint32_t seed,
                                                    cudaStream_t stream)
{
  unsigned long long* d = nullptr;
  EXPECT_EQ(cudaMallocAsync(&d, sizeof(*d), stream), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0, sizeof(*d), stream), cudaSuccess);
  fill_kernel<<<grid_for(words), block_size, 0, stream>>>(ptr, words, seed);
  count_mismatches_kernel<<<grid_for(words), block_size, 0, stream>>>(ptr, words, seed, d);
  unsigned long long mismatches = ~0ULL;
  EXPECT_EQ(cudaMemcpyAsync(&mismatches, d, sizeof(*d), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(d, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return mismatches;
}

}  // namespace rmm_next::test
