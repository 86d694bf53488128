/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of aligned_adaptor over the real async resources: device pointers aligned to 4 KiB,
// 64 KiB and 2 MiB, written and read over their whole size by kernels; requests for 4 KiB below
// the threshold (GPUDirect Storage's alignment); host-accessible kinds from the host; the pool
// gets every padded block back; the thread cache below it; a failure of the pool leaves it
// working; and threads on their own streams.

#include "support/device_round_trip.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

static_assert(rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<async_device_resource>,
                                                             cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, aligned_adaptor<async_device_resource>&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      aligned_adaptor<async_managed_resource>&>);

bool aligned_to(void const* p, std::size_t alignment)
{
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

class aligned_adaptor_gpu_test : public ::testing::Test {
 protected:
  stream_guard guard_;
  cudaStream_t stream_ = guard_;
};

TEST_F(aligned_adaptor_gpu_test, DevicePointersAreAlignedAndUsableOverTheirWholeSize)
{
  async_device_resource pool{pool_options{}};  // owned: its usage is ours alone
  for (std::size_t const alignment : {4 * KiB, 64 * KiB, 2 * MiB}) {
    aligned_adaptor<async_device_resource> mr{pool, alignment};
    std::uint32_t seed = 1;
    for (std::size_t const bytes : {64 * KiB, MiB + 3, 5 * MiB + 1000}) {
      SCOPED_TRACE("alignment " + std::to_string(alignment) + ", bytes " + std::to_string(bytes));
      void* p = mr.allocate(stream_, bytes);
      void* q = mr.allocate_sync(bytes);
      EXPECT_TRUE(aligned_to(p, alignment)) << p;
      EXPECT_TRUE(aligned_to(q, alignment)) << q;
      EXPECT_EQ(device_round_trip(p, bytes, seed++, stream_), 0U);
      EXPECT_EQ(device_round_trip(q, bytes, seed++, stream_), 0U);
      // The pool holds at least what the adaptor asked for both.
      EXPECT_GE(pool.statistics().used_bytes, 2 * mr.upstream_bytes(bytes));
      mr.deallocate(stream_, p, bytes);
      mr.deallocate_sync(q, bytes);
    }
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pool.statistics().used_bytes, 0U);  // every padded block went back whole
}

TEST_F(aligned_adaptor_gpu_test, FourKibibytesBelowTheThresholdThroughARef)
{
  async_device_resource pool{pool_options{}};
  aligned_adaptor<async_device_resource> mr{pool, 64 * KiB};
  device_async_resource_ref ref{mr};
  std::vector<void*> blocks;
  for (int i = 0; i < 64; ++i) {
    void* p = ref.allocate(stream_, 100 + static_cast<std::size_t>(i) * 37, 4096);
    EXPECT_TRUE(aligned_to(p, 4096)) << p;
    blocks.push_back(p);
  }
  for (int i = 0; i < 64; ++i) {
    std::size_t const bytes = 100 + static_cast<std::size_t>(i) * 37;
    EXPECT_EQ(device_round_trip(blocks[static_cast<std::size_t>(i)], bytes, 7U, stream_), 0U);
    ref.deallocate(stream_, blocks[static_cast<std::size_t>(i)], bytes, 4096);
  }
  void* small = ref.allocate(stream_, 1000, 256);  // below the threshold: 256 as always
  EXPECT_TRUE(aligned_to(small, 256));
  ref.deallocate(stream_, small, 1000, 256);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pool.statistics().used_bytes, 0U);
}

TEST_F(aligned_adaptor_gpu_test, HostAccessibleKindsStayHostAccessible)
{
  auto check = [this](auto upstream) {
    aligned_adaptor mr{upstream, 64 * KiB, 0};  // deduces the upstream type
    static_assert(cuda::has_property<decltype(mr), cuda::mr::host_accessible>);
    constexpr std::size_t words = 4096;
    auto* p = static_cast<std::uint32_t*>(mr.allocate_sync(words * sizeof(std::uint32_t)));
    EXPECT_TRUE(aligned_to(p, 64 * KiB));
    for (std::size_t i = 0; i < words; ++i) {
      p[i] = pattern(i, 9);  // written by the host
    }
    EXPECT_EQ(device_mismatches(p, words, 9U, stream_), 0U);
    mr.deallocate_sync(p, words * sizeof(std::uint32_t));
  };
  check(async_pinned_resource{});
  try {
    check(async_managed_resource{});
  } catch (not_supported const& e) {
    std::printf("managed pools not supported here: %s\n", e.what());
  }
}

TEST_F(aligned_adaptor_gpu_test, OverTheThreadCache)
{
  thread_cache_adaptor<async_device_resource> cache{async_device_resource{pool_options{}}};
  aligned_adaptor<thread_cache_adaptor<async_device_resource>> mr{cache, 4 * KiB, 0};
  for (int round = 0; round < 3; ++round) {  // later rounds come from the cache
    void* p = mr.allocate(stream_, 10 * KiB);
    EXPECT_TRUE(aligned_to(p, 4 * KiB)) << p;
    EXPECT_EQ(device_round_trip(p, 10 * KiB, static_cast<std::uint32_t>(round), stream_), 0U);
    mr.deallocate(stream_, p, 10 * KiB);
  }
  EXPECT_GE(cache.statistics().hits, 1U);
}

TEST_F(aligned_adaptor_gpu_test, AFailureOfThePoolLeavesItWorking)
{
  aligned_adaptor<async_device_resource> mr{async_device_resource{}, 2 * MiB};
  EXPECT_THROW((void)mr.allocate(stream_, std::size_t{1} << 50), out_of_memory);
  EXPECT_THROW((void)mr.allocate(stream_, 64, 4096 + 1), bad_alloc);
  void* p = mr.allocate(stream_, 4 * MiB);
  EXPECT_TRUE(aligned_to(p, 2 * MiB));
  EXPECT_EQ(device_round_trip(p, 4 * MiB, 5U, stream_), 0U);
  mr.deallocate(stream_, p, 4 * MiB);
}

TEST_F(aligned_adaptor_gpu_test, ThreadsOnTheirOwnStreams)
{
  constexpr int threads = 8;
  constexpr int rounds  = 100;
  async_device_resource pool{pool_options{}};
  aligned_adaptor<async_device_resource> mr{pool, 64 * KiB, 32 * KiB};
  std::vector<std::thread> workers;
  std::vector<int> failures(threads, 0);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      stream_guard const guard;
      cudaStream_t const stream = guard;
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes =
          static_cast<std::size_t>(i + 1) * 1000 + static_cast<std::size_t>(t);
        std::size_t const expected = bytes >= 32 * KiB ? 64 * KiB : 256;
        void* p                    = mr.allocate(stream, bytes);
        if (!aligned_to(p, expected)) { ++failures[t]; }
        fill_kernel<<<grid_for(bytes), block_size, 0, stream>>>(
          static_cast<unsigned char*>(p), bytes, 3U);
        mr.deallocate(stream, p, bytes);
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        ++failures[t];
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  }
  EXPECT_EQ(pool.statistics().used_bytes, 0U);
}

}  // namespace
}  // namespace rmm_next::test
