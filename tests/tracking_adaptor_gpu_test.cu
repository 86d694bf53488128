/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of tracking_adaptor over the real async resources: kernels write and read the memory
// it hands out, its outstanding list holds exactly what was allocated (pointers, sizes, streams,
// threads, stacks), failures of the resource record nothing, and the list is exact with threads
// on their own streams.

#include "support/device_fill_check.cuh"
#include "support/kernels.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

namespace rmm_next::test {
namespace {

TEST(tracking_adaptor_gpu_test, KernelsUseTheMemoryAndTheListMatches)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  stream_guard const guard;
  cudaStream_t const stream = guard;
  tracking_adaptor<async_device_resource> mr{async_device_resource{}, {.stack_traces = true}};
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* a                     = static_cast<std::uint32_t*>(mr.allocate(stream, bytes));
  auto* b                     = static_cast<std::uint32_t*>(mr.allocate_sync(bytes / 2));
  EXPECT_EQ(fill_and_count_mismatches(a, words, 1, stream), 0U);
  EXPECT_EQ(fill_and_count_mismatches(b, words / 2, 2, stream), 0U);
  transform_kernel<<<grid_for(words / 2), block_size, 0, stream>>>(b, a, words / 2);
  std::vector<std::uint32_t> host(words / 2);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), a, bytes / 2, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (std::size_t i = 0; i < host.size(); i += 4099) {
    ASSERT_EQ(host[i], 3 * pattern(i, 2) + 1) << "word " << i;
  }

  std::vector<tracked_allocation> const list = mr.outstanding();
  ASSERT_EQ(list.size(), 2U);
  EXPECT_EQ(list[0].ptr, a);
  EXPECT_EQ(list[0].bytes, bytes);
  EXPECT_EQ(list[0].stream, stream);
  EXPECT_EQ(list[1].ptr, b);
  EXPECT_EQ(list[1].bytes, bytes / 2);
  EXPECT_EQ(list[1].stream, cudaStream_t{});
  for (auto const& e : list) {
    EXPECT_EQ(e.thread, std::this_thread::get_id());
    EXPECT_FALSE(e.stack_trace.empty());
  }
  EXPECT_EQ(mr.bytes_outstanding(), bytes + bytes / 2);
  EXPECT_NE(mr.report().find("2 outstanding allocations"), std::string::npos) << mr.report();

  mr.deallocate(stream, a, bytes);
  mr.deallocate_sync(b, bytes / 2);
  EXPECT_TRUE(mr.outstanding().empty());
  EXPECT_EQ(mr.untracked_frees(), 0U);
}

TEST(tracking_adaptor_gpu_test, PinnedMemoryThroughARefStaysHostAccessible)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  stream_guard const guard;
  cudaStream_t const stream = guard;
  async_pinned_resource pinned{};
  tracking_adaptor<host_device_async_resource_ref> mr{host_device_async_resource_ref{pinned}};
  constexpr std::size_t words = 4096;
  auto* p = static_cast<std::uint32_t*>(mr.allocate(stream, words * sizeof(std::uint32_t)));
  EXPECT_EQ(fill_and_count_mismatches(p, words, 5, stream), 0U);
  for (std::size_t i = 0; i < words; i += 97) {
    ASSERT_EQ(p[i], pattern(i, 5)) << "word " << i;  // read by the host
  }
  ASSERT_EQ(mr.outstanding().size(), 1U);
  EXPECT_EQ(mr.outstanding()[0].ptr, p);
  mr.deallocate(stream, p, words * sizeof(std::uint32_t));
  EXPECT_EQ(mr.count_outstanding(), 0U);
}

TEST(tracking_adaptor_gpu_test, FailuresOfTheResourceRecordNothing)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  stream_guard const guard;
  cudaStream_t const stream = guard;
  tracking_adaptor<async_device_resource> mr{async_device_resource{}};
  EXPECT_THROW((void)mr.allocate(stream, std::size_t{1} << 50), out_of_memory);
  EXPECT_THROW((void)mr.allocate(stream, 64, 512), bad_alloc);
  EXPECT_EQ(mr.allocate(stream, 0), nullptr);
  EXPECT_TRUE(mr.outstanding().empty());
  void* p = mr.allocate(stream, 1024);  // works afterwards
  EXPECT_EQ(mr.outstanding().at(0).ptr, p);
  mr.deallocate(stream, p, 1024);
}

TEST(tracking_adaptor_gpu_test, ExactWithThreadsOnTheirOwnStreams)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr int threads = 8;
  constexpr int held    = 16;
  tracking_adaptor<async_device_resource> mr{async_device_resource{}};
  std::vector<std::vector<void*>> ptrs(threads);
  std::vector<cudaStream_t> streams(threads);
  std::vector<std::thread::id> ids(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto const i = static_cast<std::size_t>(t);
      ids[i]       = std::this_thread::get_id();
      ASSERT_EQ(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), cudaSuccess);
      std::size_t const bytes = std::size_t{4096} * (i + 1);
      for (int k = 0; k < held; ++k) {
        void* p = mr.allocate(streams[i], bytes);
        fill_kernel<<<1, block_size, 0, streams[i]>>>(
          static_cast<std::uint32_t*>(p), bytes / sizeof(std::uint32_t), 3U);
        ptrs[i].push_back(p);
      }
      ASSERT_EQ(cudaStreamSynchronize(streams[i]), cudaSuccess);
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  std::vector<tracked_allocation> const list = mr.outstanding();
  ASSERT_EQ(list.size(), static_cast<std::size_t>(threads * held));
  std::map<void*, tracked_allocation const*> by_ptr;
  for (auto const& e : list) {
    by_ptr[e.ptr] = &e;
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(threads); ++i) {
    for (void* p : ptrs[i]) {
      auto const it = by_ptr.find(p);
      ASSERT_NE(it, by_ptr.end());
      EXPECT_EQ(it->second->bytes, std::size_t{4096} * (i + 1));
      EXPECT_EQ(it->second->stream, streams[i]);
      EXPECT_EQ(it->second->thread, ids[i]);
    }
    for (void* p : ptrs[i]) {
      mr.deallocate(streams[i], p, std::size_t{4096} * (i + 1));
    }
    EXPECT_EQ(cudaStreamSynchronize(streams[i]), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(streams[i]), cudaSuccess);
  }
  EXPECT_TRUE(mr.outstanding().empty());
  EXPECT_EQ(mr.bytes_outstanding(), 0U);
}

}  // namespace
}  // namespace rmm_next::test
