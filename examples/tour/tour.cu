/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// A tour of rmm-next: allocate from each async resource, let a kernel touch the memory, and
// print what the driver pools report.
#include <rmm_next/rmm_next.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>

namespace {

__global__ void iota(int* data, std::size_t n)
{
  auto const i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) { data[i] = static_cast<int>(i); }
}

void print_statistics(char const* name, rmm_next::pool_statistics const& s)
{
  std::printf("  %-24s reserved %10llu B (high %10llu B), used %10llu B (high %10llu B)\n",
              name,
              static_cast<unsigned long long>(s.reserved_bytes),
              static_cast<unsigned long long>(s.reserved_bytes_high),
              static_cast<unsigned long long>(s.used_bytes),
              static_cast<unsigned long long>(s.used_bytes_high));
}

/// Allocates n ints in stream order, fills them on the device and returns the last value seen.
template <class Resource>
int fill_and_check(char const* name, Resource& resource, cudaStream_t stream, std::size_t n)
{
  // One spelling on every CCCL: a stream-ordered ref to device-accessible memory.
  rmm_next::device_async_resource_ref ref{resource};
  auto* data = static_cast<int*>(ref.allocate(stream, n * sizeof(int), alignof(int)));
  iota<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(data, n);
  int last{};
  RMM_NEXT_CUDA_TRY(cudaMemcpyAsync(&last, data + n - 1, sizeof(int), cudaMemcpyDefault, stream));
  RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream));
  print_statistics(name, resource.statistics());
  ref.deallocate(stream, data, n * sizeof(int), alignof(int));
  return last;
}

/// True when a device is usable; otherwise prints why not, in one line.
bool device_available()
{
  int devices{};
  cudaError_t const status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) { return true; }
  char const* reason =
    status == cudaSuccess ? "no CUDA device is visible" : cudaGetErrorString(status);
  // The runtime calls a missing driver "insufficient" too; its version is 0 then.
  int driver{};
  if (status == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
      driver == 0) {
    reason = "no CUDA driver is installed";
  }
  std::printf("tour: skipped, no usable CUDA device here (%s); it runs on a machine with a GPU\n",
              reason);
  return false;
}

}  // namespace

int main()
{
  if (!device_available()) { return 0; }
  try {
    cudaStream_t stream{};
    RMM_NEXT_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::size_t const n = 1 << 20;

    int device{};
    RMM_NEXT_CUDA_TRY(cudaGetDevice(&device));
    std::printf("rmm-next tour on device %d\n", device);
    rmm_next::async_device_resource device_mr;  // the device's current pool
    int const d = fill_and_check("async_device_resource", device_mr, stream, n);

    rmm_next::async_pinned_resource pinned_mr;  // the host's current pinned pool
    int const p = fill_and_check("async_pinned_resource", pinned_mr, stream, n);

    int m = -1;
    try {
      rmm_next::async_managed_resource managed_mr;  // the device's current managed pool
      m = fill_and_check("async_managed_resource", managed_mr, stream, n);
    } catch (rmm_next::not_supported const& e) {
      std::printf("  async_managed_resource: %s\n", e.what());
      m = static_cast<int>(n - 1);
    }

    // An owned pool, primed with 64 MiB, destroyed with the resource's last copy.
    rmm_next::async_device_resource owned_mr{
      rmm_next::pool_options{.initial_pool_size = std::size_t{64} << 20}};
    int const o = fill_and_check("owned pool (64 MiB primed)", owned_mr, stream, n);

    RMM_NEXT_CUDA_TRY(cudaStreamDestroy(stream));
    int const expected = static_cast<int>(n - 1);
    bool const ok      = d == expected && p == expected && m == expected && o == expected;
    std::printf("kernels wrote and read back %s\n", ok ? "correctly" : "WRONG values");
    return ok ? 0 : 2;
  } catch (std::exception const& e) {
    std::printf("tour: %s\n", e.what());
    return 1;
  }
}
