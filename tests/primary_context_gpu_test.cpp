/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The caches' own stream lives in the device's primary context, which they retain while they
// live: a thread_cache_adaptor and a segment_cache_adaptor made before any other CUDA call of the
// process, over an upstream that never touched the device (host memory posing as device memory),
// keep the primary context active, allocate and free through their refs, and are destroyed
// without a crash; the context is released with them. Its own program: the runtime of a
// GoogleTest GPU program has made the primary context before any test runs.
// Exit 0: passed; 1: failed; 77: no usable device (1 with RMM_NEXT_REQUIRE_GPU=1).

#include "support/fake_resource.hpp"

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int failures = 0;

void expect(bool ok, char const* what)
{
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) { ++failures; }
}

/** @brief Whether device 0's primary context is active; -1 when the driver cannot say. */
int primary_active()
{
  auto const& api = rmm_next::detail::driver();
  CUdevice device{};
  unsigned int flags{};
  int active{};
  if (api.device_get == nullptr || api.primary_ctx_get_state == nullptr ||
      api.device_get(&device, 0) != CUDA_SUCCESS ||
      api.primary_ctx_get_state(device, &flags, &active) != CUDA_SUCCESS) {
    return -1;
  }
  return active;
}

template <class Ref>
bool pairs_through(Ref ref, rmm_next::test::fake_resource const& upstream)
{
  bool ok = true;
  for (int i = 0; i < 4; ++i) {
    ok = ok && rmm_next::test::allocates_from(ref, upstream);
  }
  return ok;
}

}  // namespace

int main()
{
  int count{};
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no usable CUDA device\n");
    char const* require = std::getenv("RMM_NEXT_REQUIRE_GPU");
    return require != nullptr && std::strcmp(require, "1") == 0 ? 1 : 77;
  }
  int const before = primary_active();
  std::printf("primary context of device 0 active before the caches: %d\n", before);
  {
    rmm_next::test::fake_resource upstream;
    rmm_next::thread_cache_adaptor<rmm_next::host_device_async_resource_ref> thread_cache{
      rmm_next::host_device_async_resource_ref{upstream}};
    expect(primary_active() == 1, "a thread cache keeps the primary context of its device active");
    rmm_next::segment_cache_adaptor<rmm_next::host_device_async_resource_ref> segment_cache{
      rmm_next::host_device_async_resource_ref{upstream}};
    expect(primary_active() == 1, "so does a segment cache");
    expect(pairs_through(rmm_next::host_device_async_resource_ref{thread_cache}, upstream),
           "the thread cache's ref allocates and frees through the upstream");
    expect(pairs_through(rmm_next::device_async_resource_ref{segment_cache}, upstream),
           "the segment cache's ref allocates and frees through the upstream");
  }
  std::printf("destroyed both caches\n");
  if (before == 0) {
    expect(primary_active() == 0, "the primary context is released with the caches");
  }
  return failures == 0 ? 0 : 1;
}
