/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A CUDA consumer of the rmm-next package. nvcc must compile it as C++20 from the target
// rmm-next::rmm-next alone (the project sets no CMAKE_CUDA_STANDARD). It needs no GPU: without
// one it only reports that it was built.

#include <rmm_next/rmm_next.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdio>

static_assert(__cplusplus >= 202002L, "nvcc compiles this file below C++20");

template <std::integral T>
__global__ void fill(T* data, T value, std::size_t n)
{
  auto const i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) { data[i] = value; }
}

int main()
{
  int devices{};
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    std::puts("rmm-next consumer: OK (CUDA; no usable device, so no kernel ran)");
    return 0;
  }
  std::size_t const n = 1000;
  cudaStream_t stream{};
  RMM_NEXT_CUDA_TRY(cudaStreamCreate(&stream));
  rmm_next::async_device_resource mr;
  auto* data = static_cast<int*>(mr.allocate(stream, n * sizeof(int)));
  fill<<<(n + 255) / 256, 256, 0, stream>>>(data, 42, n);
  int last{};
  RMM_NEXT_CUDA_TRY(cudaMemcpyAsync(&last, data + n - 1, sizeof(int), cudaMemcpyDefault, stream));
  mr.deallocate(stream, data, n * sizeof(int));
  RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream));
  RMM_NEXT_CUDA_TRY(cudaStreamDestroy(stream));
  std::printf(
    "rmm-next consumer: %s (CUDA; a kernel wrote %d)\n", last == 42 ? "OK" : "FAILED", last);
  return last == 42 ? 0 : 1;
}
