/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of prefetch_adaptor over async_managed_resource: every block it hands out is
// prefetched to the device (cudaMemRangeAttributeLastPrefetchLocation names the device; without
// the adaptor it names none), stream-ordered and synchronous allocations alike, from several
// threads; kernels and the host write and read the memory; and the adaptor refuses, with
// not_supported, device memory (async_device_resource) and pinned memory (async_pinned_resource),
// and an unknown device with std::out_of_range.

#include "support/kernels.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/prefetch_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rmm_next::test {
namespace {

/** @brief The device `[ptr, ptr + bytes)` was last prefetched to (cudaInvalidDeviceId: none). */
int last_prefetch_location(void const* ptr, std::size_t bytes)
{
  int location = -100;
  EXPECT_EQ(cudaMemRangeGetAttribute(
              &location, sizeof(location), cudaMemRangeAttributeLastPrefetchLocation, ptr, bytes),
            cudaSuccess);
  return location;
}

class prefetch_adaptor_gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    try {
      // Preferred location: the host, so that only a prefetch puts the pages on the device.
      cudaMemLocation host{};
      host.type = cudaMemLocationTypeHost;
      managed_.emplace(pool_options{.location = host});
    } catch (not_supported const& e) {
      GTEST_SKIP() << "managed pools not supported here: " << e.what();
    }
  }
  void TearDown() override { EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }

  stream_guard guard_;
  cudaStream_t stream_ = guard_;
  std::optional<async_managed_resource> managed_;
};

TEST_F(prefetch_adaptor_gpu_test, StreamOrderedAllocationsArePrefetchedToTheDevice)
{
  constexpr std::size_t words = std::size_t{4} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);

  // Without the adaptor: never prefetched.
  void* plain = managed_->allocate(stream_, bytes);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(last_prefetch_location(plain, bytes), cudaInvalidDeviceId);
  managed_->deallocate(stream_, plain, bytes);

  prefetch_adaptor mr{*managed_, 0};
  EXPECT_EQ(mr.device(), 0);
  auto* p = static_cast<std::uint32_t*>(mr.allocate(stream_, bytes));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(last_prefetch_location(p, bytes), 0);
  fill_kernel<<<grid_for(words), block_size, 0, stream_>>>(p, words, 5U);
  EXPECT_EQ(count_mismatches(p, words, 5U, stream_), 0U);
  // Managed: the host reads what the kernel wrote.
  for (std::size_t i = 0; i < words; i += 65537) {
    ASSERT_EQ(p[i], pattern(i, 5)) << "word " << i;
  }
  mr.deallocate(stream_, p, bytes);
}

TEST_F(prefetch_adaptor_gpu_test, SynchronousAllocationsArePrefetchedBeforeTheyReturn)
{
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  prefetch_adaptor mr{*managed_, 0};
  auto* p = static_cast<std::uint32_t*>(mr.allocate_sync(bytes));
  EXPECT_EQ(last_prefetch_location(p, bytes), 0);  // no synchronization needed
  for (std::size_t i = 0; i < words; ++i) {
    p[i] = pattern(i, 11);  // written by the host
  }
  EXPECT_EQ(count_mismatches(p, words, 11U, stream_), 0U);
  mr.deallocate_sync(p, bytes);
}

TEST_F(prefetch_adaptor_gpu_test, ThroughRefsAndFromThreads)
{
  prefetch_adaptor mr{*managed_, 0};
  host_device_async_resource_ref ref{mr};
  constexpr int threads       = 8;
  constexpr int rounds        = 50;
  constexpr std::size_t words = 64 * 1024;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  std::vector<int> wrong(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([ref, t, &wrong]() mutable {
      stream_guard const guard;
      cudaStream_t const stream = guard;
      for (int i = 0; i < rounds; ++i) {
        auto* p = static_cast<std::uint32_t*>(ref.allocate(stream, bytes, default_alignment));
        fill_kernel<<<grid_for(words), block_size, 0, stream>>>(p, words, 7U);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        if (last_prefetch_location(p, bytes) != 0 || p[words - 1] != pattern(words - 1, 7U)) {
          ++wrong[t];
        }
        ref.deallocate(stream, p, bytes, default_alignment);
      }
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
  }
}

TEST_F(prefetch_adaptor_gpu_test, RefusesMemoryThatCannotBePrefetched)
{
  auto const refused = [](auto upstream, char const* kind) {
    try {
      prefetch_adaptor mr{upstream, 0};
      ADD_FAILURE() << "constructed over " << kind;
    } catch (not_supported const& e) {
      EXPECT_EQ(std::string{e.what()},
                std::string{"rmm_next::prefetch_adaptor: the upstream hands out "} + kind +
                  ", which cannot be prefetched; wrap a resource of managed memory, such as "
                  "async_managed_resource");
    }
  };
  refused(async_device_resource{}, "device memory");
  refused(async_pinned_resource{}, "pinned host memory");
  // Through a ref, which says nothing of the kind: the probe still tells.
  async_device_resource device;
  refused(device_async_resource_ref{device}, "device memory");
}

TEST_F(prefetch_adaptor_gpu_test, AnUnknownDeviceIsOutOfRange)
{
  int count{};
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  try {
    prefetch_adaptor mr{*managed_, count};
    FAIL() << "constructed";
  } catch (std::out_of_range const& e) {
    EXPECT_EQ(std::string{e.what()},
              "rmm_next::prefetch_adaptor: device id " + std::to_string(count) +
                " is out of range [0, " + std::to_string(count) + "): " + std::to_string(count) +
                " device(s) are visible");
  }
}

}  // namespace
}  // namespace rmm_next::test
