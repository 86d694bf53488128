/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of logging_adaptor over the real async resources: kernels write and read the memory
// it hands out, and the log parsed back with RMM's column rules holds exactly what was done
// (pointers, sizes, the real stream handles as RMM prints them, the calling threads), the
// resource's failures as `allocate failure` lines, and whole lines from threads on their own
// streams.

#include "support/allocation_log.hpp"
#include "support/device_fill_check.cuh"
#include "support/kernels.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rmm_next::test {
namespace {

std::uintptr_t address(void const* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }  // NOLINT

std::vector<log_event> parse(std::string const& text)
{
  std::istringstream in{text};
  return parse_allocation_log(in);
}

TEST(logging_adaptor_gpu_test, KernelsUseTheMemoryAndTheLogMatches)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  stream_guard const guard;
  cudaStream_t const stream = guard;
  std::ostringstream out;
  logging_adaptor<async_device_resource> mr{async_device_resource{}, out};
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* a                     = static_cast<std::uint32_t*>(mr.allocate(stream, bytes));
  auto* b                     = static_cast<std::uint32_t*>(mr.allocate_sync(bytes / 2));
  EXPECT_EQ(fill_and_count_mismatches(a, words, 1, stream), 0U);
  EXPECT_EQ(fill_and_count_mismatches(b, words / 2, 2, stream), 0U);
  mr.deallocate(stream, a, bytes);
  mr.deallocate_sync(b, bytes / 2);
  EXPECT_THROW((void)mr.allocate(stream, std::size_t{1} << 50), out_of_memory);
  mr.flush();

  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), 5U) << out.str();
  auto const tid = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  std::ostringstream stream_text;  // as RMM prints a stream: ostream << std::hex << cudaStream_t
  stream_text << std::hex << stream;
  EXPECT_EQ(events[0].action, log_action::allocate);
  EXPECT_EQ(events[0].pointer, address(a));
  EXPECT_EQ(events[0].size, bytes);
  EXPECT_EQ(events[0].stream_text, stream_text.str());
  EXPECT_EQ(events[1].action, log_action::allocate);
  EXPECT_EQ(events[1].pointer, address(b));
  EXPECT_EQ(events[1].stream_text, "0");
  EXPECT_EQ(events[2].action, log_action::free);
  EXPECT_EQ(events[2].pointer, address(a));
  EXPECT_EQ(events[2].stream, address(stream));
  EXPECT_EQ(events[3].action, log_action::free);
  EXPECT_EQ(events[3].pointer, address(b));
  EXPECT_EQ(events[4].action, log_action::allocate_failure);
  EXPECT_EQ(events[4].pointer, 0U);
  EXPECT_EQ(events[4].size, std::size_t{1} << 50);
  for (auto const& e : events) {
    EXPECT_EQ(e.thread, tid);
  }
}

TEST(logging_adaptor_gpu_test, ThreadsOnTheirOwnStreamsWriteWholeLines)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr int threads = 8;
  constexpr int pairs   = 200;
  std::ostringstream out;
  std::vector<cudaStream_t> streams(threads);
  std::vector<std::uint64_t> tids(threads);
  async_device_resource upstream{};
  {
    logging_adaptor<device_async_resource_ref> mr{device_async_resource_ref{upstream}, out};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto const i = static_cast<std::size_t>(t);
        tids[i]      = static_cast<std::uint64_t>(::syscall(SYS_gettid));
        ASSERT_EQ(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), cudaSuccess);
        std::size_t const bytes = 256 * (i + 1);
        for (int k = 0; k < pairs; ++k) {
          void* p = mr.allocate(streams[i], bytes);
          fill_kernel<<<1, block_size, 0, streams[i]>>>(
            static_cast<std::uint32_t*>(p), bytes / sizeof(std::uint32_t), 7U);
          mr.deallocate(streams[i], p, bytes);
        }
        ASSERT_EQ(cudaStreamSynchronize(streams[i]), cudaSuccess);
      });
    }
    for (auto& th : pool) {
      th.join();
    }
  }  // the last copy writes the log out
  std::vector<log_event> const events = parse(out.str());
  ASSERT_EQ(events.size(), static_cast<std::size_t>(threads * pairs * 2));
  std::map<std::uint64_t, std::size_t> thread_of;
  for (std::size_t i = 0; i < tids.size(); ++i) {
    thread_of[tids[i]] = i;
  }
  for (auto const& e : events) {
    std::size_t const i = thread_of.at(e.thread);
    EXPECT_EQ(e.stream, address(streams[i]));
    EXPECT_EQ(e.size, 256 * (i + 1));
  }
  for (cudaStream_t s : streams) {
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
}

}  // namespace
}  // namespace rmm_next::test
