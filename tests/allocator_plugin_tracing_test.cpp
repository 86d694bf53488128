/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so's logging and tracking, over the fake CUDA runtime (linked into this
// program, it takes the place of libcudart's functions for the plugin too): the log's lines as
// RMM's replay parser reads them, and the live allocations the tracking lists. The Environment
// tests run in a second registration of this program, with RMM_NEXT_LOG and RMM_NEXT_TRACK set.

#include "support/fake_cuda_runtime.hpp"
#include "support/plugin_outstanding.hpp"

#include "replay/log_parser.hpp"

#include <rmm_next/allocator_plugin.h>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fake = rmm_next::test::fake_cuda;
using rmm_next::test::outstanding;
namespace replay = rmm_next_bench::replay;

std::uintptr_t bits(void const* p) { return reinterpret_cast<std::uintptr_t>(p); }

/** @brief The fake with two devices, made before the plugin first asks for the device count. */
class Tracing : public ::testing::Test {
 protected:
  static void SetUpTestSuite()
  {
    static bool const once = [] {
      fake::reset(2);
      return true;
    }();
    (void)once;
  }

  void TearDown() override
  {
    EXPECT_EQ(rmm_next_set_log(nullptr), 0);
    EXPECT_EQ(rmm_next_set_tracking(0, 0), 0);
  }

  static std::string temp_path(char const* name)
  {
    return (std::filesystem::temp_directory_path() /
            (std::string{name} + "." + std::to_string(::getpid()) + ".csv"))
      .string();
  }
};

TEST_F(Tracing, TheLogHoldsOneLinePerAllocationAndFreeInRmmsFormat)
{
  std::string const path = temp_path("plugin_log");
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0) << rmm_next_last_error();
  int logging{}, tracking{};
  ASSERT_EQ(rmm_next_get_tracing(&logging, &tracking), 0);
  EXPECT_EQ(logging, 1);
  EXPECT_EQ(tracking, 0);
  cudaStream_t const s0 = fake::make_stream(0);
  cudaStream_t const s1 = fake::make_stream(1);
  void* const a         = rmm_next_torch_alloc(1000, 0, s0);
  void* const b         = rmm_next_cupy_malloc(s1, 3000, 1);
  void* const c         = rmm_next_allocate(512, 0, nullptr);
  ASSERT_NE(a, nullptr) << rmm_next_last_error();
  ASSERT_NE(b, nullptr) << rmm_next_last_error();
  ASSERT_NE(c, nullptr) << rmm_next_last_error();
  rmm_next_torch_free(a, 1000, 0, s0);
  rmm_next_cupy_free(s1, b, 1);
  EXPECT_EQ(rmm_next_flush_log(), 1);
  std::vector<replay::event> events = replay::parse_log_file(path);
  ASSERT_EQ(events.size(), 5U);
  struct expected {
    replay::action act;
    void* ptr;
    std::size_t size;
    cudaStream_t stream;
  };
  std::vector<expected> const want{{replay::action::allocate, a, 1000, s0},
                                   {replay::action::allocate, b, 3000, s1},
                                   {replay::action::allocate, c, 512, nullptr},
                                   {replay::action::free, a, 1000, s0},
                                   {replay::action::free, b, 3000, s1}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(events[i].act, want[i].act);
    EXPECT_EQ(events[i].pointer, bits(want[i].ptr));
    EXPECT_EQ(events[i].size, want[i].size);
    EXPECT_EQ(events[i].stream, bits(want[i].stream));
    EXPECT_EQ(events[i].thread, events[0].thread);  // this thread's gettid
  }
  // Ending the log writes what it buffered and closes it: later calls are not logged.
  rmm_next_deallocate(c, 512, 0, nullptr);
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  EXPECT_EQ(rmm_next_flush_log(), 0);
  void* const d = rmm_next_allocate(256, 0, nullptr);
  rmm_next_deallocate(d, 256, 0, nullptr);
  events = replay::parse_log_file(path);
  ASSERT_EQ(events.size(), 6U);
  EXPECT_EQ(events[5].act, replay::action::free);
  EXPECT_EQ(events[5].pointer, bits(c));
  std::filesystem::remove(path);
}

TEST_F(Tracing, AFailedAllocationIsLoggedAsAllocateFailure)
{
  std::string const path = temp_path("plugin_failure");
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0);
  fake::fake().fail_next["cudaMallocFromPoolAsync"] = cudaErrorMemoryAllocation;
  EXPECT_EQ(rmm_next_allocate(4096, 0, nullptr), nullptr);
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  std::vector<replay::event> const events = replay::parse_log_file(path);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].act, replay::action::allocate_failure);
  EXPECT_EQ(events[0].size, 4096U);
  EXPECT_EQ(events[0].pointer, 0U);
  std::filesystem::remove(path);
}

TEST_F(Tracing, ALogThatCannotBeOpenedFailsAndLeavesTheOpenLogInPlace)
{
  std::string const path = temp_path("plugin_kept");
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0);
  EXPECT_EQ(rmm_next_set_log("/nonexistent-directory/trace.csv"), -1);
  std::string const message = rmm_next_last_error();
  EXPECT_NE(message.find("cannot open the log file \"/nonexistent-directory/trace.csv\""),
            std::string::npos)
    << message;
  void* const p = rmm_next_allocate(300, 0, nullptr);
  rmm_next_deallocate(p, 300, 0, nullptr);
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  EXPECT_EQ(replay::parse_log_file(path).size(), 2U);  // the first log went on
  std::filesystem::remove(path);
}

TEST_F(Tracing, OutstandingListsExactlyTheLiveAllocationsWithTheirDetails)
{
  EXPECT_EQ(rmm_next_outstanding(-1), -1);  // tracking is off
  EXPECT_NE(std::string{rmm_next_last_error()}.find("tracking is off"), std::string::npos);
  ASSERT_EQ(rmm_next_set_tracking(1, 0), 0) << rmm_next_last_error();
  auto const before     = std::chrono::system_clock::now();
  cudaStream_t const s1 = fake::make_stream(1);
  void* const a         = rmm_next_torch_alloc(1000, 0, nullptr);
  void* const b         = rmm_next_torch_alloc(2000, 1, s1);
  void* const c         = rmm_next_numba_alloc(3000, 0);
  void* other_thread{};
  std::uint64_t other_id{};
  std::thread{[&] {
    other_thread = rmm_next_allocate(4000, 1, s1);
    other_id     = static_cast<std::uint64_t>(pthread_self());
  }}.join();
  rmm_next_numba_free(c, 3000, 0);
  std::vector<rmm_next_allocation> const all = outstanding(-1);
  ASSERT_EQ(all.size(), 3U);
  EXPECT_EQ(all[0].ptr, a);
  EXPECT_EQ(all[0].size, 1000U);
  EXPECT_EQ(all[0].alignment, 256U);
  EXPECT_EQ(all[0].stream, nullptr);
  EXPECT_EQ(all[0].device, 0);
  EXPECT_EQ(all[0].thread, static_cast<std::uint64_t>(pthread_self()));
  EXPECT_STREQ(all[0].stack_trace, "");
  auto const since_epoch =
    std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count();
  EXPECT_GE(all[0].time_ns, since_epoch);
  EXPECT_LE(all[0].time_ns, all[1].time_ns);  // oldest first
  EXPECT_EQ(all[1].ptr, b);
  EXPECT_EQ(all[1].size, 2000U);
  EXPECT_EQ(all[1].stream, s1);
  EXPECT_EQ(all[1].device, 1);
  EXPECT_EQ(all[2].ptr, other_thread);
  EXPECT_EQ(all[2].thread, other_id);
  EXPECT_NE(other_id, all[0].thread);
  std::vector<rmm_next_allocation> const on_one = outstanding(1);
  ASSERT_EQ(on_one.size(), 2U);
  EXPECT_EQ(on_one[0].ptr, b);
  EXPECT_EQ(on_one[1].ptr, other_thread);
  EXPECT_EQ(rmm_next_outstanding_entry(2, nullptr), -1);
  rmm_next_torch_free(a, 1000, 0, nullptr);
  rmm_next_torch_free(b, 2000, 1, s1);
  rmm_next_deallocate(other_thread, 4000, 1, s1);
  EXPECT_TRUE(outstanding(-1).empty());
  // Off: the records are forgotten; on again: only what is allocated from then on.
  void* const kept = rmm_next_allocate(512, 0, nullptr);
  ASSERT_EQ(rmm_next_set_tracking(0, 0), 0);
  EXPECT_EQ(rmm_next_outstanding(-1), -1);
  ASSERT_EQ(rmm_next_set_tracking(1, 0), 0);
  EXPECT_TRUE(outstanding(-1).empty());
  rmm_next_deallocate(kept, 512, 0, nullptr);  // allocated before: an untracked free
  EXPECT_TRUE(outstanding(-1).empty());
}

TEST_F(Tracing, StackTracesAreRecordedWhenAsked)
{
  ASSERT_EQ(rmm_next_set_tracking(1, 1), 0);
  void* const p                              = rmm_next_allocate(256, 0, nullptr);
  std::vector<rmm_next_allocation> const all = outstanding(0);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_NE(std::string{all[0].stack_trace}, "");
  rmm_next_deallocate(p, 256, 0, nullptr);
}

TEST_F(Tracing, LogAndTrackingTogetherSeeEveryCall)
{
  std::string const path = temp_path("plugin_both");
  ASSERT_EQ(rmm_next_set_tracking(1, 0), 0);
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0);
  cudaStream_t const streams[] = {fake::make_stream(0), fake::make_stream(1)};
  auto const device_of         = [](std::size_t i) { return static_cast<int>(i % 2); };
  std::vector<void*> live;
  for (std::size_t i = 0; i < 10; ++i) {
    live.push_back(rmm_next_allocate((i + 1) * 1000, device_of(i), streams[device_of(i)]));
    ASSERT_NE(live.back(), nullptr) << rmm_next_last_error();
  }
  for (std::size_t i = 0; i < 10; i += 2) {  // device 0's
    rmm_next_deallocate(live[i], (i + 1) * 1000, device_of(i), streams[device_of(i)]);
  }
  std::vector<rmm_next_allocation> const all = outstanding(-1);
  ASSERT_EQ(all.size(), 5U);
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].ptr, live[2 * k + 1]);
    EXPECT_EQ(all[k].size, (2 * k + 2) * 1000);
    EXPECT_EQ(all[k].device, 1);
    EXPECT_EQ(all[k].stream, streams[1]);
  }
  EXPECT_TRUE(outstanding(0).empty());
  // Ending the log leaves the tracking on.
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  EXPECT_EQ(outstanding(-1).size(), 5U);
  EXPECT_EQ(replay::parse_log_file(path).size(), 15U) << std::ifstream{path}.rdbuf();
  for (std::size_t i = 1; i < 10; i += 2) {
    rmm_next_deallocate(live[i], (i + 1) * 1000, device_of(i), streams[device_of(i)]);
  }
  EXPECT_TRUE(outstanding(-1).empty());
  std::filesystem::remove(path);
}

TEST_F(Tracing, ConcurrentCallsWhileTheLogChangesLoseNoLine)
{
  constexpr int threads    = 4;
  constexpr int per_thread = 2000;
  std::string const first  = temp_path("plugin_first");
  std::string const second = temp_path("plugin_second");
  ASSERT_EQ(rmm_next_set_log(first.c_str()), 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([] {
      for (int i = 0; i < per_thread; ++i) {
        void* p = rmm_next_allocate(256 + static_cast<std::size_t>(i), 0, nullptr);
        rmm_next_deallocate(p, 256 + static_cast<std::size_t>(i), 0, nullptr);
      }
    });
  }
  ASSERT_EQ(rmm_next_set_log(second.c_str()), 0);
  for (auto& w : workers) {
    w.join();
  }
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  std::size_t const lines =
    replay::parse_log_file(first).size() + replay::parse_log_file(second).size();
  EXPECT_EQ(lines, 2U * threads * per_thread);
  std::filesystem::remove(first);
  std::filesystem::remove(second);
}

TEST_F(Tracing, PoolAttributesAreThoseOfThePoolServingTheDevice)
{
  std::uint64_t before{};
  ASSERT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolAttrReservedMemCurrent, &before), 0)
    << rmm_next_last_error();
  void* const p = rmm_next_allocate(1000, 0, nullptr);
  std::uint64_t after{};
  ASSERT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolAttrReservedMemCurrent, &after), 0);
  EXPECT_EQ(after - before, 1000U);  // the fake reserves what it hands out
  std::uint64_t flag{7};
  ASSERT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolReuseAllowOpportunistic, &flag), 0);
  EXPECT_EQ(flag, 0U);
  EXPECT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolAttrUsedMemHigh, nullptr), -1);
  EXPECT_EQ(rmm_next_get_pool_attribute(5, cudaMemPoolAttrUsedMemHigh, &flag), -1);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("device id 5 is out of range"),
            std::string::npos);
  rmm_next_deallocate(p, 1000, 0, nullptr);
}

// ---- A second context of the device ----------------------------------------------------------

// The calling thread's current context is a second context of device 1 (cuCtxCreate), not its
// primary one. A segment comes from device 1's resource and is traced on device 1; the streams
// the plugin makes for itself then (the segments' stream, the pool's) belong to the primary
// context, which outlives the caller's; and the caller's context is current again afterwards.
TEST_F(Tracing, ASegmentFromASecondContextIsTheDevicesAndItsStreamsThePrimaryContexts)
{
  ASSERT_EQ(rmm_next_set_tracking(1, 0), 0) << rmm_next_last_error();
  std::size_t const streams_before = fake::fake().streams.size();
  fake::fake().current_device      = 1;
  fake::fake().second_context      = true;
  constexpr std::size_t size       = std::size_t{2} << 20;
  void* const segment              = rmm_next_torch_segment_alloc(size, -1, nullptr);
  bool const still_second          = fake::fake().second_context;
  int const still_device           = fake::fake().current_device;
  fake::fake().current_device      = 0;
  fake::fake().second_context      = false;
  ASSERT_NE(segment, nullptr) << rmm_next_last_error();
  EXPECT_TRUE(still_second);
  EXPECT_EQ(still_device, 1);
  std::vector<rmm_next_allocation> const on_one = outstanding(1);
  ASSERT_EQ(on_one.size(), 1U);
  EXPECT_EQ(on_one[0].ptr, segment);
  EXPECT_EQ(on_one[0].size, size);
  EXPECT_EQ(on_one[0].device, 1);
  ASSERT_GT(fake::fake().streams.size(), streams_before);  // at least the segments' stream
  for (std::size_t i = streams_before; i < fake::fake().streams.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(fake::fake().streams[i]->device, 1);
    EXPECT_FALSE(fake::fake().streams[i]->second_context);
  }
  rmm_next_statistics s{};
  ASSERT_EQ(rmm_next_get_statistics(1, &s), 0) << rmm_next_last_error();
  EXPECT_EQ(s.allocated_bytes, size);
  rmm_next_torch_free(segment, static_cast<ssize_t>(size), 1, nullptr);
  EXPECT_TRUE(outstanding(-1).empty());
}

// ---- Fork -----------------------------------------------------------------------------------

/**
 * @brief Runs `child` in a forked child, which then leaves with `std::exit` (so that its exit
 * handlers, the plugin's log flush among them, run) and the status `child` returned. A child still
 * running after 10 s is killed by SIGALRM. @return the child's wait status, or -1.
 */
int in_forked_child(std::function<int()> const& child)
{
  std::fflush(nullptr);  // the child's exit would write the parent's buffered stdio again
  pid_t const pid = ::fork();
  if (pid < 0) { return -1; }
  if (pid == 0) {
    ::alarm(10);
    std::exit(child());
  }
  int status{};
  return ::waitpid(pid, &status, 0) == pid ? status : -1;
}

bool exited_with_zero(int status)
{
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string describe(int status)
{
  if (status == -1) { return "fork or waitpid failed"; }
  if (WIFSIGNALED(status)) { return "killed by signal " + std::to_string(WTERMSIG(status)); }
  return "exit status " + std::to_string(WEXITSTATUS(status));
}

/** @brief The lines of the file at `path`, and how many of them are the log's header. */
struct line_count {
  std::size_t lines{0};
  std::size_t headers{0};
};

line_count count_lines(std::string const& path)
{
  line_count n;
  std::ifstream in{path};
  for (std::string line; std::getline(in, line);) {
    ++n.lines;
    if (line == "Thread,Time,Action,Pointer,Size,Stream") { ++n.headers; }
  }
  return n;
}

// A forked child holds a copy of the log's buffer. Its exit must not write the parent's lines:
// after both have exited the log holds each call once.
TEST_F(Tracing, AForkedChildsExitWritesNoneOfTheParentsBufferedLines)
{
  std::string const path = temp_path("plugin_fork");
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0) << rmm_next_last_error();
  std::vector<void*> live;
  for (std::size_t i = 0; i < 3; ++i) {
    live.push_back(rmm_next_allocate(1000 + i, 0, nullptr));
    ASSERT_NE(live.back(), nullptr) << rmm_next_last_error();
  }
  rmm_next_deallocate(live[0], 1000, 0, nullptr);
  rmm_next_deallocate(live[1], 1001, 0, nullptr);  // 5 lines buffered, none written yet
  int const status = in_forked_child([] { return 0; });
  EXPECT_TRUE(exited_with_zero(status)) << describe(status);
  rmm_next_deallocate(live[2], 1002, 0, nullptr);
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  line_count const n = count_lines(path);
  EXPECT_EQ(n.headers, 1U) << std::ifstream{path}.rdbuf();
  EXPECT_EQ(n.lines, 1U + 6U) << std::ifstream{path}.rdbuf();
  EXPECT_EQ(replay::parse_log_file(path).size(), 6U);
  std::filesystem::remove(path);
}

// What a child forked after the plugin used CUDA sees: no log and no tracking (the parent's stay
// the parent's), a clear error from every call that needs CUDA, and a log of its own if it opens
// one.
TEST_F(Tracing, AForkedChildStartsUntracedAndCannotAllocate)
{
  std::string const path       = temp_path("plugin_fork_parent");
  std::string const child_path = temp_path("plugin_fork_child");
  ASSERT_EQ(rmm_next_set_tracking(1, 0), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_set_log(path.c_str()), 0) << rmm_next_last_error();
  void* const p = rmm_next_allocate(4096, 0, nullptr);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  int const status = in_forked_child([&child_path, p] {
    int failed = 0;
    int logging{1}, tracking{1};
    if (rmm_next_get_tracing(&logging, &tracking) != 0 || logging != 0 || tracking != 0) {
      failed |= 1;
    }
    if (rmm_next_outstanding(-1) != -1) { failed |= 2; }
    if (rmm_next_allocate(256, 0, nullptr) != nullptr ||
        std::string{rmm_next_last_error()}.find("forked") == std::string::npos) {
      std::fprintf(stderr, "child: %s\n", rmm_next_last_error());
      failed |= 4;
    }
    rmm_next_statistics stats{};
    if (rmm_next_get_statistics(0, &stats) != -1 || rmm_next_release_unused(-1) != -1) {
      failed |= 8;
    }
    if (rmm_next_set_log(child_path.c_str()) != 0 || rmm_next_flush_log() != 1) { failed |= 16; }
    rmm_next_deallocate(p, 4096, 0, nullptr);  // the parent's memory: refused, not freed
    return failed;
  });
  EXPECT_TRUE(exited_with_zero(status)) << describe(status);
  // The parent's tracking and log went on; the child's log holds its header only.
  std::vector<rmm_next_allocation> const live = outstanding(-1);
  ASSERT_EQ(live.size(), 1U);
  EXPECT_EQ(live[0].ptr, p);
  rmm_next_deallocate(p, 4096, 0, nullptr);
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  EXPECT_EQ(count_lines(path).lines, 1U + 2U) << std::ifstream{path}.rdbuf();
  EXPECT_EQ(count_lines(child_path).lines, 1U) << std::ifstream{child_path}.rdbuf();
  std::filesystem::remove(path);
  std::filesystem::remove(child_path);
}

// A child forked after the plugin made its state is refused every block, the parent's included:
// the plugin's fork state is the library's (detail::forked_after_cuda), set by its fork handler,
// for the per-device resource's blocks and the vmm_resource's alike. The parent frees both
// afterwards, counted once each.
TEST_F(Tracing, AForkedChildIsRefusedTheParentsBlocksOfEveryKind)
{
  void* const p = rmm_next_allocate(4096, 0, nullptr);
  void* const v = rmm_next_vmm_alloc(4096, 0, nullptr);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  ASSERT_NE(v, nullptr) << rmm_next_last_error();
  rmm_next_statistics before{};
  rmm_next_vmm_statistics vmm_before{};
  ASSERT_EQ(rmm_next_get_statistics(0, &before), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &vmm_before), 0) << rmm_next_last_error();
  int const status = in_forked_child([p, v] {
    auto const refused = [](char const* what) {
      if (std::string{rmm_next_last_error()}.find("forked") != std::string::npos) { return 0; }
      std::fprintf(stderr, "child, %s: %s\n", what, rmm_next_last_error());
      return 1;
    };
    int failed = 0;
    failed |= rmm_next_vmm_alloc(4096, 0, nullptr) != nullptr ? 1 : refused("vmm_alloc");
    rmm_next_vmm_free(v, 4096, 0, nullptr);
    failed |= refused("vmm_free") << 1;
    rmm_next_deallocate(p, 4096, 0, nullptr);
    failed |= refused("deallocate") << 2;
    rmm_next_vmm_statistics stats{};
    failed |= (rmm_next_vmm_get_statistics(0, &stats) != -1 ? 1 : refused("vmm_get_statistics"))
              << 3;
    return failed;
  });
  EXPECT_TRUE(exited_with_zero(status)) << describe(status);
  rmm_next_deallocate(p, 4096, 0, nullptr);
  rmm_next_vmm_free(v, 4096, 0, nullptr);
  rmm_next_statistics after{};
  rmm_next_vmm_statistics vmm_after{};
  ASSERT_EQ(rmm_next_get_statistics(0, &after), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &vmm_after), 0) << rmm_next_last_error();
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes - 4096);
  EXPECT_EQ(vmm_after.deallocations, vmm_before.deallocations + 1);
  EXPECT_EQ(vmm_after.allocated_bytes, vmm_before.allocated_bytes - 4096);
}

// Another thread of the parent is inside the log at the fork, holding its lock: its write to a
// pipe nobody reads blocks. The child's exit must not wait for that lock (the thread does not
// exist in the child); the parent's log then loses no line.
TEST_F(Tracing, AForkedChildExitsWhileAnotherThreadHeldTheLog)
{
  std::string const fifo = temp_path("plugin_fork_fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  int const reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // the log's open then succeeds
  ASSERT_GE(reader, 0) << std::strerror(errno);
  ASSERT_EQ(rmm_next_set_log(fifo.c_str()), 0) << rmm_next_last_error();
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> calls{0};
  std::thread writer{[&] {
    while (!stop.load()) {
      void* p = rmm_next_allocate(256, 0, nullptr);
      rmm_next_deallocate(p, 256, 0, nullptr);
      calls.fetch_add(1);
    }
  }};
  // The pipe is full and the writer has made no call for 200 ms: it is blocked in the log's write.
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  for (std::size_t seen = 0;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
    int queued{};
    ASSERT_EQ(::ioctl(reader, FIONREAD, &queued), 0);
    std::size_t const now = calls.load();
    if (queued > 0 && now == seen) { break; }
    seen = now;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the log's write never blocked";
  }
  int const status = in_forked_child([] { return 0; });
  EXPECT_TRUE(exited_with_zero(status)) << describe(status);
  // Drain the pipe until the log is closed, and count its lines.
  ASSERT_EQ(::fcntl(reader, F_SETFL, 0), 0);
  std::size_t newlines = 0;
  std::thread drain{[&] {
    char chunk[1 << 16];
    for (ssize_t got; (got = ::read(reader, chunk, sizeof(chunk))) > 0;) {
      newlines += static_cast<std::size_t>(std::count(chunk, chunk + got, '\n'));
    }
  }};
  stop.store(true);
  writer.join();
  ASSERT_EQ(rmm_next_set_log(nullptr), 0);
  drain.join();
  ::close(reader);
  EXPECT_EQ(newlines, 1U + 2U * calls.load());
  std::filesystem::remove(fifo);
}

// Run with RMM_NEXT_LOG=<path> RMM_NEXT_TRACK=1 (the second CTest registration).
TEST(Environment, TheVariablesStartTheLogAndTheTracking)
{
  char const* path = std::getenv("RMM_NEXT_LOG");
  if (path == nullptr) { GTEST_SKIP() << "RMM_NEXT_LOG is not set"; }
  fake::reset(2);
  int logging{}, tracking{};
  ASSERT_EQ(rmm_next_get_tracing(&logging, &tracking), 0) << rmm_next_last_error();
  EXPECT_EQ(logging, 1);
  EXPECT_EQ(tracking, 1);
  void* const p = rmm_next_allocate(777, 0, nullptr);
  EXPECT_EQ(rmm_next_outstanding(0), 1);
  rmm_next_deallocate(p, 777, 0, nullptr);
  EXPECT_EQ(rmm_next_flush_log(), 1);
  std::vector<replay::event> const events = replay::parse_log_file(path);
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].size, 777U);
  EXPECT_EQ(events[1].act, replay::action::free);
}

}  // namespace
