/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Buffers checked by the device: a kernel counts the elements that do not hold `pattern(i, seed)`
// and the count comes back to the host; a round trip first has a kernel write every byte. Proves
// that memory handed out by a resource or adaptor is usable from the device over its whole size.

#include "kernels.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rmm_next::test {

/**
 * @brief Counts on `stream` the `i < n` with `in[i] != pattern(i, seed)`, and waits for the count.
 * @return The mismatches, or `~0ULL` if a CUDA call failed.
 */
template <class T>
unsigned long long device_mismatches(T const* in,
                                     std::size_t n,
                                     std::uint32_t seed,
                                     cudaStream_t stream)
{
  unsigned long long* count = nullptr;
  unsigned long long host   = ~0ULL;
  if (cudaMallocAsync(&count, sizeof(*count), stream) != cudaSuccess) { return host; }
  if (cudaMemsetAsync(count, 0, sizeof(*count), stream) == cudaSuccess) {
    count_mismatches_kernel<<<grid_for(n), block_size, 0, stream>>>(in, n, seed, count);
    if (cudaMemcpyAsync(&host, count, sizeof(host), cudaMemcpyDeviceToHost, stream) !=
        cudaSuccess) {
      host = ~0ULL;
    }
  }
  (void)cudaFreeAsync(count, stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
    return ~0ULL;
  }
  return host;
}

/**
 * @brief Writes `pattern(i, seed)` to every byte `i` of `[ptr, ptr + bytes)` on `stream`, then
 * counts the bytes that differ (`device_mismatches`).
 */
inline unsigned long long device_round_trip(void* ptr,
                                            std::size_t bytes,
                                            std::uint32_t seed,
                                            cudaStream_t stream)
{
  auto* p = static_cast<unsigned char*>(ptr);
  fill_kernel<<<grid_for(bytes), block_size, 0, stream>>>(p, bytes, seed);
  return device_mismatches(static_cast<unsigned char const*>(p), bytes, seed, stream);
}

}  // namespace rmm_next::test
