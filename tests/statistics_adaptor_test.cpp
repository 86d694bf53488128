/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of statistics_adaptor over resources that need no GPU: what it counts (current, peak,
// total bytes and allocations) through every member spelling and through refs, 0 bytes counted as
// RMM counts them, failures not counted, RMM's nested counters (push_counters / pop_counters),
// shared counters of copies, property forwarding, and exact counts from 16 threads.

#include "support/fake_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

using adaptor = statistics_adaptor<fake_resource>;

cuda::stream_ref no_stream() { return cuda::stream_ref{cudaStream_t{}}; }

/** @brief A fake resource that refuses allocations larger than `limit` with out_of_memory. */
class limited_resource {
 public:
  explicit limited_resource(std::size_t limit) : limit_{limit} {}

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    if (bytes > limit_) { throw out_of_memory{"rmm_next::out_of_memory: over the limit"}; }
    return upstream_.allocate_sync(bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment)
  {
    upstream_.deallocate_sync(ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate(cuda::stream_ref, std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(cuda::stream_ref, void* ptr, std::size_t bytes, std::size_t alignment)
  {
    deallocate_sync(ptr, bytes, alignment);
  }
  [[nodiscard]] long allocations() const noexcept { return upstream_.allocations(); }

  friend bool operator==(limited_resource const&, limited_resource const&) noexcept { return true; }
  friend constexpr void get_property(limited_resource const&, cuda::mr::device_accessible) noexcept
  {
  }

 private:
  std::size_t limit_;
  fake_resource upstream_;
};

void expect_counter(allocation_counter const& c,
                    std::int64_t current,
                    std::int64_t peak,
                    std::int64_t total,
                    char const* what)
{
  EXPECT_EQ(c.current, current) << what;
  EXPECT_EQ(c.peak, peak) << what;
  EXPECT_EQ(c.total, total) << what;
}

// ---- What the adaptor is ------------------------------------------------------------------------

// Over each async resource and ref: the interfaces and properties of the upstream, on this CCCL.
static_assert(
  rmm_next::detail::stream_ordered_resource_with<statistics_adaptor<async_device_resource>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<statistics_adaptor<async_device_resource>,
                                                          cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<statistics_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<statistics_adaptor<async_pinned_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<statistics_adaptor<device_async_resource_ref>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<statistics_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<statistics_adaptor<device_resource_ref>>);
static_assert(cuda::has_property<adaptor, cuda::mr::device_accessible>);
static_assert(cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(
  cuda::has_property<statistics_adaptor<async_managed_resource>, cuda::mr::host_accessible>);
static_assert(
  !cuda::has_property<statistics_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(!cuda::has_property<statistics_adaptor<limited_resource>, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<host_resource_ref, adaptor&>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, statistics_adaptor<async_device_resource>&>);
static_assert(!std::is_constructible_v<host_device_async_resource_ref,
                                       statistics_adaptor<async_device_resource>&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);
// Over a synchronous ref: synchronous members only.
static_assert(
  std::is_constructible_v<device_resource_ref, statistics_adaptor<device_resource_ref>&>);
static_assert(
  !std::is_constructible_v<device_async_resource_ref, statistics_adaptor<device_resource_ref>&>);

// ---- Counting -----------------------------------------------------------------------------------

TEST(statistics_adaptor, StartsAtZero)
{
  adaptor const a{fake_resource{}};
  allocation_statistics const s = a.statistics();
  expect_counter(s.bytes, 0, 0, 0, "bytes");
  expect_counter(s.allocations, 0, 0, 0, "allocations");
}

TEST(statistics_adaptor, CountsCurrentPeakAndTotal)
{
  fake_resource upstream;
  adaptor a{upstream};
  void* p = a.allocate_sync(100);
  void* q = a.allocate(no_stream(), 200, 64);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  expect_counter(a.statistics().bytes, 300, 300, 300, "after two allocations");
  expect_counter(a.statistics().allocations, 2, 2, 2, "after two allocations");

  a.deallocate(no_stream(), q, 200, 64);
  expect_counter(a.statistics().bytes, 100, 300, 300, "after freeing 200");
  expect_counter(a.statistics().allocations, 1, 2, 2, "after freeing 200");

  void* r = a.allocate_sync(50);
  expect_counter(a.statistics().bytes, 150, 300, 350, "below the peak");
  expect_counter(a.statistics().allocations, 2, 2, 3, "below the peak");

  a.deallocate_sync(p, 100);
  a.deallocate_sync(r, 50);
  expect_counter(a.statistics().bytes, 0, 300, 350, "all freed");
  expect_counter(a.statistics().allocations, 0, 2, 3, "all freed");

  // Everything went to the upstream.
  EXPECT_EQ(upstream.allocations(), 3);
  EXPECT_EQ(upstream.deallocations(), 3);
}

TEST(statistics_adaptor, ResetPeakLowersPeaksToCurrentValues)
{
  adaptor a{fake_resource{}};
  void* p = a.allocate_sync(1000);
  void* q = a.allocate_sync(24);
  a.deallocate_sync(p, 1000);
  expect_counter(a.statistics().bytes, 24, 1024, 1024, "before reset");

  a.reset_peak();
  expect_counter(a.statistics().bytes, 24, 24, 1024, "after reset");
  expect_counter(a.statistics().allocations, 1, 1, 2, "after reset");

  void* r = a.allocate_sync(8);
  expect_counter(a.statistics().bytes, 32, 32, 1032, "new peak");
  a.deallocate_sync(q, 24);
  a.deallocate_sync(r, 8);
  expect_counter(a.statistics().bytes, 0, 32, 1032, "all freed");
}

TEST(statistics_adaptor, EveryMemberSpellingCounts)
{
  adaptor a{fake_resource{}};
  void* p1 = a.allocate(no_stream(), 1);  // stream-ordered
  void* p2 = a.allocate_sync(2);          // synchronous
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  // CCCL 3.0's names, which its concepts require; the size is a std::size_t there, as the
  // concepts pass it (an int in the first place is taken for a literal 0 stream: see
  // compile_fail/literal_zero_stream.cpp).
  void* p3 = a.allocate(std::size_t{4}, 8);         // CCCL 3.0 synchronous
  void* p4 = a.allocate_async(8, 16, no_stream());  // CCCL 3.0 stream-ordered
  expect_counter(a.statistics().bytes, 15, 15, 15, "allocated");
  expect_counter(a.statistics().allocations, 4, 4, 4, "allocated");
  a.deallocate_async(p4, 8, 16, no_stream());
  a.deallocate(p3, 4, 8);
  std::int64_t constexpr total_bytes       = 15;
  std::int64_t constexpr total_allocations = 4;
#else
  expect_counter(a.statistics().bytes, 3, 3, 3, "allocated");
  expect_counter(a.statistics().allocations, 2, 2, 2, "allocated");
  std::int64_t constexpr total_bytes       = 3;
  std::int64_t constexpr total_allocations = 2;
#endif
  a.deallocate_sync(p2, 2);
  a.deallocate(no_stream(), p1, 1);
  expect_counter(a.statistics().bytes, 0, total_bytes, total_bytes, "freed");
  expect_counter(a.statistics().allocations, 0, total_allocations, total_allocations, "freed");
}

TEST(statistics_adaptor, CountsThroughRefs)
{
  fake_resource upstream;
  adaptor a{upstream};
  host_device_async_resource_ref ref{a};
  device_resource_ref sync_ref{a};
  void* p = ref.allocate(no_stream(), 512, 256);
  void* q = sync_ref.allocate_sync(64, 8);
  expect_counter(a.statistics().bytes, 576, 576, 576, "through refs");
  ref.deallocate(no_stream(), p, 512, 256);
  sync_ref.deallocate_sync(q, 64, 8);
  expect_counter(a.statistics().bytes, 0, 576, 576, "through refs");
  EXPECT_EQ(upstream.deallocations(), 2);
}

TEST(statistics_adaptor, AdaptsARef)
{
  fake_resource upstream;
  host_device_async_resource_ref const upstream_ref{upstream};
  statistics_adaptor<host_device_async_resource_ref> a{upstream_ref};
  static_assert(cuda::has_property<decltype(a), cuda::mr::host_accessible>);
  void* p = a.allocate(no_stream(), 48);
  void* q = a.allocate_sync(16);
  expect_counter(a.statistics().bytes, 64, 64, 64, "over a ref");
  EXPECT_EQ(upstream.allocations(), 2);
  a.deallocate(no_stream(), p, 48);
  a.deallocate_sync(q, 16);
  EXPECT_EQ(upstream.deallocations(), 2);
  EXPECT_EQ(a.statistics().allocations.current, 0);

  statistics_adaptor<device_resource_ref> s{device_resource_ref{upstream}};
  void* r = s.allocate_sync(8, 8);
  EXPECT_EQ(s.statistics().bytes.current, 8);
  s.deallocate_sync(r, 8, 8);
  EXPECT_EQ(s.statistics().bytes.current, 0);
}

TEST(statistics_adaptor, ZeroBytesCountAsInRmmFailuresCountNothing)
{
  statistics_adaptor<limited_resource> a{limited_resource{1024}};
  // As RMM: an allocation of 0 bytes (nullptr here) is one allocation of 0 bytes, and its free
  // (of nullptr) one free.
  void* zero = a.allocate_sync(0);
  EXPECT_EQ(zero, nullptr);  // fake_resource: 0 bytes is nullptr
  expect_counter(a.statistics().bytes, 0, 0, 0, "0 bytes allocated");
  expect_counter(a.statistics().allocations, 1, 1, 1, "0 bytes allocated");
  a.deallocate_sync(zero, 0);
  expect_counter(a.statistics().allocations, 0, 1, 1, "0 bytes freed");
  void* also_zero = a.allocate(no_stream(), 0, 64);
  a.deallocate(no_stream(), also_zero, 0, 64);
  expect_counter(a.statistics().allocations, 0, 1, 2, "0 bytes, stream-ordered");
  EXPECT_EQ(a.upstream_resource().allocations(), 0);  // nothing was handed out

  try {
    [[maybe_unused]] void* p = a.allocate(no_stream(), 4096, 256);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("over the limit"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)a.allocate_sync(2048), out_of_memory);
  expect_counter(a.statistics().bytes, 0, 0, 0, "failures count nothing");
  expect_counter(a.statistics().allocations, 0, 1, 2, "failures count nothing");

  void* p = a.allocate_sync(1024);  // still works after the failures
  expect_counter(a.statistics().bytes, 1024, 1024, 1024, "after failures");
  a.deallocate_sync(p, 1024);
  EXPECT_EQ(a.upstream_resource().allocations(), 1);
}

// ---- Nested counters (RMM's push_counters / pop_counters) ---------------------------------------

TEST(statistics_adaptor, NestedCountersAsInRmm)
{
  // RMM's StatisticsTest.Nested, step by step.
  constexpr std::int64_t ten = 10 << 20;
  adaptor a{fake_resource{}};
  void* a0 = a.allocate_sync(ten);
  EXPECT_EQ(a.statistics().bytes.current, ten);
  EXPECT_EQ(a.statistics().allocations.current, 1);
  {
    auto const [bytes, allocations] = a.push_counters();  // the level below, before the push
    expect_counter(bytes, ten, ten, ten, "returned by the first push");
    expect_counter(allocations, 1, 1, 1, "returned by the first push");
  }
  expect_counter(a.statistics().bytes, 0, 0, 0, "a new level");
  expect_counter(a.statistics().allocations, 0, 0, 0, "a new level");
  void* a1 = a.allocate_sync(ten);
  (void)a.push_counters();
  expect_counter(a.statistics().bytes, 0, 0, 0, "a second level");
  void* a2 = a.allocate_sync(ten);
  a.deallocate_sync(a2, ten);
  expect_counter(a.statistics().bytes, 0, ten, ten, "in the second level");
  expect_counter(a.statistics().allocations, 0, 1, 1, "in the second level");
  {
    allocation_statistics const popped = a.pop_counters();
    expect_counter(popped.bytes, 0, ten, ten, "the second level, popped");
    expect_counter(popped.allocations, 0, 1, 1, "the second level, popped");
  }
  // The first level: a1, with the second level's peak on top of it.
  expect_counter(a.statistics().bytes, ten, 2 * ten, 2 * ten, "the first level again");
  expect_counter(a.statistics().allocations, 1, 2, 2, "the first level again");
  a.deallocate_sync(a0, ten);  // allocated below the first level
  {
    allocation_statistics const popped = a.pop_counters();
    expect_counter(popped.bytes, 0, 2 * ten, 2 * ten, "the first level, popped");
    expect_counter(popped.allocations, 0, 2, 2, "the first level, popped");
  }
  expect_counter(a.statistics().bytes, ten, 3 * ten, 3 * ten, "the adaptor's own");
  expect_counter(a.statistics().allocations, 1, 3, 3, "the adaptor's own");
  a.deallocate_sync(a1, ten);
  expect_counter(a.statistics().bytes, 0, 3 * ten, 3 * ten, "all freed");
}

TEST(statistics_adaptor, PopWithoutPushThrowsOutOfRangeAndChangesNothing)
{
  adaptor a{fake_resource{}};
  void* p = a.allocate_sync(100);
  try {
    (void)a.pop_counters();
    ADD_FAILURE() << "expected std::out_of_range";
  } catch (std::out_of_range const& e) {
    EXPECT_STREQ(e.what(),
                 "rmm_next::statistics_adaptor: pop_counters() found no level to pop; call "
                 "push_counters() first (the adaptor's own counters stay)");
  }
  expect_counter(a.statistics().bytes, 100, 100, 100, "after the failed pop");
  (void)a.push_counters();
  (void)a.pop_counters();
  EXPECT_THROW((void)a.pop_counters(), std::out_of_range);
  expect_counter(a.statistics().bytes, 100, 100, 100, "after push, pop, failed pop");
  a.deallocate_sync(p, 100);
}

TEST(statistics_adaptor, FreesOfOlderMemoryMakeALevelNegative)
{
  // RMM's StatisticsTest.NegativeInnerTracking: frees inside a level of what was allocated below.
  adaptor a{fake_resource{}};
  std::vector<void*> below;
  for (int i = 0; i < 10; ++i) {
    below.push_back(a.allocate_sync(64));
  }
  (void)a.push_counters();
  std::vector<void*> inside;
  for (int i = 0; i < 5; ++i) {
    inside.push_back(a.allocate_sync(64));
  }
  for (void* p : below) {
    a.deallocate_sync(p, 64);
  }
  expect_counter(a.statistics().bytes, -5 * 64, 5 * 64, 5 * 64, "the level");
  expect_counter(a.statistics().allocations, -5, 5, 5, "the level");
  for (void* p : inside) {
    a.deallocate_sync(p, 64);
  }
  allocation_statistics const popped = a.pop_counters();
  expect_counter(popped.bytes, -10 * 64, 5 * 64, 5 * 64, "the level, popped");
  expect_counter(a.statistics().bytes, 0, 15 * 64, 15 * 64, "the adaptor's own");
  expect_counter(a.statistics().allocations, 0, 15, 15, "the adaptor's own");
}

TEST(statistics_adaptor, ResetPeakAndCopiesActOnTheTopLevel)
{
  adaptor a{fake_resource{}};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  void* p      = a.allocate_sync(1000);
  a.deallocate_sync(p, 1000);  // the adaptor's own peak: 1000
  (void)copy.push_counters();  // copies share the levels
  void* q = a.allocate_sync(300);
  void* r = a.allocate_sync(200);
  a.deallocate_sync(q, 300);
  expect_counter(copy.statistics().bytes, 200, 500, 500, "the level, through the copy");
  a.reset_peak();
  expect_counter(copy.statistics().bytes, 200, 200, 500, "the level's peak reset");
  (void)a.pop_counters();
  // The adaptor's own peak was kept: the higher of 1000 and 0 + 200.
  expect_counter(copy.statistics().bytes, 200, 1000, 1500, "the adaptor's own");
  copy.deallocate_sync(r, 200);
  adaptor other{fake_resource{}};  // constructed apart: no level to pop
  EXPECT_THROW((void)other.pop_counters(), std::out_of_range);
}

TEST(statistics_adaptor, CopiesShareCountersSeparateAdaptorsDoNot)
{
  fake_resource upstream;
  adaptor a{upstream};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  adaptor other{upstream};
  EXPECT_TRUE(a == copy);
  EXPECT_FALSE(a == other);
  EXPECT_TRUE(a.upstream_resource() == other.upstream_resource());

  void* p = copy.allocate_sync(10);
  void* q = other.allocate_sync(20);
  EXPECT_EQ(a.statistics().bytes.current, 10);
  EXPECT_EQ(other.statistics().bytes.current, 20);
  a.deallocate_sync(p, 10);  // freed through another copy: same counters
  EXPECT_EQ(copy.statistics().bytes.current, 0);
  other.deallocate_sync(q, 20);

  other = a;  // assignment shares a's counters from now on
  EXPECT_TRUE(other == a);
  void* r = other.allocate_sync(5);
  EXPECT_EQ(a.statistics().bytes.current, 5);
  a.deallocate_sync(r, 5);
}

TEST(statistics_adaptor, NestedAdaptorsEachCountWhatPassesThem)
{
  // A library's own adaptor over a process-wide one: each sees what passes through it.
  adaptor process_wide{fake_resource{}};
  statistics_adaptor<host_device_async_resource_ref> library{
    host_device_async_resource_ref{process_wide}};
  void* p = library.allocate(no_stream(), 100);
  void* q = process_wide.allocate(no_stream(), 1);
  EXPECT_EQ(library.statistics().bytes.current, 100);
  EXPECT_EQ(process_wide.statistics().bytes.current, 101);
  library.deallocate(no_stream(), p, 100);
  process_wide.deallocate(no_stream(), q, 1);
  EXPECT_EQ(process_wide.statistics().bytes.current, 0);
  EXPECT_EQ(process_wide.statistics().allocations.total, 2);
  EXPECT_EQ(library.statistics().allocations.total, 1);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(statistics_adaptor, ExactUnderSixteenThreads)
{
  constexpr int threads         = 16;
  constexpr int churn           = 2000;  // alloc+free pairs per thread, one live at a time
  constexpr int held            = 8;     // then allocations held by each thread at once
  constexpr std::size_t quantum = 64;    // thread t allocates (t + 1) * quantum bytes

  fake_resource upstream;
  adaptor a{upstream};
  std::barrier sync{threads + 1};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::size_t const bytes = static_cast<std::size_t>(t + 1) * quantum;
      adaptor mine            = a;  // copies share the counters
      for (int i = 0; i < churn; ++i) {
        void* p = (i % 2 == 0) ? mine.allocate_sync(bytes) : mine.allocate(no_stream(), bytes);
        mine.deallocate_sync(p, bytes);
      }
      std::vector<void*> ptrs;
      for (int i = 0; i < held; ++i) {
        ptrs.push_back(mine.allocate(no_stream(), bytes));
      }
      sync.arrive_and_wait();  // 1: everything held
      sync.arrive_and_wait();  // 2: the main thread has looked
      for (void* p : ptrs) {
        mine.deallocate(no_stream(), p, bytes);
      }
    });
  }
  std::int64_t bytes_per_round = 0;  // one allocation of every thread
  for (int t = 0; t < threads; ++t) {
    bytes_per_round += (t + 1) * static_cast<std::int64_t>(quantum);
  }

  sync.arrive_and_wait();  // 1
  // During the churn at most one allocation per thread was live: below what is held now, so the
  // peak is exactly the held total (the CAS loop lost no update).
  allocation_statistics const at_peak = a.statistics();
  expect_counter(at_peak.bytes,
                 held * bytes_per_round,
                 held * bytes_per_round,
                 (churn + held) * bytes_per_round,
                 "bytes while held");
  expect_counter(at_peak.allocations,
                 threads * held,
                 threads * held,
                 threads * (churn + held),
                 "allocations while held");
  sync.arrive_and_wait();  // 2
  for (auto& th : pool) {
    th.join();
  }

  allocation_statistics const done = a.statistics();
  expect_counter(
    done.bytes, 0, held * bytes_per_round, (churn + held) * bytes_per_round, "bytes at the end");
  expect_counter(
    done.allocations, 0, threads * held, threads * (churn + held), "allocations at the end");
  EXPECT_EQ(upstream.allocations(), threads * (churn + held));
  EXPECT_EQ(upstream.deallocations(), threads * (churn + held));
}

TEST(statistics_adaptor, LevelsMeasurePhasesOfThreadsExactly)
{
  // Phases between barriers: each level counts exactly what the threads did inside it.
  constexpr int threads = 8;
  constexpr int held    = 16;
  adaptor a{fake_resource{}};
  std::barrier sync{threads + 1};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      adaptor mine            = a;
      std::size_t const bytes = static_cast<std::size_t>(t + 1) * 32;
      std::vector<void*> ptrs;
      sync.arrive_and_wait();  // 1: a level was pushed
      for (int i = 0; i < held; ++i) {
        ptrs.push_back(mine.allocate(no_stream(), bytes));
      }
      sync.arrive_and_wait();  // 2: counted
      sync.arrive_and_wait();  // 3: a second level was pushed
      for (void* p : ptrs) {
        mine.deallocate_sync(p, bytes);
      }
      sync.arrive_and_wait();  // 4: freed
    });
  }
  std::int64_t per_round = 0;
  for (int t = 0; t < threads; ++t) {
    per_round += (t + 1) * 32;
  }
  (void)a.push_counters();
  sync.arrive_and_wait();  // 1
  sync.arrive_and_wait();  // 2
  expect_counter(
    a.statistics().bytes, held * per_round, held * per_round, held * per_round, "phase 1");
  (void)a.push_counters();
  sync.arrive_and_wait();  // 3
  sync.arrive_and_wait();  // 4
  expect_counter(a.statistics().bytes, -held * per_round, 0, 0, "phase 2: frees only");
  expect_counter(a.statistics().allocations, -threads * held, 0, 0, "phase 2: frees only");
  for (auto& th : pool) {
    th.join();
  }
  (void)a.pop_counters();
  expect_counter(a.statistics().bytes, 0, held * per_round, held * per_round, "phases 1 and 2");
  (void)a.pop_counters();
  expect_counter(a.statistics().allocations, 0, threads * held, threads * held, "the adaptor's");
}

TEST(statistics_adaptor, PushAndPopRacingAllocationsLeaveTheAdaptorsOwnCountsExact)
{
  // Calls in flight during a push or a pop may land on either side of it, but once every level is
  // popped the adaptor's own current and total are exact.
  constexpr int threads    = 8;
  constexpr int iterations = 5000;
  adaptor a{fake_resource{}};
  std::atomic<bool> done{false};
  std::thread levels{[&] {
    int depth = 0;
    while (!done.load()) {
      if (depth < 3) {
        (void)a.push_counters();
        ++depth;
      } else {
        while (depth > 0) {
          (void)a.pop_counters();
          --depth;
        }
      }
      (void)a.statistics();
    }
    while (depth-- > 0) {
      (void)a.pop_counters();
    }
  }};
  std::vector<void*> kept(threads);  // one allocation of each thread, held to the end
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::size_t const bytes           = static_cast<std::size_t>(t + 1) * 8;
      kept[static_cast<std::size_t>(t)] = a.allocate_sync(bytes);
      for (int i = 0; i < iterations; ++i) {
        a.deallocate_sync(a.allocate_sync(bytes), bytes);
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  done = true;
  levels.join();
  EXPECT_THROW((void)a.pop_counters(), std::out_of_range);  // every level was popped
  std::int64_t kept_bytes = 0;
  for (int t = 0; t < threads; ++t) {
    kept_bytes += (t + 1) * 8;
  }
  allocation_statistics const s = a.statistics();
  EXPECT_EQ(s.bytes.current, kept_bytes);
  EXPECT_EQ(s.bytes.total, kept_bytes * (iterations + 1));
  EXPECT_EQ(s.allocations.current, threads);
  EXPECT_EQ(s.allocations.total, threads * (iterations + 1));
  EXPECT_GE(s.bytes.peak, kept_bytes);
  for (int t = 0; t < threads; ++t) {
    a.deallocate_sync(kept[static_cast<std::size_t>(t)], static_cast<std::size_t>(t + 1) * 8);
  }
  EXPECT_EQ(a.statistics().allocations.current, 0);
}

}  // namespace
}  // namespace rmm_next::test
