/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// Small kernels the GPU tests use to prove that memory is usable from the device: fill a buffer
// with a pattern, count the words that do not hold it, transform one buffer into another, and
// spin for a bounded time or keep writing for one. Templates, so that a test that does not use one
// gets no warning and including the header from several files breaks no one-definition rule.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace rmm_next::test {

/** @brief The word a buffer filled with `seed` holds at index `i`. */
__host__ __device__ constexpr std::uint32_t pattern(std::size_t i, std::uint32_t seed) noexcept
{
  return static_cast<std::uint32_t>(i) * 2654435761U + seed;
}

/** @brief Writes `pattern(i, seed)` to `out[i]` for every `i < n` (grid-stride). */
template <class T>
__global__ void fill_kernel(T* out, std::size_t n, std::uint32_t seed)
{
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = static_cast<T>(pattern(i, seed));
  }
}

/** @brief Adds to `*mismatches` the number of `i < n` with `in[i] != pattern(i, seed)`. */
template <class T>
__global__ void count_mismatches_kernel(T const* in,
                                        std::size_t n,
                                        std::uint32_t seed,
                                        unsigned long long* mismatches)
{
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (in[i] != static_cast<T>(pattern(i, seed))) { ++local; }
  }
  if (local != 0) { atomicAdd(mismatches, local); }
}

/** @brief `out[i] = 3 * in[i] + 1` for every `i < n`. */
template <class T>
__global__ void transform_kernel(T const* in, T* out, std::size_t n)
{
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = static_cast<T>(3 * in[i] + 1);
  }
}

/** @brief Nanoseconds of the GPU's global timer. */
__device__ inline unsigned long long global_timer_ns()
{
  unsigned long long t{};
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/**
 * @brief One thread sets `*started` to 1, then spins for `duration_ns` of the global timer.
 *
 * Bounded twice: also stops after `4 * duration_ns` SM clock cycles (at least one second of
 * spinning at any clock up to 4 GHz, at most 4 s per second asked at 1 GHz), so a stuck or
 * coarse timer cannot hang the test.
 */
template <class Flag>
__global__ void spin_kernel(unsigned long long duration_ns, Flag* started)
{
  if (threadIdx.x != 0 || blockIdx.x != 0) { return; }
  *static_cast<Flag volatile*>(started) = 1;
  __threadfence_system();
  unsigned long long const t0 = global_timer_ns();
  long long const c0          = clock64();
  auto const max_cycles       = static_cast<long long>(duration_ns) * 4;
  while (global_timer_ns() - t0 < duration_ns && clock64() - c0 < max_cycles) {}
}

/**
 * @brief Writes `value` to every element of `out` again and again for `duration_ns` (one block:
 * launch with `<<<1, 256>>>`), bounded by SM clock cycles as `spin_kernel` is. A kernel that still
 * writes a block after its free, for tests that a later user of the block waits for it.
 */
template <class T>
__global__ void keep_writing_kernel(T* out, std::size_t n, T value, unsigned long long duration_ns)
{
  unsigned long long const t0 = global_timer_ns();
  long long const c0          = clock64();
  do {
    for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
      static_cast<T volatile*>(out)[i] = value;
    }
  } while (global_timer_ns() - t0 < duration_ns &&
           clock64() - c0 < static_cast<long long>(duration_ns) * 4);
}

/** @brief Blocks for a grid-stride launch over `n` elements (at least 1, at most 4096). */
inline unsigned int grid_for(std::size_t n) noexcept
{
  std::size_t const blocks = (n + 255) / 256;
  return static_cast<unsigned int>(blocks == 0 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

/** @brief Threads per block of the grid-stride launches. */
inline constexpr unsigned int block_size = 256;

/**
 * @brief The number of `i < n` with `in[i] != pattern(i, seed)`, counted by a kernel on `stream`
 * and waited for; ~0 when a CUDA call fails.
 */
template <class T>
unsigned long long count_mismatches(T const* in,
                                    std::size_t n,
                                    std::uint32_t seed,
                                    cudaStream_t stream)
{
  unsigned long long* d = nullptr;
  if (cudaMallocAsync(&d, sizeof(*d), stream) != cudaSuccess) { return ~0ULL; }
  unsigned long long result = ~0ULL;
  bool ok                   = cudaMemsetAsync(d, 0, sizeof(*d), stream) == cudaSuccess;
  if (ok) {
    count_mismatches_kernel<<<grid_for(n), block_size, 0, stream>>>(in, n, seed, d);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpyAsync(&result, d, sizeof(*d), cudaMemcpyDeviceToHost, stream) == cudaSuccess;
  }
  ok = cudaFreeAsync(d, stream) == cudaSuccess && ok;
  ok = cudaStreamSynchronize(stream) == cudaSuccess && ok;
  return ok ? result : ~0ULL;
}

}  // namespace rmm_next::test
