/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so on a GPU when the calling thread's current context is a second context
// of device 0 (cuCtxCreate), as a library that manages its own contexts leaves it. A program of
// its own, so that the plugin's state, device 0's resource and the segments' stream are all made
// while the second context is current, as in a process whose first allocation comes from there;
// and device 0's vmm_resource too, in the second test.

#include "support/plugin_outstanding.hpp"
#include "support/second_context.hpp"

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/per_device_resource.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

using rmm_next::detail::current_context_or_null;
using rmm_next::test::outstanding;

rmm_next_statistics statistics()
{
  rmm_next_statistics s{};
  EXPECT_EQ(rmm_next_get_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

// Under the second context: a segment and a block come from device 0's pool, are usable there,
// and are counted and traced on device 0; the caller's context stays current. After the second
// context is destroyed, the plugin's own streams (made under it) still work: they belong to the
// primary context.
TEST(SecondContext, AllocatesFromTheDevicesPoolTracesOnTheDeviceAndOutlivesTheContext)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the primary context exists
  CUcontext const primary    = current_context_or_null();
  constexpr std::size_t size = std::size_t{2} << 20;
  {
    std::optional<rmm_next::test::second_context> ctx2{std::in_place};
    ctx2->make_current();
    ASSERT_EQ(rmm_next_set_tracking(1, 0), 0) << rmm_next_last_error();  // the plugin's first call
    void* const segment = rmm_next_torch_segment_alloc(size, -1, nullptr);
    void* const block   = rmm_next_torch_alloc(1000, -1, nullptr);  // the second context's stream 0
    ASSERT_NE(segment, nullptr) << rmm_next_last_error();
    ASSERT_NE(block, nullptr) << rmm_next_last_error();
    EXPECT_EQ(current_context_or_null(), ctx2->get());
    EXPECT_EQ(cudaMemsetAsync(segment, 1, size, nullptr), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(block, 2, 1000, nullptr), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, segment), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attributes.device, 0);

    std::vector<rmm_next_allocation> const live = outstanding(-1);
    ASSERT_EQ(live.size(), 2U);
    for (rmm_next_allocation const& a : live) {
      EXPECT_EQ(a.device, 0);
    }
    EXPECT_EQ(live[0].ptr, segment);
    EXPECT_EQ(live[0].size, size);
    EXPECT_EQ(live[1].ptr, block);
    rmm_next_statistics const s = statistics();
    EXPECT_EQ(s.allocated_bytes, size + 1000);
    EXPECT_EQ(s.torch_allocations, 2U);
    EXPECT_GE(s.pool_used_bytes, size + 1000);  // device 0's pool

    rmm_next_torch_free(block, 1000, -1, nullptr);
    rmm_next_torch_free(segment, static_cast<ssize_t>(size), 0, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(outstanding(-1).empty());
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
    ctx2.reset();  // cuCtxDestroy
  }
  EXPECT_EQ(current_context_or_null(), primary);
  void* const again = rmm_next_torch_segment_alloc(size, 0, nullptr);  // the segments' stream
  EXPECT_NE(again, nullptr) << rmm_next_last_error();
  if (again != nullptr) {
    EXPECT_EQ(cudaMemset(again, 3, size), cudaSuccess);
    rmm_next_torch_free(again, static_cast<ssize_t>(size), 0, nullptr);
  }
  rmm_next::device_async_resource_ref mr = rmm_next::get_per_device_resource_ref(0);
  void* const q = mr.allocate_sync(4096, 256);  // on the resource's own stream
  EXPECT_NE(q, nullptr);
  mr.deallocate_sync(q, 4096, 256);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(statistics().allocated_bytes, 0U);
  EXPECT_EQ(rmm_next_set_tracking(0, 0), 0);
}

// The segment cache as device 0's resource, called from a second context (the plugin leaves the
// thread's capture mode alone in front of the cache): a block freed on that context's legacy
// stream is served to it again; after the context is destroyed the primary context's calls go
// on, and releasing the unused memory leaves nothing live and no error.
TEST(SecondContext, WithTheSegmentCacheItsBlocksComeBackAndTheCacheOutlivesTheContext)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  CUcontext const primary = current_context_or_null();
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  std::uint64_t const live_before = statistics().allocated_bytes;
  constexpr std::size_t bytes     = std::size_t{1} << 16;
  {
    rmm_next::test::second_context const ctx2;
    ctx2.make_current();
    void* const first = rmm_next_torch_alloc(bytes, 0, nullptr);
    ASSERT_NE(first, nullptr) << rmm_next_last_error();
    EXPECT_EQ(cudaMemsetAsync(first, 1, bytes, nullptr), cudaSuccess);
    rmm_next_torch_free(first, bytes, 0, nullptr);
    void* const again = rmm_next_torch_alloc(bytes, 0, nullptr);
    EXPECT_EQ(again, first) << "a block freed on the context's legacy stream is served to it";
    rmm_next_torch_free(again, bytes, 0, nullptr);
    EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
    EXPECT_EQ(current_context_or_null(), ctx2.get());
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  }  // cuCtxDestroy
  void* const p = rmm_next_torch_alloc(bytes, 0, nullptr);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemset(p, 2, bytes), cudaSuccess);
  rmm_next_torch_free(p, bytes, 0, nullptr);
  EXPECT_EQ(rmm_next_release_unused(0), 0) << rmm_next_last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(statistics().allocated_bytes, live_before);
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

// Device 0's vmm_resource, made while a second context is current (its first rmm_next_vmm_alloc):
// blocks written and freed on that context's streams (one of its own and its legacy default
// stream) are fenced by events of the primary context, so once the second context is destroyed
// they are handed out again, on the primary context, after the work queued before their frees.
TEST(SecondContext, VmmBlocksFreedOnItsStreamsComeBackAfterItIsDestroyed)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  CUcontext const primary     = current_context_or_null();
  constexpr std::size_t bytes = std::size_t{4} << 20;
  void* on_stream             = nullptr;
  void* on_legacy             = nullptr;
  {
    rmm_next::test::second_context const ctx2;
    ctx2.make_current();
    cudaStream_t stream{};
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    on_stream = rmm_next_vmm_alloc(bytes, 0, stream);  // the resource is made here
    on_legacy = rmm_next_vmm_alloc(bytes, -1, nullptr);
    ASSERT_NE(on_stream, nullptr) << rmm_next_last_error();
    ASSERT_NE(on_legacy, nullptr) << rmm_next_last_error();
    EXPECT_EQ(current_context_or_null(), ctx2.get());
    EXPECT_EQ(cudaMemsetAsync(on_stream, 0x11, bytes, stream), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(on_legacy, 0x22, bytes, nullptr), cudaSuccess);
    rmm_next_vmm_free(on_stream, bytes, 0, stream);
    rmm_next_vmm_free(on_legacy, bytes, -1, nullptr);  // the second context's legacy stream
    EXPECT_EQ(current_context_or_null(), ctx2.get());
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  }  // cuCtxDestroy: events of the second context could no longer be waited on
  rmm_next_vmm_statistics v{};
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &v), 0) << rmm_next_last_error();
  EXPECT_EQ(v.allocated_bytes, 0U);
  EXPECT_EQ(v.deallocations, 2U);
  std::vector<void*> again;
  for (int i = 0; i < 2; ++i) {  // their fences, waited for on the host: legal, the primary's
    again.push_back(rmm_next_vmm_alloc(bytes, 0, nullptr));
    ASSERT_NE(again.back(), nullptr) << rmm_next_last_error();
  }
  std::sort(again.begin(), again.end());
  std::vector<void*> freed{on_stream, on_legacy};
  std::sort(freed.begin(), freed.end());
  EXPECT_EQ(again, freed);
  std::vector<unsigned char> host(bytes);
  for (void* const p : {on_stream, on_legacy}) {
    ASSERT_EQ(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    unsigned char const expected = p == on_stream ? 0x11 : 0x22;  // written before the free
    EXPECT_EQ(std::count(host.begin(), host.end(), expected), static_cast<std::ptrdiff_t>(bytes));
  }
  for (void* const p : again) {
    rmm_next_vmm_free(p, bytes, 0, nullptr);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
