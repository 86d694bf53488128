/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so without a GPU: its bookkeeping (the live allocations, per-thread
// counters, the live bytes' peak, deferred frees) and the C interface's behaviour when no driver or
// device exists.

#include "device_choice.hpp"
#include "live_allocations.hpp"
#include "plugin_counters.hpp"
#include "stream_order.hpp"
#include "vmm_devices.hpp"

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/detail/peak_counter.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace rmm_next::plugin;

void* address(std::uintptr_t n) { return reinterpret_cast<void*>(n); }
cudaStream_t stream(std::uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

allocation_record record_of(std::size_t bytes, cudaStream_t on, int device)
{
  return allocation_record{.bytes = bytes, .stream = on, .device = device, .users = {}};
}

TEST(LiveAllocations, KeepEachRecordUntilItIsTakenOnce)
{
  live_allocations live;
  EXPECT_FALSE(live.insert(address(0x1000), record_of(100, stream(0x10), 0)).has_value());
  EXPECT_FALSE(live.insert(address(0x2000), record_of(200, stream(0x20), 1)).has_value());
  EXPECT_EQ(live.size(), 2U);
  EXPECT_EQ(live.bytes(), 300U);
  auto const a = live.take(address(0x1000));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->bytes, 100U);
  EXPECT_EQ(a->stream, stream(0x10));
  EXPECT_EQ(a->device, 0);
  EXPECT_FALSE(live.take(address(0x1000)).has_value());  // taken once
  EXPECT_FALSE(live.take(address(0x1100)).has_value());  // inside no block's start
  EXPECT_FALSE(live.take(address(0x3000)).has_value());  // never inserted
  EXPECT_EQ(live.size(), 1U);
  EXPECT_EQ(live.bytes(), 200U);
  EXPECT_TRUE(live.erase(address(0x2000)));
  EXPECT_FALSE(live.erase(address(0x2000)));
  EXPECT_EQ(live.bytes(), 0U);
}

// A pointer handed out again without a free seen (the resource was given it back behind the
// registry's back): the new record replaces the old, which the insert returns, and the sum of the
// bytes follows.
TEST(LiveAllocations, AnInsertOfALivePointerReplacesAndReturnsItsRecord)
{
  live_allocations live;
  (void)live.insert(address(0x1000), record_of(100, stream(0x10), 0));
  auto const replaced = live.insert(address(0x1000), record_of(40, stream(0x20), 1));
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->bytes, 100U);
  EXPECT_EQ(live.size(), 1U);
  EXPECT_EQ(live.bytes(), 40U);
  EXPECT_EQ(live.take(address(0x1000))->device, 1);
}

TEST(LiveAllocations, TakeIfLeavesARefusedRecordLive)
{
  live_allocations live;
  allocation_record vmm = record_of(100, stream(0x10), 0);
  vmm.by                = served_by::vmm_resource;
  (void)live.insert(address(0x1000), std::move(vmm));
  auto const pool_only = [](allocation_record const& r) {
    return r.by == served_by::device_resource;
  };
  EXPECT_FALSE(live.take_if(address(0x1000), pool_only).has_value());
  EXPECT_EQ(live.size(), 1U);
  EXPECT_FALSE(live.take_if(address(0x2000), pool_only).has_value());
  auto const taken =
    live.take_if(address(0x1000), [](allocation_record const& r) { return r.bytes == 100; });
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->by, served_by::vmm_resource);
  EXPECT_EQ(live.size(), 0U);
}

TEST(LiveAllocations, UpdateChangesOnlyALiveRecord)
{
  live_allocations live;
  auto const record_on = [](cudaStream_t s) {
    return [s](allocation_record& r) { r.users.push_back(s); };
  };
  EXPECT_FALSE(live.update(address(0x100), record_on(stream(0x10))));
  EXPECT_EQ(live.size(), 0U);  // nothing made for an unknown pointer
  (void)live.insert(address(0x100), record_of(8, stream(0x1), 0));
  EXPECT_TRUE(live.update(address(0x100), record_on(stream(0x10))));
  EXPECT_TRUE(live.update(address(0x100), record_on(stream(0x20))));
  auto const r = live.take(address(0x100));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->users, (std::vector<cudaStream_t>{stream(0x10), stream(0x20)}));
}

TEST(LiveAllocations, ForEachReachesEveryRecordToChangeIt)
{
  live_allocations live;
  for (std::uintptr_t i = 0; i < 1000; ++i) {
    (void)live.insert(address(0x10000 + i * 256),
                      record_of(i, stream(i % 2 == 0 ? 0x10 : 0x20), int(i % 3)));
  }
  std::size_t visited = 0;
  live.for_each([&](void*, allocation_record& r) {
    ++visited;
    if (r.stream == stream(0x10)) { r.stream = stream(0x1); }
  });
  EXPECT_EQ(visited, 1000U);
  for (std::uintptr_t i = 0; i < 1000; ++i) {
    auto const r = live.take(address(0x10000 + i * 256));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->stream, stream(i % 2 == 0 ? 0x1 : 0x20));
  }
}

// Threads allocate and free at once, each its own pointers: every record is found once, and the
// count and the sum of bytes are exact afterwards.
TEST(LiveAllocations, ThreadsInsertAndTakeAtOnceAndTheSumsStayExact)
{
  live_allocations live;
  constexpr std::uintptr_t threads    = 8;
  constexpr std::uintptr_t per_thread = 2000;
  std::atomic<std::size_t> missing{0};
  std::vector<std::thread> workers;
  for (std::uintptr_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::uintptr_t i = 0; i < per_thread; ++i) {
        (void)live.insert(address((t * per_thread + i + 1) * 256), record_of(3, stream(t), 0));
      }
      for (std::uintptr_t i = 0; i < per_thread; i += 2) {  // every other one freed
        if (!live.take(address((t * per_thread + i + 1) * 256))) { missing.fetch_add(1); }
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  EXPECT_EQ(missing.load(), 0U);
  EXPECT_EQ(live.size(), threads * per_thread / 2);
  EXPECT_EQ(live.bytes(), 3 * threads * per_thread / 2);
}

TEST(Counters, ThreadsCountApartAndSumsSurviveThreadExit)
{
  counter_registry registry{2};
  constexpr int threads    = 8;
  constexpr int per_thread = 1000;
  for (int round = 0; round < 2; ++round) {  // the second round reuses the exited threads' blocks
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&registry, t] {
        for (int i = 0; i < per_thread; ++i) {
          counts_ref const c = local_counts(registry, t % 2);
          bump(c->allocations[static_cast<std::size_t>(source::cupy)]);
          bump(c->bytes_allocated, 10);
        }
        for (int i = 0; i < per_thread / 2; ++i) {
          counts_ref const c = local_counts(registry, t % 2);
          bump(c->deallocations);
          bump(c->bytes_freed, 10);
        }
      });
    }
    for (auto& w : workers) {
      w.join();
    }
  }
  for (std::size_t d = 0; d < 2; ++d) {
    count_totals const t = registry.totals(d);
    EXPECT_EQ(t.allocations[static_cast<std::size_t>(source::cupy)], 2U * 4 * per_thread);
    EXPECT_EQ(t.bytes_allocated - t.bytes_freed, 2U * 4 * per_thread * 10 / 2);
  }
  EXPECT_EQ(local_counts(registry, 2).get(), nullptr);  // out of range: not counted
  EXPECT_EQ(local_counts(registry, -1).get(), nullptr);
}

// A thread's counter block goes back to the registry when the thread exits, and the next new thread
// takes it. A thread_local destroyed after that (constructed before the thread first counted) may
// still free through the plugin: its count must not go into the block another thread now holds.
TEST(Counters, ACountAfterTheThreadsBlockWentBackLeavesOtherThreadsBlocksAlone)
{
  counter_registry registry{1};
  // 1: the first thread's block went back; 2: the second thread holds a block; 3: the first
  // thread counted once more.
  std::atomic<int> stage{0};
  struct late_count {
    counter_registry* registry{};
    std::atomic<int>* stage{};
    ~late_count()
    {
      if (registry == nullptr) { return; }
      stage->store(1);
      stage->notify_all();
      stage->wait(1);
      if (auto const c = local_counts(*registry, 0)) { bump(c->deallocations); }
      stage->store(3);
      stage->notify_all();
    }
  };
  std::thread exiting{[&] {
    thread_local late_count
      late;  // constructed first: destroyed after the thread's block went back
    late.registry = &registry;
    late.stage    = &stage;
    auto const c  = local_counts(registry, 0);
    bump(c->deallocations);
  }};
  std::uint64_t before{};
  std::uint64_t after{};
  std::thread next{[&] {
    stage.wait(0);
    auto const c = local_counts(registry, 0);  // the block the exiting thread gave back
    before       = c->deallocations.load();
    stage.store(2);
    stage.notify_all();
    while (stage.load() != 3) {
      stage.wait(2);
    }
    after = c->deallocations.load();
  }};
  exiting.join();
  next.join();
  EXPECT_EQ(after, before) << "an exiting thread counted into another thread's block";
  EXPECT_EQ(registry.totals(0).deallocations, 2U);  // both counts of the exiting thread
}

TEST(PeakCounter, KeepsTheHighestLevelUntilReset)
{
  rmm_next::detail::peak_counter p;
  p.add(100);
  p.add(50);
  p.sub(120);
  EXPECT_EQ(p.peak(), 150);
  EXPECT_EQ(p.current(), 30);
  p.reset_peak();  // from the level now
  EXPECT_EQ(p.peak(), 30);
  p.add(10);
  EXPECT_EQ(p.peak(), 40);
  p.sub(40);
  EXPECT_EQ(p.peak(), 40);
  p.reset_peak();
  EXPECT_EQ(p.peak(), 0);
}

// Threads each hold `held` bytes at once at some point; the peak is at least one thread's hold and
// at most all of them together, and the level at the end is exact.
TEST(PeakCounter, ThreadsRaiseOneSharedWatermark)
{
  rmm_next::detail::peak_counter p;
  constexpr int threads       = 8;
  constexpr std::int64_t held = 1000;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&p] {
      for (int round = 0; round < 200; ++round) {
        for (std::int64_t i = 0; i < held / 10; ++i) {
          p.add(10);
        }
        for (std::int64_t i = 0; i < held / 10; ++i) {
          p.sub(10);
        }
      }
      p.add(7);
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  EXPECT_GE(p.peak(), held);
  EXPECT_LE(p.peak(), threads * held + threads * 7);
  EXPECT_EQ(p.current(), threads * 7);
  p.reset_peak();
  EXPECT_EQ(p.peak(), threads * 7);
}

class WithoutDevice : public ::testing::Test {
 protected:
  void SetUp() override
  {
    int count{};
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
      GTEST_SKIP() << "a CUDA device is present: the no-device paths are not reached";
    }
    (void)cudaGetLastError();
  }
};

TEST_F(WithoutDevice, DeferredFreesAreReadyWhenNothingCaptures)
{
  deferred_frees deferred;
  deferred.push({address(0x100), stream(0x10), record_of(10, stream(0x10), 0)});
  EXPECT_EQ(deferred.count(), 1U);
  EXPECT_EQ(deferred.take_ready().size(), 1U);
  EXPECT_EQ(deferred.count(), 0U);
}

TEST_F(WithoutDevice, EveryEntryPointFailsWithoutThrowing)
{
  EXPECT_EQ(rmm_next_abi_version(), RMM_NEXT_ALLOCATOR_ABI_VERSION);
  EXPECT_EQ(rmm_next_device_count(), -1);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("no usable CUDA driver or device"),
            std::string::npos);
  EXPECT_EQ(rmm_next_torch_alloc(1024, 0, nullptr), nullptr);
  EXPECT_EQ(rmm_next_torch_segment_alloc(1 << 21, 0, nullptr), nullptr);
  EXPECT_EQ(rmm_next_cupy_malloc(nullptr, 1024, 0), nullptr);
  EXPECT_EQ(rmm_next_numba_alloc(1024, 0), nullptr);
  EXPECT_EQ(rmm_next_allocate(1024, -1, nullptr), nullptr);
  rmm_next_torch_free(address(0x100), 1024, 0, nullptr);
  rmm_next_cupy_free(nullptr, address(0x100), 0);
  rmm_next_numba_free(address(0x100), 1024, 0);
  rmm_next_deallocate(address(0x100), 1024, 0, nullptr);
  rmm_next_torch_record_stream(address(0x100), nullptr);
  rmm_next_torch_empty_cache();
  rmm_next_cupy_forget_stream(stream(0x10));
  EXPECT_EQ(rmm_next_use_current_pool(-1), -1);
  EXPECT_EQ(rmm_next_use_owned_pool(0, nullptr), -1);
  EXPECT_EQ(rmm_next_use_managed_memory(0), -1);
  EXPECT_EQ(rmm_next_enable_thread_cache(-1, nullptr), -1);
  EXPECT_EQ(rmm_next_disable_thread_cache(-1), -1);
  EXPECT_EQ(rmm_next_enable_segment_cache(-1, nullptr), -1);
  EXPECT_EQ(rmm_next_disable_segment_cache(-1), -1);
  rmm_next_segment_cache_statistics segments{};
  EXPECT_EQ(rmm_next_get_segment_cache_statistics(0, &segments), -1);
  EXPECT_EQ(rmm_next_release_unused(-1), -1);
  rmm_next_statistics stats{};
  EXPECT_EQ(rmm_next_get_statistics(0, &stats), -1);
  EXPECT_EQ(rmm_next_reset_peak_statistics(-1), -1);
  std::size_t free_bytes{}, total_bytes{};
  EXPECT_EQ(rmm_next_mem_get_info(0, &free_bytes, &total_bytes), -1);
  std::uint64_t attribute{};
  EXPECT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolAttrReservedMemHigh, &attribute), -1);
  EXPECT_EQ(rmm_next_set_tracking(1, 0), -1);  // needs the device count
  EXPECT_EQ(rmm_next_outstanding(-1), -1);
  EXPECT_EQ(rmm_next_flush_log(), 0);  // no log is open
  // (Without a driver every runtime call, cudaGetLastError included, keeps reporting it.)
  EXPECT_EQ(rmm_next_vmm_configure(0, nullptr), -1);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("no usable CUDA driver or device"),
            std::string::npos);
  EXPECT_EQ(rmm_next_vmm_alloc(1 << 21, 0, nullptr), nullptr);
  rmm_next_vmm_free(address(0x100), 1 << 21, 0, nullptr);
  rmm_next_vmm_statistics vmm_stats{};
  EXPECT_EQ(rmm_next_vmm_get_statistics(0, &vmm_stats), -1);
  EXPECT_EQ(rmm_next_vmm_segments(0, nullptr, nullptr, 0), -1);
}

// The layouts python/rmm_next/_lib.py declares (VmmOptions, VmmStatistics).
static_assert(sizeof(rmm_next_vmm_options) == 8 + 4 * 4);
static_assert(offsetof(rmm_next_vmm_options, handle_types) == 8);
static_assert(sizeof(rmm_next_vmm_statistics) == 8 * 8 + 4 * 4);
static_assert(offsetof(rmm_next_vmm_statistics, made) == 8 * 8 + 3 * 4);

static_assert(sizeof(rmm_next_segment_cache_options) == 2 * sizeof(std::size_t) + 8);
static_assert(offsetof(rmm_next_segment_cache_options, max_idle_fraction) ==
              2 * sizeof(std::size_t));

TEST(SegmentCacheOptions, TheCBoundsMapToTheCachesOptions)
{
  constexpr std::size_t mib = std::size_t{1} << 20;
  rmm_next::segment_cache_options const defaults{};
  auto const mapped = [](std::size_t bytes, double fraction) {
    rmm_next_segment_cache_options const o{bytes, 0, fraction};
    return rmm_next::plugin::to_segment_options(&o);
  };
  struct expected_bounds {
    std::size_t bytes;
    double fraction;
  };
  auto const expect = [](rmm_next::segment_cache_options const& o, expected_bounds e) {
    EXPECT_EQ(o.max_idle_bytes, e.bytes);
    EXPECT_EQ(o.max_idle_fraction, e.fraction);
  };
  expect(rmm_next::plugin::to_segment_options(nullptr),
         {defaults.max_idle_bytes, defaults.max_idle_fraction});
  expect(mapped(SIZE_MAX, 0.0), {defaults.max_idle_bytes, defaults.max_idle_fraction});
  expect(mapped(32 * mib, 0.0), {32 * mib, 0.0});  // a byte bound alone, as before
  expect(mapped(32 * mib, 0.5), {32 * mib, 0.5});
  expect(mapped(SIZE_MAX, 1.0), {defaults.max_idle_bytes, 1.0});
  expect(mapped(SIZE_MAX, -1.0), {defaults.max_idle_bytes, 0.0});             // negative: none
  EXPECT_TRUE(std::isnan(mapped(SIZE_MAX, std::nan("")).max_idle_fraction));  // the cache refuses
  EXPECT_EQ(rmm_next::plugin::to_segment_options(nullptr).fence_interval, defaults.fence_interval);
}

TEST(VmmOptions, TheCDefaultsAreThoseOfVmmOptionsAndMapBack)
{
  rmm_next_vmm_options const d = rmm_next::plugin::normalized_vmm_options(nullptr);
  EXPECT_EQ(d.segment_size, std::size_t{64} << 20);
  EXPECT_EQ(d.handle_types, RMM_NEXT_VMM_HANDLE_POSIX_FD | RMM_NEXT_VMM_HANDLE_FABRIC);
  EXPECT_EQ(d.granularity, rmm_next_vmm_granularity_recommended);
  EXPECT_EQ(d.peer_access, 1);
  EXPECT_EQ(d.gpu_direct_rdma, 1);
  rmm_next::vmm_options const v = rmm_next::plugin::to_vmm_options(d);
  rmm_next::vmm_options const expected{};
  EXPECT_EQ(v.segment_size, expected.segment_size);
  EXPECT_EQ(v.handle_types, expected.handle_types);
  EXPECT_EQ(v.granularity, expected.granularity);
  EXPECT_EQ(v.access, expected.access);
  EXPECT_EQ(v.gpu_direct_rdma, expected.gpu_direct_rdma);
}

TEST(VmmOptions, NormalizingFillsTheSizeAndFlagsAndChecksTheRest)
{
  rmm_next_vmm_options o{0, RMM_NEXT_VMM_HANDLE_POSIX_FD, rmm_next_vmm_granularity_minimum, 7, 0};
  rmm_next_vmm_options const n = rmm_next::plugin::normalized_vmm_options(&o);
  EXPECT_EQ(n.segment_size, std::size_t{64} << 20);
  EXPECT_EQ(n.peer_access, 1);
  EXPECT_TRUE(
    rmm_next::plugin::same_vmm_options(n, rmm_next_vmm_options{std::size_t{64} << 20, 1, 1, 1, 0}));
  EXPECT_FALSE(
    rmm_next::plugin::same_vmm_options(n, rmm_next_vmm_options{std::size_t{32} << 20, 1, 1, 1, 0}));
  rmm_next::vmm_options const v = rmm_next::plugin::to_vmm_options(n);
  EXPECT_EQ(v.handle_types, rmm_next::vmm_handle_types::posix_fd);
  EXPECT_EQ(v.granularity, rmm_next::vmm_granularity::minimum);
  EXPECT_FALSE(v.gpu_direct_rdma);
  o.handle_types = 0x2;  // a Win32 handle: not for NCCL
  EXPECT_THROW((void)rmm_next::plugin::normalized_vmm_options(&o), std::invalid_argument);
  o.handle_types = RMM_NEXT_VMM_HANDLE_FABRIC;
  o.granularity  = 3;
  EXPECT_THROW((void)rmm_next::plugin::normalized_vmm_options(&o), std::invalid_argument);
}

}  // namespace
