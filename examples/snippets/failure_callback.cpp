/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in the failure_callback_adaptor section of the docs. Each block between
// "// [name]" and "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks
// it), and this program runs them all on a GPU (exit 77 without one) and checks what the docs
// state.
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/failure_callback_adaptor.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <deque>
#include <vector>

namespace {

using rmm_next_test::expect;

void spill(cudaStream_t stream)
{
  // [spill]
  constexpr std::size_t block = std::size_t{8} << 20;
  // A pool that may hold 64 MiB, and what the application can move to the host when it is full.
  rmm_next::async_device_resource pool{rmm_next::pool_options{.maximum_pool_size = 8 * block}};
  std::deque<void*> on_device;  // oldest first
  std::vector<std::vector<std::byte>> on_host;

  using spilling_resource = rmm_next::failure_callback_adaptor<rmm_next::async_device_resource>;
  spilling_resource* self = nullptr;
  spilling_resource mr{pool, [&](std::size_t, cuda::stream_ref s, std::size_t attempt) {
                         if (on_device.empty()) { return false; }  // out_of_memory goes on
                         std::vector<std::byte> copy(block);
                         (void)cudaMemcpyAsync(
                           copy.data(), on_device.front(), block, cudaMemcpyDeviceToHost, s.get());
                         self->deallocate(s, on_device.front(), block);  // no lock is held
                         (void)cudaStreamSynchronize(s.get());
                         on_host.push_back(std::move(copy));
                         on_device.pop_front();
                         return attempt < 4;  // retry, but not for ever
                       }};
  self = &mr;

  for (int i = 0; i < 16; ++i) {  // 128 MiB through a pool of 64 MiB
    on_device.push_back(mr.allocate(stream, block));
  }
  // [spill end]
  std::printf(
    "spill: %zu blocks on the device, %zu spilled to the host\n", on_device.size(), on_host.size());
  expect(on_device.size() + on_host.size() == 16, "spill: every block is somewhere");
  expect(on_host.size() >= 8, "spill: at least the overflow was spilled");
  while (!on_device.empty()) {  // emptied, so that the callback below has nothing to spill
    mr.deallocate(stream, on_device.front(), block);
    on_device.pop_front();
  }
  bool refused = false;
  try {
    (void)mr.allocate(stream, 16 * block);
  } catch (rmm_next::out_of_memory const&) {
    refused = true;
  }
  expect(refused, "spill: more than the pool can ever hold throws out_of_memory");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::printf("cudaStreamCreate failed\n");
    return 1;
  }
  spill(stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess) {
    std::printf("stream teardown failed\n");
    return 1;
  }
  if (rmm_next_test::failures() != 0) { return 1; }
  std::printf("snippets: all ran\n");
  return 0;
}
