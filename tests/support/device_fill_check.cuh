/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What the adaptor GPU tests repeat: a kernel fills a buffer with a pattern, another counts the
// words that do not hold it (on one stream, or on streams the test orders), and the host reads
// the count.

#include "kernels.cuh"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

namespace rmm_next::test {

/** @brief A device counter of mismatched words, read back after a device synchronization. */
class mismatch_counter {
 public:
  mismatch_counter()
  {
    EXPECT_EQ(cudaMalloc(&count_, sizeof(*count_)), cudaSuccess);
    EXPECT_EQ(cudaMemset(count_, 0, sizeof(*count_)), cudaSuccess);
  }
  mismatch_counter(mismatch_counter const&)            = delete;
  mismatch_counter& operator=(mismatch_counter const&) = delete;
  ~mismatch_counter() { (void)cudaFree(count_); }

  [[nodiscard]] unsigned long long* get() const noexcept { return count_; }
  [[nodiscard]] unsigned long long read() const
  {
    unsigned long long host{};
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&host, count_, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  unsigned long long* count_{};
};

/** @brief Fills the `bytes` at `ptr` with the pattern of `seed`, on `stream`. */
inline void fill(void* ptr, std::size_t bytes, std::uint32_t seed, cudaStream_t stream)
{
  std::size_t const n = bytes / sizeof(std::uint32_t);
  fill_kernel<<<grid_for(n), block_size, 0, stream>>>(static_cast<std::uint32_t*>(ptr), n, seed);
}

/** @brief Adds to `*out` the words of the `bytes` at `ptr` that do not hold `seed`'s pattern. */
inline void check(void const* ptr,
                  std::size_t bytes,
                  std::uint32_t seed,
                  cudaStream_t stream,
                  unsigned long long* out)
{
  std::size_t const n = bytes / sizeof(std::uint32_t);
  count_mismatches_kernel<<<grid_for(n), block_size, 0, stream>>>(
    static_cast<std::uint32_t const*>(ptr), n, seed, out);
}

/** @brief Fills `words` words at `ptr` on `stream`, checks them with a kernel: the mismatches. */
inline unsigned long long fill_and_count_mismatches(std::uint32_t* ptr,
                                                    std::size_t words,
                                                    std::uint32_t seed,
                                                    cudaStream_t stream)
{
  unsigned long long* d = nullptr;
  EXPECT_EQ(cudaMallocAsync(&d, sizeof(*d), stream), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(d, 0, sizeof(*d), stream), cudaSuccess);
  fill(ptr, words * sizeof(std::uint32_t), seed, stream);
  check(ptr, words * sizeof(std::uint32_t), seed, stream, d);
  unsigned long long mismatches = ~0ULL;
  EXPECT_EQ(cudaMemcpyAsync(&mismatches, d, sizeof(*d), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(d, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return mismatches;
}

}  // namespace rmm_next::test
