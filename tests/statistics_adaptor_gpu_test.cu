/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of statistics_adaptor over the real async resources: the memory it hands out is
// usable by kernels (and the host, for host-accessible kinds), what it counts matches what the
// caller allocated, failures of the resource count nothing (0 bytes counts as in RMM), two adaptors
// over one resource count apart (one per library), nested counters around one phase of kernels
// over an owned pool, and counts stay exact with threads on their own streams.

#include "support/device_fill_check.cuh"
#include "support/kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

class statistics_adaptor_gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override
  {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  /** @brief Fills `words` words at `ptr` with a kernel and counts the mismatches with another. */
  unsigned long long fill_and_check(std::uint32_t* ptr, std::size_t words, std::uint32_t seed)
  {
    return rmm_next::test::fill_and_count_mismatches(ptr, words, seed, stream_);
  }

  cudaStream_t stream_{};
};

TEST_F(statistics_adaptor_gpu_test, DeviceMemoryIsUsableAndCounted)
{
  statistics_adaptor<async_device_resource> mr{async_device_resource{}};
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* a                     = static_cast<std::uint32_t*>(mr.allocate(stream_, bytes));
  auto* b                     = static_cast<std::uint32_t*>(mr.allocate_sync(bytes / 2));
  EXPECT_EQ(mr.statistics().bytes.current, static_cast<std::int64_t>(bytes + bytes / 2));
  EXPECT_EQ(mr.statistics().allocations.current, 2);
  EXPECT_EQ(fill_and_check(a, words, 1), 0U);
  EXPECT_EQ(fill_and_check(b, words / 2, 2), 0U);

  transform_kernel<<<grid_for(words / 2), block_size, 0, stream_>>>(b, a, words / 2);
  std::vector<std::uint32_t> host(words / 2);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), a, bytes / 2, cudaMemcpyDeviceToHost, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  for (std::size_t i = 0; i < host.size(); i += 4099) {
    ASSERT_EQ(host[i], 3 * pattern(i, 2) + 1) << "word " << i;
  }

  mr.deallocate(stream_, a, bytes);
  mr.deallocate_sync(b, bytes / 2);
  allocation_statistics const s = mr.statistics();
  EXPECT_EQ(s.bytes.current, 0);
  EXPECT_EQ(s.bytes.peak, static_cast<std::int64_t>(bytes + bytes / 2));
  EXPECT_EQ(s.bytes.total, static_cast<std::int64_t>(bytes + bytes / 2));
  EXPECT_EQ(s.allocations.total, 2);
}

TEST_F(statistics_adaptor_gpu_test, HostAccessibleKindsStayHostAccessible)
{
  auto check = [this](auto upstream) {
    statistics_adaptor mr{upstream};  // deduces the upstream type
    static_assert(cuda::has_property<decltype(mr), cuda::mr::host_accessible>);
    static_assert(std::is_constructible_v<host_device_async_resource_ref, decltype(mr)&>);
    constexpr std::size_t words = 4096;
    auto* p = static_cast<std::uint32_t*>(mr.allocate_sync(words * sizeof(std::uint32_t)));
    for (std::size_t i = 0; i < words; ++i) {
      p[i] = pattern(i, 9);  // written by the host
    }
    unsigned long long* d = nullptr;
    ASSERT_EQ(cudaMallocAsync(&d, sizeof(*d), stream_), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(d, 0, sizeof(*d), stream_), cudaSuccess);
    count_mismatches_kernel<<<grid_for(words), block_size, 0, stream_>>>(p, words, 9U, d);
    unsigned long long mismatches = ~0ULL;
    ASSERT_EQ(cudaMemcpyAsync(&mismatches, d, sizeof(*d), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    ASSERT_EQ(cudaFreeAsync(d, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(mismatches, 0U);
    EXPECT_EQ(mr.statistics().bytes.current, static_cast<std::int64_t>(words * 4));
    mr.deallocate_sync(p, words * sizeof(std::uint32_t));
    EXPECT_EQ(mr.statistics().bytes.current, 0);
  };
  check(async_pinned_resource{});
  try {
    check(async_managed_resource{});
  } catch (not_supported const& e) {
    std::printf("managed pools not supported here: %s\n", e.what());
  }
}

TEST_F(statistics_adaptor_gpu_test, FailuresOfTheResourceCountNothing)
{
  statistics_adaptor<async_device_resource> mr{async_device_resource{}};
  EXPECT_THROW((void)mr.allocate(stream_, std::size_t{1} << 50), out_of_memory);
  EXPECT_THROW((void)mr.allocate_sync(std::size_t{1} << 50), out_of_memory);
  EXPECT_THROW((void)mr.allocate(stream_, 64, 512), bad_alloc);
  allocation_statistics s = mr.statistics();
  EXPECT_EQ(s.bytes.total, 0);
  EXPECT_EQ(s.allocations.total, 0);
  EXPECT_EQ(s.bytes.peak, 0);

  // 0 bytes: nullptr, counted as RMM counts it (one allocation of 0 bytes, then one free).
  void* zero = mr.allocate(stream_, 0);
  EXPECT_EQ(zero, nullptr);
  EXPECT_EQ(mr.statistics().allocations.current, 1);
  mr.deallocate(stream_, zero, 0);
  s = mr.statistics();
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.allocations.total, 1);
  EXPECT_EQ(s.bytes.total, 0);

  void* p = mr.allocate(stream_, 1024);  // the resource and the adaptor work afterwards
  EXPECT_EQ(mr.statistics().bytes.current, 1024);
  mr.deallocate(stream_, p, 1024);
}

TEST_F(statistics_adaptor_gpu_test, EachLibraryCountsItsOwnOverOneResource)
{
  async_device_resource shared{pool_options{}};  // an owned pool: its usage is ours alone
  statistics_adaptor<device_async_resource_ref> library_a{device_async_resource_ref{shared}};
  statistics_adaptor<device_async_resource_ref> library_b{device_async_resource_ref{shared}};
  EXPECT_FALSE(library_a == library_b);

  void* a = library_a.allocate(stream_, std::size_t{3} << 20);
  void* b = library_b.allocate(stream_, std::size_t{5} << 20);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(library_a.statistics().bytes.current, std::int64_t{3} << 20);
  EXPECT_EQ(library_b.statistics().bytes.current, std::int64_t{5} << 20);
  // The pool sees both.
  EXPECT_GE(shared.statistics().used_bytes, std::uint64_t{8} << 20);
  library_a.deallocate(stream_, a, std::size_t{3} << 20);
  library_b.deallocate(stream_, b, std::size_t{5} << 20);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(shared.statistics().used_bytes, 0U);
  EXPECT_EQ(library_a.statistics().bytes.peak, std::int64_t{3} << 20);
  EXPECT_EQ(library_b.statistics().bytes.peak, std::int64_t{5} << 20);
}

TEST_F(statistics_adaptor_gpu_test, NestedCountersMeasureOnePhaseOverAPool)
{
  // RMM's push_counters / pop_counters around one phase of a program that runs kernels on the
  // memory: the level sees that phase alone, the pool (an owned one) sees everything.
  async_device_resource pool{pool_options{}};
  statistics_adaptor<async_device_resource> mr{pool};
  std::size_t const before_bytes = std::size_t{4} << 20;
  void* before                   = mr.allocate(stream_, before_bytes);

  auto const [below, below_allocations] = mr.push_counters();
  EXPECT_EQ(below.current, static_cast<std::int64_t>(before_bytes));
  EXPECT_EQ(below_allocations.current, 1);
  std::size_t const words = std::size_t{1} << 20;  // 4 MiB of uint32_t
  std::vector<void*> phase;
  for (int i = 0; i < 3; ++i) {
    phase.push_back(mr.allocate(stream_, words * sizeof(std::uint32_t)));
    EXPECT_EQ(
      fill_and_check(
        static_cast<std::uint32_t*>(phase.back()), words, 7U + static_cast<std::uint32_t>(i)),
      0U);
  }
  mr.deallocate(stream_, phase.back(), words * sizeof(std::uint32_t));
  phase.pop_back();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  auto const in_phase = static_cast<std::int64_t>(words * sizeof(std::uint32_t));
  EXPECT_EQ(mr.statistics().bytes.current, 2 * in_phase);
  EXPECT_EQ(mr.statistics().bytes.peak, 3 * in_phase);
  EXPECT_GE(pool.statistics().used_bytes, before_bytes + 2 * words * sizeof(std::uint32_t));

  allocation_statistics const popped = mr.pop_counters();
  EXPECT_EQ(popped.bytes.current, 2 * in_phase);
  EXPECT_EQ(popped.bytes.peak, 3 * in_phase);
  EXPECT_EQ(popped.allocations.total, 3);
  EXPECT_EQ(mr.statistics().bytes.current, static_cast<std::int64_t>(before_bytes) + 2 * in_phase);
  EXPECT_EQ(mr.statistics().bytes.peak, static_cast<std::int64_t>(before_bytes) + 3 * in_phase);
  for (void* p : phase) {
    mr.deallocate(stream_, p, words * sizeof(std::uint32_t));
  }
  mr.deallocate(stream_, before, before_bytes);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pool.statistics().used_bytes, 0U);
  EXPECT_THROW((void)mr.pop_counters(), std::out_of_range);
}

TEST_F(statistics_adaptor_gpu_test, ExactWithThreadsOnTheirOwnStreams)
{
  constexpr int threads         = 16;
  constexpr int pairs           = 300;
  constexpr std::size_t quantum = 256;
  statistics_adaptor<async_device_resource> mr{async_device_resource{}};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([mr, t]() mutable {
      cudaStream_t stream{};
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      std::size_t const bytes = quantum * static_cast<std::size_t>(t + 1);
      for (int i = 0; i < pairs; ++i) {
        void* p = mr.allocate(stream, bytes);
        auto* w = static_cast<std::uint32_t*>(p);
        fill_kernel<<<1, block_size, 0, stream>>>(w, bytes / sizeof(std::uint32_t), 3U);
        mr.deallocate(stream, p, bytes);
      }
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  std::int64_t total = 0;
  for (int t = 0; t < threads; ++t) {
    total += pairs * static_cast<std::int64_t>(quantum) * (t + 1);
  }
  allocation_statistics const s = mr.statistics();
  EXPECT_EQ(s.bytes.current, 0);
  EXPECT_EQ(s.bytes.total, total);
  EXPECT_EQ(s.allocations.current, 0);
  EXPECT_EQ(s.allocations.total, threads * pairs);
  EXPECT_GE(s.allocations.peak, 1);
  EXPECT_LE(s.allocations.peak, threads);  // one live allocation per thread at most
}

}  // namespace
}  // namespace rmm_next::test
