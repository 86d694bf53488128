/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/allocators.md. Each block between "// [name]" and "// [name end]" is
// quoted there verbatim (tests/docs/check_snippets.py checks it), and this program runs them all
// on a GPU (exit 77 without one). It launches kernels and uses thrust::device_vector, so it is
// compiled as CUDA (examples/CMakeLists.txt sets LANGUAGE CUDA on it).
#ifndef __CUDACC__
#error "examples/snippets/allocators.cpp launches kernels: compile it as CUDA (nvcc -x cu)"
#endif

#include "gpu_check.hpp"

#include <rmm_next/allocator.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>
#include <rmm_next/polymorphic_allocator.hpp>
#include <rmm_next/thrust_allocator.hpp>

#include <cuda_runtime_api.h>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>

#include <cstddef>
#include <cstdio>
#include <new>
#include <vector>

namespace {

__global__ void scale(float* data, std::size_t n, float factor)
{
  std::size_t const i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) { data[i] *= factor; }
}

unsigned int blocks_for(std::size_t n) { return static_cast<unsigned int>((n + 255) / 256); }

bool check(bool ok, char const* what)
{
  if (!ok) { std::printf("FAILED: %s\n", what); }
  return ok;
}

bool pinned_vector(cudaStream_t stream)
{
  std::size_t const n = 1 << 20;
  // [pinned-vector]
  rmm_next::async_pinned_resource pinned;  // the host's current pinned pool
  using pinned_allocator = rmm_next::allocator<float, rmm_next::async_pinned_resource>;

  // Pinned host memory that kernels on every device may read and write.
  std::vector<float, pinned_allocator> data(n, 1.5F, pinned);
  scale<<<blocks_for(n), 256, 0, stream>>>(data.data(), data.size(), 2.0F);
  cudaStreamSynchronize(stream);           // before the host reads it (or the vector frees it)
  std::printf("data[0] = %g\n", data[0]);  // 3
  // [pinned-vector end]
  return check(data[0] == 3.0F && data[n - 1] == 3.0F, "pinned vector");
}

bool managed_vector(cudaStream_t stream)
{
  std::size_t const n = 1 << 20;
  // [managed-vector]
  rmm_next::async_managed_resource managed;  // the current device's current managed pool
  std::vector<float, rmm_next::allocator<float, rmm_next::async_managed_resource>> data(
    n, 1.0F, managed);
  scale<<<blocks_for(n), 256, 0, stream>>>(data.data(), data.size(), 4.0F);
  cudaStreamSynchronize(stream);
  // [managed-vector end]
  return check(data[0] == 4.0F && data[n - 1] == 4.0F, "managed vector");
}

// [polymorphic]
// One vector type for any host- and device-accessible memory: the resource is chosen at run
// time and does not appear in the type.
using host_device_vector = std::vector<float, rmm_next::host_device_polymorphic_allocator<float>>;

void scale_on_device(host_device_vector& data, float factor, cudaStream_t stream)
{
  scale<<<blocks_for(data.size()), 256, 0, stream>>>(data.data(), data.size(), factor);
  cudaStreamSynchronize(stream);
}
// [polymorphic end]

bool polymorphic(cudaStream_t stream)
{
  // [polymorphic-use]
  rmm_next::async_pinned_resource pinned;
  rmm_next::async_managed_resource managed;
  // The allocators refer to the resources (they do not own them): keep the resources alive.
  host_device_vector staging(1000, 1.0F, pinned);
  host_device_vector results(1000, 1.0F, managed);
  scale_on_device(staging, 3.0F, stream);
  scale_on_device(results, 5.0F, stream);
  // [polymorphic-use end]
  return check(staging[999] == 3.0F && results[999] == 5.0F &&
                 !(staging.get_allocator() == results.get_allocator()),
               "polymorphic allocator");
}

bool overflow()
{
  rmm_next::async_pinned_resource pinned;
  rmm_next::allocator<double, rmm_next::async_pinned_resource> alloc{pinned};
  // [overflow]
  try {
    [[maybe_unused]] double* p = alloc.allocate(std::size_t{1} << 62);  // 2^65 bytes
  } catch (std::bad_array_new_length const&) {
    std::printf("n * sizeof(T) overflows: std::bad_array_new_length\n");
  }
  // [overflow end]
  return true;
}

bool thrust_vector(cudaStream_t stream)
{
  // [thrust]
  rmm_next::async_device_resource mr;
  rmm_next::thrust_allocator<int> alloc{stream, mr};  // allocates and frees on `stream`
  thrust::device_vector<int, rmm_next::thrust_allocator<int>> v(1'000'000, alloc);

  auto const on_stream = thrust::cuda::par.on(stream);
  thrust::sequence(on_stream, v.begin(), v.end());
  long long const sum = thrust::reduce(on_stream, v.begin(), v.end(), 0LL);
  std::printf("sum = %lld\n", sum);  // 499999500000
  // v's memory goes back to mr's pool, in the order of `stream`, when v is destroyed.
  // [thrust end]
  return check(sum == 499999500000LL && v.get_allocator().stream() == cuda::stream_ref{stream},
               "thrust_allocator");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  RMM_NEXT_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bool ok = pinned_vector(stream);
  ok      = managed_vector(stream) && ok;
  ok      = polymorphic(stream) && ok;
  ok      = overflow() && ok;
  ok      = thrust_vector(stream) && ok;
  RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream));
  RMM_NEXT_CUDA_TRY(cudaStreamDestroy(stream));
  if (!ok) { return 1; }
  std::printf("snippets: all ran\n");
  return 0;
}
