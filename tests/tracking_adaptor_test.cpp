/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of tracking_adaptor over resources that need no GPU: the outstanding list (exact
// pointers, sizes, alignments, streams, threads, times, oldest first) through every member
// spelling and refs, what it does not record (failures, nullptr), untracked frees, the report's
// text, stack traces naming the allocating function, the report at destruction and on demand to a
// stream (RMM's log_outstanding_allocations), shared records of copies, and exact lists from 16
// threads.

#include "support/counting_buffer.hpp"
#include "support/fake_resource.hpp"
#include "support/refusing_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {

using adaptor = tracking_adaptor<fake_resource>;

// Outside the anonymous namespace and never inlined, so that the dynamic symbol table (the test
// links with -rdynamic) names it in backtrace_symbols' frames.
[[gnu::noinline]] void* tracking_test_allocating_function(adaptor& a, std::size_t bytes)
{
  void* ptr = a.allocate_sync(bytes);
  asm volatile("" ::: "memory");  // keeps this frame: no tail call
  return ptr;
}

namespace {

cuda::stream_ref stream_of(std::uintptr_t value)
{
  return cuda::stream_ref{reinterpret_cast<cudaStream_t>(value)};  // NOLINT: a fake stream
}

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(
  rmm_next::detail::stream_ordered_resource_with<tracking_adaptor<async_device_resource>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<tracking_adaptor<async_device_resource>,
                                                          cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<tracking_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<tracking_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<tracking_adaptor<device_resource_ref>>);
static_assert(cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(
  !cuda::has_property<tracking_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<device_resource_ref, adaptor&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);
// Designated initializers name the options.
static_assert(std::is_constructible_v<adaptor, fake_resource, tracking_options>);

// ---- The outstanding list -----------------------------------------------------------------------

TEST(tracking_adaptor, ListsLiveAllocationsExactlyOldestFirst)
{
  fake_resource upstream;
  adaptor a{upstream};
  EXPECT_TRUE(a.outstanding().empty());
  auto const before = std::chrono::system_clock::now();
  void* p           = a.allocate(stream_of(0x1234), 100, 64);
  void* q           = a.allocate_sync(200);
  void* r           = a.allocate(stream_of(0x2), 300);
  auto const after  = std::chrono::system_clock::now();

  std::vector<tracked_allocation> const list = a.outstanding();
  ASSERT_EQ(list.size(), 3U);
  EXPECT_EQ(list[0].ptr, p);
  EXPECT_EQ(list[0].bytes, 100U);
  EXPECT_EQ(list[0].alignment, 64U);
  EXPECT_EQ(list[0].stream, reinterpret_cast<cudaStream_t>(0x1234));  // NOLINT
  EXPECT_EQ(list[1].ptr, q);
  EXPECT_EQ(list[1].bytes, 200U);
  EXPECT_EQ(list[1].alignment, default_alignment);
  EXPECT_EQ(list[1].stream, cudaStream_t{});  // synchronous: no stream
  EXPECT_EQ(list[2].ptr, r);
  EXPECT_EQ(list[2].stream, reinterpret_cast<cudaStream_t>(0x2));  // NOLINT
  for (auto const& e : list) {
    EXPECT_EQ(e.thread, std::this_thread::get_id());
    EXPECT_GE(e.time, before);
    EXPECT_LE(e.time, after);
    EXPECT_TRUE(e.stack_trace.empty());  // not enabled
  }
  EXPECT_LE(list[0].time, list[1].time);
  EXPECT_LE(list[1].time, list[2].time);
  EXPECT_EQ(a.bytes_outstanding(), 600U);
  EXPECT_EQ(a.count_outstanding(), 3U);

  a.deallocate_sync(q, 200);
  std::vector<tracked_allocation> const two = a.outstanding();
  ASSERT_EQ(two.size(), 2U);
  EXPECT_EQ(two[0].ptr, p);
  EXPECT_EQ(two[1].ptr, r);
  EXPECT_EQ(a.bytes_outstanding(), 400U);

  a.deallocate(stream_of(0x1234), p, 100, 64);
  a.deallocate(stream_of(0x2), r, 300);
  EXPECT_TRUE(a.outstanding().empty());
  EXPECT_EQ(a.bytes_outstanding(), 0U);
  EXPECT_EQ(a.count_outstanding(), 0U);
  EXPECT_EQ(a.untracked_frees(), 0U);
  EXPECT_EQ(upstream.allocations(), 3);
  EXPECT_EQ(upstream.deallocations(), 3);
}

TEST(tracking_adaptor, FailuresAndNullptrAreNotRecorded)
{
  tracking_adaptor<refusing_resource> a{refusing_resource{false}};
  EXPECT_EQ(a.allocate_sync(0), nullptr);
  a.deallocate_sync(nullptr, 0);
  tracking_adaptor<refusing_resource> refusing{refusing_resource{}};
  EXPECT_THROW((void)refusing.allocate(stream_of(1), 64, 256), out_of_memory);
  EXPECT_THROW((void)refusing.allocate_sync(64), out_of_memory);
  EXPECT_TRUE(refusing.outstanding().empty());
  EXPECT_EQ(refusing.untracked_frees(), 0U);
  EXPECT_TRUE(a.outstanding().empty());
  EXPECT_EQ(a.untracked_frees(), 0U);  // a nullptr free is no untracked free
}

TEST(tracking_adaptor, FreeOfAnUntrackedPointerIsForwardedAndCounted)
{
  fake_resource upstream;
  void* foreign = upstream.allocate_sync(64);  // not through the adaptor
  adaptor a{upstream};
  void* mine = a.allocate_sync(32);
  a.deallocate_sync(foreign, 64);
  EXPECT_EQ(upstream.deallocations(), 1);  // forwarded
  EXPECT_EQ(a.untracked_frees(), 1U);
  ASSERT_EQ(a.outstanding().size(), 1U);
  EXPECT_EQ(a.outstanding()[0].ptr, mine);
  EXPECT_NE(a.report().find("1 free of untracked pointers"), std::string::npos) << a.report();
  a.deallocate_sync(mine, 32);
  EXPECT_EQ(a.untracked_frees(), 1U);
}

TEST(tracking_adaptor, EveryMemberSpellingAndRefsAreTracked)
{
  fake_resource upstream;
  adaptor a{upstream};
  host_device_async_resource_ref ref{a};
  device_resource_ref sync_ref{a};
  void* p = ref.allocate(stream_of(7), 512, 256);
  void* q = sync_ref.allocate_sync(64, 8);
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  void* r = a.allocate(std::size_t{4}, 8);
  void* s = a.allocate_async(8, 16, stream_of(9));
  EXPECT_EQ(a.count_outstanding(), 4U);
  EXPECT_EQ(a.bytes_outstanding(), 588U);
  a.deallocate_async(s, 8, 16, stream_of(9));
  a.deallocate(r, 4, 8);
#endif
  EXPECT_EQ(a.count_outstanding(), 2U);
  EXPECT_EQ(a.bytes_outstanding(), 576U);
  ref.deallocate(stream_of(7), p, 512, 256);
  sync_ref.deallocate_sync(q, 64, 8);
  EXPECT_EQ(a.count_outstanding(), 0U);
  EXPECT_EQ(a.untracked_frees(), 0U);

  tracking_adaptor<device_resource_ref> over_ref{device_resource_ref{upstream}};
  void* t = over_ref.allocate_sync(8, 8);
  EXPECT_EQ(over_ref.outstanding().at(0).ptr, t);
  over_ref.deallocate_sync(t, 8, 8);
  EXPECT_TRUE(over_ref.outstanding().empty());
}

TEST(tracking_adaptor, CopiesShareRecordsSeparateAdaptorsDoNot)
{
  fake_resource upstream;
  adaptor a{upstream};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  adaptor other{upstream};
  EXPECT_TRUE(a == copy);
  EXPECT_FALSE(a == other);
  void* p = copy.allocate_sync(10);
  void* q = other.allocate_sync(20);
  ASSERT_EQ(a.outstanding().size(), 1U);
  EXPECT_EQ(a.outstanding()[0].ptr, p);
  ASSERT_EQ(other.outstanding().size(), 1U);
  EXPECT_EQ(other.outstanding()[0].ptr, q);
  a.deallocate_sync(p, 10);  // through another copy
  EXPECT_TRUE(copy.outstanding().empty());
  other.deallocate_sync(q, 20);
}

// ---- The report ---------------------------------------------------------------------------------

TEST(tracking_adaptor, ReportNamesCountBytesAndEachAllocation)
{
  adaptor a{fake_resource{}};
  EXPECT_EQ(a.report(), "rmm_next::tracking_adaptor: 0 outstanding allocations, 0 bytes\n");
  void* p                = a.allocate(stream_of(0xabc0), 1000, 128);
  void* q                = a.allocate_sync(24);
  std::string const text = a.report();
  std::istringstream lines{text};
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "rmm_next::tracking_adaptor: 2 outstanding allocations, 1024 bytes");

  std::ostringstream thread;
  thread << std::this_thread::get_id();
  std::ostringstream first;
  first << "  " << p << ": 1000 bytes, alignment 128, stream 0xabc0, thread " << thread.str()
        << ", at ";
  std::ostringstream second;
  second << "  " << q << ": 24 bytes, alignment " << default_alignment << ", stream 0, thread "
         << thread.str() << ", at ";
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind(first.str(), 0), 0U) << line;
  EXPECT_NE(line.find(" UTC"), std::string::npos) << line;
  // "YYYY-MM-DD HH:MM:SS.ffffff UTC"
  EXPECT_EQ(line.size(), first.str().size() + 30) << line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind(second.str(), 0), 0U) << line;
  EXPECT_FALSE(std::getline(lines, line));

  a.deallocate_sync(q, 24);
  EXPECT_EQ(a.report().rfind("rmm_next::tracking_adaptor: 1 outstanding allocation, 1000 bytes\n"),
            0U);
  a.deallocate(stream_of(0xabc0), p, 1000, 128);
}

/** @brief The addresses `[0x...]` that end glibc's frames, or empty (std::stacktrace's text). */
std::vector<std::uintptr_t> frame_addresses(std::string const& trace)
{
  std::vector<std::uintptr_t> addresses;
  std::istringstream lines{trace};
  for (std::string line; std::getline(lines, line);) {
    auto const open = line.rfind("[0x");
    if (open != std::string::npos && line.back() == ']') {
      addresses.push_back(std::stoull(line.substr(open + 1, line.size() - open - 2), nullptr, 16));
    }
  }
  return addresses;
}

TEST(tracking_adaptor, StackTracesNameTheAllocatingFunction)
{
  adaptor a{fake_resource{}, {.stack_traces = true}};
  void* p                                    = tracking_test_allocating_function(a, 64);
  void* q                                    = a.allocate_sync(8);
  std::vector<tracked_allocation> const list = a.outstanding();
  ASSERT_EQ(list.size(), 2U);
  ASSERT_FALSE(list[0].stack_trace.empty());
  ASSERT_FALSE(list[1].stack_trace.empty());
  EXPECT_EQ(list[0].stack_trace.rfind("#0 ", 0), 0U) << list[0].stack_trace;
  EXPECT_NE(a.report().find("    #0 "), std::string::npos) << a.report();  // indented in the report

  // glibc's backtrace_symbols names what the dynamic symbol table holds: this program's own
  // functions only when it links with -rdynamic (CMake's ENABLE_EXPORTS, as tests/CMakeLists.txt
  // asks). dladdr reads the same table, so it tells which case this build is.
  Dl_info info{};
  bool const named =
    dladdr(reinterpret_cast<void*>(&tracking_test_allocating_function), &info) != 0 &&  // NOLINT
    info.dli_sname != nullptr;
  if (named) {
    EXPECT_NE(list[0].stack_trace.find("tracking_test_allocating_function"), std::string::npos)
      << list[0].stack_trace;
    EXPECT_EQ(list[1].stack_trace.find("tracking_test_allocating_function"), std::string::npos)
      << list[1].stack_trace;
    EXPECT_NE(a.report().find("tracking_test_allocating_function"), std::string::npos);
  } else {
    // Addresses only: one of the frames returns into the function (its code lies within 16 KiB
    // of its entry, with everything the compiler inlined into it).
    std::printf("no dynamic symbols (built without -rdynamic): checking frame addresses\n");
    auto const entry =
      reinterpret_cast<std::uintptr_t>(&tracking_test_allocating_function);  // NOLINT
    auto const within = [entry](std::string const& trace) {
      auto const addresses = frame_addresses(trace);
      return std::any_of(addresses.begin(), addresses.end(), [entry](std::uintptr_t x) {
        return x > entry && x < entry + (std::uintptr_t{16} << 10);
      });
    };
    EXPECT_TRUE(within(list[0].stack_trace)) << list[0].stack_trace;
  }
  a.deallocate_sync(p, 64);
  a.deallocate_sync(q, 8);
}

TEST(tracking_adaptor, ReportAtDestructionOfTheLastCopyWhenSomethingIsLive)
{
  fake_resource upstream;
  void* leaked = nullptr;
  std::ostringstream captured;
  std::streambuf* const old = std::cerr.rdbuf(captured.rdbuf());
  {
    adaptor a{upstream, {.report_at_destruction = true}};
    {
      adaptor copy = a;
      leaked       = copy.allocate_sync(48);
    }
    EXPECT_EQ(captured.str(), "");  // a copy died, the records live on
  }
  std::string const with_leak = captured.str();
  captured.str("");
  {
    adaptor clean{upstream, {.report_at_destruction = true}};
    clean.deallocate_sync(clean.allocate_sync(16), 16);
  }
  std::string const without_leak = captured.str();
  void* unreported               = nullptr;
  {
    adaptor quiet{upstream};  // no report asked
    unreported = quiet.allocate_sync(8);
  }
  std::string const not_asked = captured.str();
  std::cerr.rdbuf(old);

  std::ostringstream line;
  line << "  " << leaked << ": 48 bytes";
  EXPECT_EQ(with_leak.rfind("rmm_next::tracking_adaptor: 1 outstanding allocation, 48 bytes\n", 0),
            0U)
    << with_leak;
  EXPECT_NE(with_leak.find(line.str()), std::string::npos) << with_leak;
  EXPECT_EQ(without_leak, "");
  EXPECT_EQ(not_asked, "");
  upstream.deallocate_sync(leaked, 48);
  upstream.deallocate_sync(unreported, 8);
}

TEST(tracking_adaptor, LogsWhatIsOutstandingToAStreamOrStandardError)
{
  // RMM's log_outstanding_allocations(): the report, written and flushed where it is asked.
  adaptor a{fake_resource{}};
  counting_buffer buffer;
  std::ostream out{&buffer};
  a.log_outstanding_allocations(out);
  EXPECT_EQ(buffer.str(), "rmm_next::tracking_adaptor: 0 outstanding allocations, 0 bytes\n");
  EXPECT_EQ(buffer.syncs, 1);

  void* p = a.allocate(stream_of(0x70), 4096, 512);
  buffer.str("");
  a.log_outstanding_allocations(out);
  EXPECT_EQ(buffer.syncs, 2);
  std::string const logged = buffer.str();
  EXPECT_EQ(logged, a.report());
  std::ostringstream line;
  line << "  " << p << ": 4096 bytes, alignment 512, stream 0x70, thread ";
  EXPECT_NE(logged.find(line.str()), std::string::npos) << logged;

  // Without a stream: standard error, as report_at_destruction writes.
  std::ostringstream captured;
  std::streambuf* const old = std::cerr.rdbuf(captured.rdbuf());
  a.log_outstanding_allocations();
  std::cerr.rdbuf(old);
  EXPECT_EQ(captured.str(), a.report());
  a.deallocate(stream_of(0x70), p, 4096, 512);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(tracking_adaptor, ExactListsUnderSixteenThreads)
{
  constexpr int threads = 16;
  constexpr int churn   = 2000;
  constexpr int held    = 8;
  fake_resource upstream;
  adaptor a{upstream};
  std::barrier sync{threads + 1};
  std::vector<std::thread> pool;
  std::vector<std::vector<void*>> held_ptrs(threads);
  std::vector<std::thread::id> ids(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ids[static_cast<std::size_t>(t)] = std::this_thread::get_id();
      std::size_t const bytes          = static_cast<std::size_t>(t + 1) * 64;
      adaptor mine                     = a;
      auto const stream                = stream_of(static_cast<std::uintptr_t>(t + 1) << 4);
      for (int i = 0; i < churn; ++i) {
        void* p = (i % 2 == 0) ? mine.allocate_sync(bytes) : mine.allocate(stream, bytes);
        mine.deallocate(stream, p, bytes);
      }
      for (int i = 0; i < held; ++i) {
        held_ptrs[static_cast<std::size_t>(t)].push_back(mine.allocate(stream, bytes));
      }
      sync.arrive_and_wait();  // 1: everything held
      sync.arrive_and_wait();  // 2: the main thread has looked
      for (void* p : held_ptrs[static_cast<std::size_t>(t)]) {
        mine.deallocate(stream, p, bytes);
      }
    });
  }
  sync.arrive_and_wait();  // 1
  std::vector<tracked_allocation> const list = a.outstanding();
  ASSERT_EQ(list.size(), static_cast<std::size_t>(threads * held));
  std::map<void*, tracked_allocation const*> by_ptr;
  for (auto const& e : list) {
    by_ptr[e.ptr] = &e;
  }
  std::size_t expected_bytes = 0;
  for (int t = 0; t < threads; ++t) {
    for (void* p : held_ptrs[static_cast<std::size_t>(t)]) {
      auto const it = by_ptr.find(p);
      ASSERT_NE(it, by_ptr.end());
      EXPECT_EQ(it->second->bytes, static_cast<std::size_t>(t + 1) * 64);
      EXPECT_EQ(it->second->thread, ids[static_cast<std::size_t>(t)]);
      EXPECT_EQ(it->second->stream,
                reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(t + 1) << 4));  // NOLINT
      expected_bytes += it->second->bytes;
    }
  }
  EXPECT_TRUE(std::is_sorted(
    list.begin(), list.end(), [](auto const& x, auto const& y) { return x.time < y.time; }));
  EXPECT_EQ(a.bytes_outstanding(), expected_bytes);
  sync.arrive_and_wait();  // 2
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_TRUE(a.outstanding().empty());
  EXPECT_EQ(a.bytes_outstanding(), 0U);
  EXPECT_EQ(a.untracked_frees(), 0U);
  EXPECT_EQ(upstream.allocations(), threads * (churn + held));
  EXPECT_EQ(upstream.deallocations(), threads * (churn + held));
}

}  // namespace
}  // namespace rmm_next::test
