/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of limiting_adaptor over the real async resources: memory within the limit is written
// and read by kernels; past the limit an owned pool is never asked (its usage stays put) and the
// out_of_memory names the limit, the bytes in use and the request; the limit changes while
// allocations are live; the pool's own out_of_memory leaves the count unchanged; threads on their
// own streams never pass the limit; and a stack of limiting over aligned over the thread cache.

#include "support/device_round_trip.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

static_assert(
  rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<async_device_resource>,
                                                 cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, limiting_adaptor<async_device_resource>&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      limiting_adaptor<async_managed_resource>&>);

class limiting_adaptor_gpu_test : public ::testing::Test {
 protected:
  stream_guard guard_;
  cudaStream_t stream_ = guard_;
};

TEST_F(limiting_adaptor_gpu_test, WithinTheLimitOverARealPoolAndRefusedPastIt)
{
  async_device_resource pool{pool_options{}};  // owned: its usage is ours alone
  limiting_adaptor<async_device_resource> mr{pool, 64 * MiB};
  void* a = mr.allocate(stream_, 40 * MiB);
  void* b = mr.allocate_sync(24 * MiB - 1000);  // rounds to 24 MiB - 768: 768 bytes left
  EXPECT_EQ(mr.bytes_in_use(), 64 * MiB - 768);
  EXPECT_EQ(device_round_trip(a, 40 * MiB, 1U, stream_), 0U);
  EXPECT_EQ(device_round_trip(b, 24 * MiB - 1000, 2U, stream_), 0U);

  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::uint64_t const used = pool.statistics().used_bytes;
  std::string message;
  try {
    [[maybe_unused]] void* c = mr.allocate(stream_, 1000);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "rmm_next::limiting_adaptor: out_of_memory: allocating 1000 bytes (1024 counted) "
            "would pass the limit of 67108864 bytes, with 67108096 bytes in use; free memory or "
            "raise the limit (set_limit)");
  EXPECT_EQ(pool.statistics().used_bytes, used);  // the pool was not asked
  void* c = mr.allocate(stream_, 768);            // what is left fits exactly
  EXPECT_EQ(device_round_trip(c, 768, 3U, stream_), 0U);
  mr.deallocate(stream_, c, 768);
  mr.deallocate(stream_, a, 40 * MiB);
  mr.deallocate_sync(b, 24 * MiB - 1000);
  EXPECT_EQ(mr.bytes_in_use(), 0U);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pool.statistics().used_bytes, 0U);
}

TEST_F(limiting_adaptor_gpu_test, TheLimitChangesWhileAllocationsAreLive)
{
  limiting_adaptor<async_device_resource> mr{async_device_resource{}, 8 * MiB};
  device_async_resource_ref ref{mr};
  void* a = ref.allocate(stream_, 6 * MiB, 256);
  EXPECT_EQ(mr.set_limit(4 * MiB), 8 * MiB);
  EXPECT_THROW((void)ref.allocate(stream_, 256, 256), out_of_memory);
  EXPECT_EQ(device_round_trip(a, 6 * MiB, 4U, stream_), 0U);  // live memory is untouched
  mr.set_limit(16 * MiB);
  void* b = ref.allocate(stream_, 10 * MiB, 256);
  EXPECT_EQ(mr.bytes_in_use(), 16 * MiB);
  EXPECT_EQ(device_round_trip(b, 10 * MiB, 5U, stream_), 0U);
  ref.deallocate(stream_, a, 6 * MiB, 256);
  ref.deallocate(stream_, b, 10 * MiB, 256);
  EXPECT_EQ(mr.bytes_in_use(), 0U);
}

TEST_F(limiting_adaptor_gpu_test, ThePoolsOwnOutOfMemoryLeavesTheCountUnchanged)
{
  limiting_adaptor<async_device_resource> mr{async_device_resource{},
                                             std::size_t{1} << 62};  // far above the device
  void* a = mr.allocate(stream_, MiB);
  try {
    [[maybe_unused]] void* huge = mr.allocate(stream_, std::size_t{1} << 50);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    // The pool's message, not the adaptor's.
    EXPECT_NE(std::string{e.what()}.find("async_device_resource"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mr.bytes_in_use(), MiB);
  mr.deallocate(stream_, a, MiB);
  EXPECT_EQ(mr.bytes_in_use(), 0U);
}

TEST_F(limiting_adaptor_gpu_test, ThreadsOnTheirOwnStreamsNeverPassTheLimit)
{
  constexpr int threads       = 8;
  constexpr int rounds        = 200;
  constexpr std::size_t limit = 32 * MiB;
  limiting_adaptor<async_device_resource> mr{async_device_resource{pool_options{}}, limit};
  std::atomic<int> over{0};
  std::atomic<int> refused{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      stream_guard const guard;
      cudaStream_t const stream = guard;
      std::vector<std::pair<void*, std::size_t>> held;
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes = MiB + static_cast<std::size_t>(t * 4096 + i);
        try {
          void* p = mr.allocate(stream, bytes);
          fill_kernel<<<grid_for(bytes), block_size, 0, stream>>>(
            static_cast<unsigned char*>(p), bytes, 6U);
          held.emplace_back(p, bytes);
        } catch (out_of_memory const&) {
          refused.fetch_add(1);
        }
        if (mr.bytes_in_use() > limit) { over.fetch_add(1); }
        if (held.size() > 3 || (i % 5 == 0 && !held.empty())) {
          mr.deallocate(stream, held.front().first, held.front().second);
          held.erase(held.begin());
        }
      }
      for (auto const& [p, bytes] : held) {
        mr.deallocate(stream, p, bytes);
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  std::printf("refusals: %d of %d allocations\n", refused.load(), threads * rounds);
  EXPECT_EQ(over.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mr.bytes_in_use(), 0U);
}

TEST_F(limiting_adaptor_gpu_test, LimitingOverAlignedOverTheThreadCache)
{
  using cache   = thread_cache_adaptor<async_device_resource>;
  using aligned = aligned_adaptor<cache>;
  limiting_adaptor<aligned> stack{aligned{cache{async_device_resource{pool_options{}}}, 4 * KiB, 0},
                                  MiB};
  static_assert(std::is_constructible_v<device_async_resource_ref, decltype(stack)&>);
  std::vector<void*> held;
  for (int i = 0; i < 8; ++i) {
    void* p = stack.allocate(stream_, 100 * KiB);  // 102400: a multiple of 256 already
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (4 * KiB), 0U);
    EXPECT_EQ(device_round_trip(p, 100 * KiB, static_cast<std::uint32_t>(i), stream_), 0U);
    held.push_back(p);
  }
  EXPECT_EQ(stack.bytes_in_use(), 800 * KiB);
  std::string message;
  try {
    [[maybe_unused]] void* p = stack.allocate(stream_, 300 * KiB);
  } catch (out_of_memory const& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("the limit of 1048576 bytes, with 819200 bytes in use"), std::string::npos)
    << message;
  for (void* p : held) {
    stack.deallocate(stream_, p, 100 * KiB);
  }
  EXPECT_EQ(stack.bytes_in_use(), 0U);
  void* again = stack.allocate(stream_, 100 * KiB);  // from the thread's cache
  EXPECT_EQ(device_round_trip(again, 100 * KiB, 9U, stream_), 0U);
  stack.deallocate(stream_, again, 100 * KiB);
}

}  // namespace
}  // namespace rmm_next::test
