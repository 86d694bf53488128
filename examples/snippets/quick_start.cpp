/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in README.md: what a user writes first. The block between "// [name]" and
// "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks it), and this
// program runs it on a GPU (exit 77 without one). Plain C++: no nvcc needed.
#include "gpu_check.hpp"

// [quick-start]
#include <rmm_next/rmm_next.hpp>

#include <vector>

void first_steps(cudaStream_t stream)
{
  // A resource: the device's current pool, shared with every cudaMallocAsync user.
  rmm_next::async_device_resource mr;

  // Stream-ordered: usable by work on `stream`, back in the pool once `stream` gets there.
  void* buffer = mr.allocate(stream, 1 << 20);
  mr.deallocate(stream, buffer, 1 << 20);

  // A library's own resource per device, made on first use, instead of global state.
  static rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref> memory{
    [](int device) { return rmm_next::async_device_resource{device}; }};
  void* scratch = memory.get_current().allocate(stream, 4096, rmm_next::default_alignment);
  memory.get_current().deallocate(stream, scratch, 4096, rmm_next::default_alignment);

  // A std::vector in pinned host memory, which kernels can read and write too.
  rmm_next::async_pinned_resource pinned;
  std::vector<float, rmm_next::allocator<float, rmm_next::async_pinned_resource>> v(1000, pinned);
}
// [quick-start end]

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreate(&stream) != cudaSuccess) { return 1; }
  first_steps(stream);
  first_steps(stream);  // the map's resource is made once
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess) {
    return 1;
  }
  std::printf("quick start snippet ran\n");
  return 0;
}
