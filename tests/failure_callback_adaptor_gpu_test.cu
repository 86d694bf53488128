/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of failure_callback_adaptor over an async_device_resource whose owned pool has a
// maximum size: a callback that spills (copies the oldest block to the host, frees it through
// the same adaptor) lets allocations past the maximum succeed; kernels write and read every
// block, and the spilled copies hold what the kernels wrote; the callback's counts and arguments
// are read back; with nothing left to spill the pool's own out_of_memory reaches the caller;
// bad_alloc as the exception type (RMM's ExceptionType) catches the pool's bad alignment too.

#include "support/kernels.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/failure_callback_adaptor.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rmm_next::test {
namespace {

constexpr std::size_t mib       = std::size_t{1} << 20;
constexpr std::size_t block     = 8 * mib;
constexpr std::size_t words     = block / sizeof(std::uint32_t);
constexpr std::size_t pool_size = 64 * mib;

/** @brief A block on the device, filled by a kernel with the pattern of `seed`. */
struct live_block {
  void* ptr;
  std::uint32_t seed;
};

using spilling_adaptor = failure_callback_adaptor<async_device_resource>;

/**
 * @brief A pool that may hold `pool_size`, an adaptor over it whose callback spills (moves the
 * oldest block to the host and frees it through the adaptor, then asks for a retry; false when
 * nothing is left to move), and what the callback saw.
 */
struct spilling_pool {
  spilling_pool()                                = default;
  spilling_pool(spilling_pool const&)            = delete;
  spilling_pool& operator=(spilling_pool const&) = delete;

  bool spill_oldest(cuda::stream_ref stream, std::size_t attempt)
  {
    live_block victim{};
    {
      std::lock_guard const lock{mutex};
      attempts.push_back(attempt);
      streams.push_back(stream.get());
      if (on_device.empty()) { return false; }
      victim = on_device.front();
      on_device.pop_front();
    }
    std::vector<std::uint32_t> host(words);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), victim.ptr, block, cudaMemcpyDeviceToHost, stream.get()),
              cudaSuccess);
    mr.deallocate(stream, victim.ptr, block);
    // Done before the retry, which may be on another stream (allocate_sync's): the pool reuses
    // the block at once.
    EXPECT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
    std::lock_guard const lock{mutex};
    on_host.emplace_back(victim.seed, std::move(host));
    return true;
  }

  /** @brief Allocates a block through the adaptor, fills it on `stream` and makes it spillable. */
  void add_block(void* ptr, std::uint32_t seed, cudaStream_t stream)
  {
    fill_kernel<<<grid_for(words), block_size, 0, stream>>>(
      static_cast<std::uint32_t*>(ptr), words, seed);
    // Another thread may spill it from another stream: the data must be there by then.
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::lock_guard const lock{mutex};
    on_device.push_back({ptr, seed});
  }

  /** @brief Checks every block on the device and on the host, and frees those on the device. */
  void check_and_free(cudaStream_t stream)
  {
    for (live_block const& b : on_device) {
      EXPECT_EQ(count_mismatches(static_cast<std::uint32_t const*>(b.ptr), words, b.seed, stream),
                0U)
        << "block " << b.seed;
      mr.deallocate(stream, b.ptr, block);
    }
    on_device.clear();
    for (auto const& [seed, host] : on_host) {
      for (std::size_t i = 0; i < words; i += 4093) {
        ASSERT_EQ(host[i], pattern(i, seed)) << "spilled block " << seed << ", word " << i;
      }
    }
  }

  async_device_resource pool{pool_options{.maximum_pool_size = pool_size}};
  std::mutex mutex;
  std::deque<live_block> on_device;  ///< what may be spilled, oldest first
  std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> on_host;  ///< seed, copy
  std::vector<std::size_t> attempts;
  std::vector<cudaStream_t> streams;
  spilling_adaptor mr{pool, [this](std::size_t, cuda::stream_ref stream, std::size_t attempt) {
                        return spill_oldest(stream, attempt);
                      }};
};

class failure_callback_adaptor_gpu_test : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }
  stream_guard guard_;
  cudaStream_t stream_ = guard_;
};

TEST_F(failure_callback_adaptor_gpu_test, SpillingLetsAllocationsPastThePoolMaximumSucceed)
{
  spilling_pool s;
  // Twice what the pool may hold, 8 MiB at a time, each filled by a kernel.
  constexpr std::uint32_t blocks = 2 * pool_size / block;
  for (std::uint32_t seed = 0; seed < blocks; ++seed) {
    s.add_block(s.mr.allocate(stream_, block), seed, stream_);
  }
  std::printf("callback calls: %zu, blocks spilled: %zu, on the device: %zu\n",
              s.attempts.size(),
              s.on_host.size(),
              s.on_device.size());

  // The pool never went past its maximum, and the callback made room every time it was asked.
  EXPECT_LE(s.pool.statistics().reserved_bytes, pool_size);
  EXPECT_GE(s.on_host.size(), blocks / 2 - 1);  // at least the overflow, less granularity
  EXPECT_EQ(s.on_host.size() + s.on_device.size(), blocks);
  EXPECT_EQ(s.attempts.size(), s.on_host.size());  // each call spilled one block
  for (cudaStream_t st : s.streams) {
    EXPECT_EQ(st, stream_);
  }

  // More than the pool can hold at all: the callback spills everything, then says no, and the
  // pool's own error reaches the caller.
  s.attempts.clear();
  std::size_t const on_device = s.on_device.size();
  try {
    (void)s.mr.allocate(stream_, 2 * pool_size);
    FAIL() << "allocated more than the pool's maximum";
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("out_of_memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.attempts.size(), on_device + 1);
  EXPECT_EQ(s.attempts.back(), on_device + 1);
  EXPECT_TRUE(s.on_device.empty());
  // What the kernels wrote is in the spilled copies.
  s.check_and_free(stream_);
  EXPECT_EQ(s.pool.statistics().used_bytes, 0U);
}

TEST_F(failure_callback_adaptor_gpu_test, SynchronousAllocationsSpillWithTheDefaultStream)
{
  spilling_pool s;
  constexpr std::uint32_t blocks = pool_size / block + 2;
  for (std::uint32_t seed = 0; seed < blocks; ++seed) {
    s.add_block(s.mr.allocate_sync(block), seed + 100, stream_);
  }
  EXPECT_GE(s.streams.size(), 2U);
  for (cudaStream_t st : s.streams) {
    EXPECT_EQ(st, cudaStream_t{});
  }
  EXPECT_EQ(s.on_host.size() + s.on_device.size(), blocks);
  s.check_and_free(stream_);
}

TEST_F(failure_callback_adaptor_gpu_test, BadAllocAsTheExceptionTypeCatchesThePoolsErrors)
{
  // RMM's failure_callback_resource_adaptor<rmm::bad_alloc> over a real pool: the resource's
  // bad_alloc for an alignment it refuses and its out_of_memory past the pool's maximum both call
  // the callback; with out_of_memory (the default) only the second does.
  async_device_resource pool{pool_options{.maximum_pool_size = pool_size}};
  std::vector<std::size_t> bytes_seen;
  auto const give_up = [&](std::size_t bytes, cuda::stream_ref, std::size_t) {
    bytes_seen.push_back(bytes);
    return false;
  };
  failure_callback_adaptor<async_device_resource, bad_alloc> any_bad_alloc{pool, give_up};
  try {
    (void)any_bad_alloc.allocate(stream_, 4096, 512);  // the resource aligns to 256 at most
    FAIL() << "allocated with alignment 512";
  } catch (out_of_memory const&) {
    FAIL() << "a bad alignment became out_of_memory";
  } catch (bad_alloc const& e) {
    EXPECT_NE(std::string{e.what()}.find("512"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)any_bad_alloc.allocate(stream_, 2 * pool_size), out_of_memory);
  EXPECT_EQ(bytes_seen, (std::vector<std::size_t>{4096, 2 * pool_size}));

  bytes_seen.clear();
  failure_callback_adaptor<async_device_resource> oom_only{pool, give_up};
  EXPECT_THROW((void)oom_only.allocate(stream_, 4096, 512), bad_alloc);
  EXPECT_THROW((void)oom_only.allocate(stream_, 2 * pool_size), out_of_memory);
  EXPECT_EQ(bytes_seen, (std::vector<std::size_t>{2 * pool_size}));

  // Both keep working, and the memory is the kernels'.
  void* p = any_bad_alloc.allocate(stream_, block);
  fill_kernel<<<grid_for(words), block_size, 0, stream_>>>(
    static_cast<std::uint32_t*>(p), words, 5U);
  EXPECT_EQ(count_mismatches(static_cast<std::uint32_t const*>(p), words, 5U, stream_), 0U);
  any_bad_alloc.deallocate(stream_, p, block);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pool.statistics().used_bytes, 0U);
}

TEST_F(failure_callback_adaptor_gpu_test, ThreadsSpillEachOthersBlocks)
{
  constexpr int threads = 4;
  constexpr int rounds  = 24;
  spilling_pool s;
  std::vector<std::thread> pool_threads;
  for (int t = 0; t < threads; ++t) {
    pool_threads.emplace_back([&s, t] {
      stream_guard const guard;
      cudaStream_t const stream = guard;
      for (int i = 0; i < rounds; ++i) {
        s.add_block(s.mr.allocate(stream, block), static_cast<std::uint32_t>(1000 * t + i), stream);
      }
    });
  }
  for (auto& th : pool_threads) {
    th.join();
  }
  EXPECT_EQ(s.on_device.size() + s.on_host.size(), std::size_t{threads * rounds});
  EXPECT_LE(s.pool.statistics().reserved_bytes, pool_size);
  std::printf("callback calls from %d threads: %zu\n", threads, s.attempts.size());
  s.check_and_free(stream_);
}

}  // namespace
}  // namespace rmm_next::test
