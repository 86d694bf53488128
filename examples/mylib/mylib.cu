/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// mylib's implementation: its resource contexts and a histogram that allocates each buffer from
// the kind of memory it is.
#include "mylib.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error_macros.hpp>
#include <rmm_next/resource_context.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>

namespace mylib {

// Defined here, not inline in the header: one instance per library binary, made on first use,
// destroyed at exit.
context& resources()
{
  static context instance{
    // allocation_kind::temporaries: the device's current pool, shared with cudaMallocAsync users.
    [](int device) { return rmm_next::async_device_resource{rmm_next::current_pool{}, device}; },
    // allocation_kind::results: what the application chose for the whole process.
    rmm_next::use_process_wide_resource{}};
  return instance;
}

host_context& host_resources()
{
  static host_context instance{
    // host_allocation_kind::pinned_staging: the host's current pinned pool, which kernels on
    // every device may read.
    [](int device) { return rmm_next::async_pinned_resource{rmm_next::current_pool{}, device}; }};
  return instance;
}

namespace {

__global__ void histogram_kernel(
  float const* values, std::size_t n, unsigned int* counts, int bins, float lo, float hi)
{
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float const v = values[i];
    if (v >= lo && v < hi) {
      int const bin = static_cast<int>((v - lo) / (hi - lo) * static_cast<float>(bins));
      atomicAdd(&counts[bin < bins ? bin : bins - 1], 1U);  // rounding may reach `bins`
    }
  }
}

}  // namespace

buffer<unsigned int> histogram(
  std::span<float const> values, int bins, float lo, float hi, cuda::stream_ref stream)
{
  if (bins <= 0 || !(lo < hi)) {
    throw std::invalid_argument{"mylib::histogram: needs bins > 0 and lo < hi"};
  }
  // Each kind's ref for the current device: the application's choice, else mylib's default.
  auto staging_memory = host_resources().get(host_allocation_kind::pinned_staging);
  auto scratch_memory = resources().get(allocation_kind::temporaries);

  buffer<unsigned int> counts{
    resources().get(allocation_kind::results), static_cast<std::size_t>(bins), stream};
  RMM_NEXT_CUDA_TRY(
    cudaMemsetAsync(counts.data(), 0, counts.size() * sizeof(unsigned int), stream.get()));
  if (values.empty()) { return counts; }

  std::size_t const bytes = values.size_bytes();
  // The host fills the staging buffer at once (allocate_sync); it is freed in stream order after
  // the copy that reads it.
  auto free_staging = [&](float* p) {
    staging_memory.deallocate(stream, p, bytes, alignof(float));
  };
  std::unique_ptr<float, decltype(free_staging)> staging{
    static_cast<float*>(staging_memory.allocate_sync(bytes, alignof(float))), free_staging};
  std::copy(values.begin(), values.end(), staging.get());

  buffer<float> scratch{scratch_memory, values.size(), stream};
  RMM_NEXT_CUDA_TRY(
    cudaMemcpyAsync(scratch.data(), staging.get(), bytes, cudaMemcpyHostToDevice, stream.get()));
  std::size_t const blocks = std::min<std::size_t>((values.size() + 255) / 256, 4096);
  histogram_kernel<<<static_cast<unsigned int>(blocks), 256, 0, stream.get()>>>(
    scratch.data(), values.size(), counts.data(), bins, lo, hi);
  RMM_NEXT_CUDA_TRY(cudaGetLastError());
  return counts;  // scratch and staging are freed in stream order, after the kernel and the copy
}

}  // namespace mylib
