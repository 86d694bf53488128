/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// per_device_resource_map with resources that need no GPU (the device count is given), plus the
// few behaviours that depend on whether a CUDA driver is present.

#include "support/fake_resource.hpp"
#include "support/heap_bytes.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using rmm_next::device_async_resource_ref;
using rmm_next::test::allocates_from;
using rmm_next::test::fake_resource;
using rmm_next::test::heap_bytes;
using device_map = rmm_next::per_device_resource_map<device_async_resource_ref>;

constexpr int num_devices = 4;

/** Resources made ahead of time; the factory hands out copies (which compare equal). */
struct fixture_resources {
  std::vector<fake_resource> initial;
  std::atomic<int> factory_calls{0};
  std::vector<std::atomic<int>> calls_per_device;

  explicit fixture_resources(int count) : calls_per_device(static_cast<std::size_t>(count))
  {
    for (int d = 0; d < count; ++d) {
      initial.emplace_back(100 + d);
    }
  }

  auto factory()
  {
    return [this](int device) {
      factory_calls.fetch_add(1);
      calls_per_device[static_cast<std::size_t>(device)].fetch_add(1);
      return initial[static_cast<std::size_t>(device)];
    };
  }
};

template <class Ref>
bool same(Ref const& lhs, Ref const& rhs)
{
  return lhs == rhs;
}

/** Runs `f`, expects std::out_of_range whose message names `device` and `count`. */
template <class F>
void expect_out_of_range(F&& f, int device, int count)
{
  try {
    f();
    ADD_FAILURE() << "no exception for device id " << device;
  } catch (std::out_of_range const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("device id " + std::to_string(device) + " "), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(count) + " device(s)"), std::string::npos) << what;
  }
}

TEST(PerDeviceResourceMap, FactoryRunsOnFirstUseOncePerDevice)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  EXPECT_EQ(map.device_count(), num_devices);
  EXPECT_EQ(res.factory_calls.load(), 0);

  EXPECT_TRUE(same(map.get(1), device_async_resource_ref{res.initial[1]}));
  EXPECT_TRUE(same(map.get(1), device_async_resource_ref{res.initial[1]}));
  EXPECT_EQ(res.factory_calls.load(), 1);
  EXPECT_EQ(res.calls_per_device[1].load(), 1);

  for (int d = 0; d < num_devices; ++d) {
    EXPECT_TRUE(same(map.get(d), device_async_resource_ref{res.initial[d]}));
  }
  EXPECT_EQ(res.factory_calls.load(), num_devices);
}

TEST(PerDeviceResourceMap, SetReturnsPreviousAndGetSeesIt)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  fake_resource a{1};
  fake_resource b{2};

  (void)map.get(2);  // the factory's resource exists: set returns it
  auto previous = map.set(2, device_async_resource_ref{a});
  EXPECT_TRUE(same(previous, device_async_resource_ref{res.initial[2]}));
  EXPECT_TRUE(same(map.get(2), device_async_resource_ref{a}));
  EXPECT_TRUE(allocates_from(map.get(2), a));

  previous = map.set(2, device_async_resource_ref{b});
  EXPECT_TRUE(same(previous, device_async_resource_ref{a}));
  EXPECT_TRUE(same(map.get(2), device_async_resource_ref{b}));

  // Other devices are untouched.
  EXPECT_TRUE(same(map.get(1), device_async_resource_ref{res.initial[1]}));
  EXPECT_TRUE(same(map.get(3), device_async_resource_ref{res.initial[3]}));

  // The restore idiom: setting the previous ref back.
  map.set(2, previous);
  EXPECT_TRUE(same(map.get(2), device_async_resource_ref{a}));
}

TEST(PerDeviceResourceMap, ResetReturnsToTheFactoryResource)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  fake_resource a{1};

  map.set(0, device_async_resource_ref{a});
  auto const previous = map.reset(0);
  EXPECT_TRUE(same(previous, device_async_resource_ref{a}));
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{res.initial[0]}));

  // Reset of a device still on its initial resource returns that resource and keeps it.
  EXPECT_TRUE(same(map.reset(0), device_async_resource_ref{res.initial[0]}));
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{res.initial[0]}));

  for (int round = 0; round < 10; ++round) {
    map.set(0, device_async_resource_ref{a});
    map.reset(0);
  }
  EXPECT_EQ(res.calls_per_device[0].load(), 1) << "the factory's resource is made once";
}

TEST(PerDeviceResourceMap, SetBeforeFirstUseDoesNotRunTheFactory)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  fake_resource a{1};

  // Nothing was there: set returns a stand-in for the factory's resource, not the resource.
  auto const previous = map.set(3, device_async_resource_ref{a});
  EXPECT_EQ(res.factory_calls.load(), 0);
  EXPECT_TRUE(same(map.get(3), device_async_resource_ref{a}));
  EXPECT_EQ(res.factory_calls.load(), 0);

  // Setting it back is a reset: the factory runs on the device's next use, once.
  EXPECT_TRUE(same(map.set(3, previous), device_async_resource_ref{a}));
  EXPECT_EQ(res.factory_calls.load(), 0);
  EXPECT_TRUE(same(map.get(3), device_async_resource_ref{res.initial[3]}));
  EXPECT_EQ(res.calls_per_device[3].load(), 1);
  EXPECT_TRUE(same(map.get(3), device_async_resource_ref{res.initial[3]}));
  EXPECT_EQ(res.calls_per_device[3].load(), 1);
}

TEST(PerDeviceResourceMap, ResetBeforeFirstUseDoesNotRunTheFactory)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  (void)map.reset(1);
  fake_resource a{1};
  map.set(2, device_async_resource_ref{a});
  EXPECT_TRUE(same(map.reset(2), device_async_resource_ref{a}));
  EXPECT_EQ(res.factory_calls.load(), 0);
  EXPECT_TRUE(same(map.get(1), device_async_resource_ref{res.initial[1]}));
  EXPECT_TRUE(same(map.get(2), device_async_resource_ref{res.initial[2]}));
  EXPECT_EQ(res.factory_calls.load(), 2);
}

TEST(PerDeviceResourceMap, TheStandInAllocatesFromTheFactorysResource)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  fake_resource a{1};
  device_async_resource_ref const stand_in = map.set(0, device_async_resource_ref{a});
  EXPECT_FALSE(same(stand_in, device_async_resource_ref{res.initial[0]}));
  EXPECT_EQ(res.factory_calls.load(), 0);

  // Its first allocation makes the factory's resource (once) and allocates from it.
  EXPECT_TRUE(allocates_from(stand_in, res.initial[0]));
  EXPECT_EQ(res.calls_per_device[0].load(), 1);
  cuda::stream_ref const stream{cudaStream_t{}};  // the fake resource never touches the stream
  device_async_resource_ref ref = stand_in;
  void* ptr                     = ref.allocate(stream, 64, 64);
  ref.deallocate(stream, ptr, 64, 64);
  EXPECT_EQ(res.calls_per_device[0].load(), 1);
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{a})) << "still set";

  // Restoring it is still a reset, now to the resource it made.
  map.set(0, stand_in);
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{res.initial[0]}));
  EXPECT_EQ(res.calls_per_device[0].load(), 1);
}

TEST(PerDeviceResourceMap, SynchronousRefsHaveAStandInToo)
{
  std::atomic<int> calls{0};
  fake_resource initial{1};
  fake_resource other{2};
  rmm_next::per_device_resource_map<rmm_next::device_resource_ref> map{[&](int) {
                                                                         ++calls;
                                                                         return initial;
                                                                       },
                                                                       1};
  auto const previous = map.set(0, rmm_next::device_resource_ref{other});
  EXPECT_EQ(calls.load(), 0);
  EXPECT_TRUE(allocates_from(previous, initial));
  EXPECT_EQ(calls.load(), 1);
}

TEST(PerDeviceResourceMap, CurrentDeviceMembersMatchExplicitOnes)
{
  // get_current() asks CUDA for the current device; without a driver it throws cuda_error.
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  int device{};
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    EXPECT_THROW((void)map.get_current(), rmm_next::cuda_error);
    try {
      (void)map.get_current();
    } catch (rmm_next::cuda_error const& e) {
      // The member the user called and the CUDA function, not the source text of the call.
      std::string const what = e.what();
      EXPECT_EQ(
        what.rfind("rmm_next::per_device_resource_map::get_current: cudaGetDevice returned ", 0),
        0u)
        << what;
      EXPECT_EQ(what.find("&device"), std::string::npos) << what;
    }
    fake_resource a{1};
    EXPECT_THROW(map.set_current(device_async_resource_ref{a}), rmm_next::cuda_error);
    EXPECT_EQ(res.factory_calls.load(), 0);
    return;
  }
  if (device >= num_devices) { GTEST_SKIP() << "current device " << device << " >= 4"; }
  fake_resource a{1};
  map.set_current(device_async_resource_ref{a});
  EXPECT_TRUE(same(map.get(device), device_async_resource_ref{a}));
  EXPECT_TRUE(same(map.get_current(), device_async_resource_ref{a}));
  EXPECT_TRUE(same(map.reset_current(), device_async_resource_ref{a}));
  EXPECT_TRUE(same(map.get_current(), device_async_resource_ref{res.initial[device]}));
}

TEST(PerDeviceResourceMap, RefsHandedOutStayValidAfterReplacement)
{
  std::vector<std::weak_ptr<fake_resource::counters const>> made;
  {
    // The factory makes a fresh resource; only the map holds it.
    device_map map{[&made](int device) {
                     fake_resource r{device};
                     made.push_back(r.lifetime());
                     return r;
                   },
                   2};
    auto initial = map.get(0);
    fake_resource a{1};
    fake_resource b{2};
    auto const from_a = map.set(0, device_async_resource_ref{a});
    auto const ref_a  = map.get(0);
    map.set(0, device_async_resource_ref{b});
    map.reset(0);
    map.set(0, device_async_resource_ref{b});

    ASSERT_EQ(made.size(), 1U);
    EXPECT_FALSE(made[0].expired()) << "the map keeps what its factory made";
    // The ref to the factory's resource, replaced three times, still allocates from it.
    void* ptr = initial.allocate_sync(100, 256);
    ASSERT_NE(ptr, nullptr);
    EXPECT_EQ(made[0].lock()->allocations.load(), 1);
    initial.deallocate_sync(ptr, 100, 256);
    EXPECT_TRUE(same(from_a, initial));
    EXPECT_TRUE(allocates_from(ref_a, a));
  }
  ASSERT_EQ(made.size(), 1U);
  EXPECT_TRUE(made[0].expired()) << "what the factory made dies with the map";
}

TEST(PerDeviceResourceMap, FactoryMayReturnSharedPtrOrRef)
{
  auto shared = std::make_shared<fake_resource>(7);
  rmm_next::per_device_resource_map<device_async_resource_ref> shared_map{
    [shared](int) { return shared; }, 1};
  std::weak_ptr<fake_resource> watch = shared;
  shared.reset();
  EXPECT_FALSE(watch.expired()) << "the map shares ownership";
  EXPECT_TRUE(allocates_from(shared_map.get(0), *watch.lock()));

  fake_resource caller_owned{8};
  device_map ref_map{[&caller_owned](int) { return device_async_resource_ref{caller_owned}; }, 1};
  EXPECT_TRUE(same(ref_map.get(0), device_async_resource_ref{caller_owned}));
  EXPECT_TRUE(allocates_from(ref_map.get(0), caller_owned));
}

TEST(PerDeviceResourceMap, FactoryExceptionChangesNothing)
{
  int calls = 0;
  fake_resource good{1};
  device_map map{[&](int) {
                   if (++calls == 1) { throw std::runtime_error{"factory failed"}; }
                   return good;
                 },
                 1};
  EXPECT_THROW((void)map.get(0), std::runtime_error);
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{good}));
  EXPECT_EQ(calls, 2);
}

TEST(PerDeviceResourceMap, BadDeviceIdsThrowAndChangeNothing)
{
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  fake_resource a{1};
  fake_resource b{2};
  map.set(0, device_async_resource_ref{a});
  int const calls_before = res.factory_calls.load();

  for (int const bad : {-1, num_devices, num_devices + 3, INT_MAX, INT_MIN}) {
    expect_out_of_range([&] { (void)map.get(bad); }, bad, num_devices);
    expect_out_of_range([&] { map.set(bad, device_async_resource_ref{b}); }, bad, num_devices);
    expect_out_of_range([&] { map.reset(bad); }, bad, num_devices);
  }
  EXPECT_EQ(res.factory_calls.load(), calls_before);
  EXPECT_TRUE(same(map.get(0), device_async_resource_ref{a}));
  for (int d = 1; d < num_devices; ++d) {
    EXPECT_TRUE(same(map.get(d), device_async_resource_ref{res.initial[d]}));
  }
  EXPECT_EQ(b.allocations(), 0);
}

TEST(PerDeviceResourceMap, ZeroAndNegativeDeviceCounts)
{
  fixture_resources res{1};
  device_map empty{res.factory(), 0};
  EXPECT_EQ(empty.device_count(), 0);
  expect_out_of_range([&] { (void)empty.get(0); }, 0, 0);

  EXPECT_THROW((device_map{res.factory(), -1}), rmm_next::logic_error);
}

TEST(PerDeviceResourceMap, DeviceCountFromCudaWhenNotGiven)
{
  fixture_resources res{64};
  device_map map{res.factory()};
  int count{};
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    // No driver: the message says so, and nothing was made.
    try {
      (void)map.get(0);
      ADD_FAILURE() << "expected cuda_error without a CUDA driver";
    } catch (rmm_next::cuda_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("no usable CUDA driver or device"), std::string::npos)
        << e.what();
      EXPECT_EQ(std::string{e.what()}.rfind(
                  "rmm_next::per_device_resource_map::get: cudaGetDeviceCount returned ", 0),
                0u)
        << e.what();
    }
    EXPECT_THROW((void)map.device_count(), rmm_next::cuda_error);
    EXPECT_EQ(res.factory_calls.load(), 0);
    return;
  }
  EXPECT_EQ(map.device_count(), count);
  expect_out_of_range([&] { (void)map.get(count); }, count, count);
  if (count > 0) { EXPECT_TRUE(same(map.get(0), device_async_resource_ref{res.initial[0]})); }
}

TEST(PerDeviceResourceMap, SynchronousRefType)
{
  fake_resource initial{1};
  fake_resource other{2};
  rmm_next::per_device_resource_map<rmm_next::device_resource_ref> map{[&](int) { return initial; },
                                                                       2};
  EXPECT_TRUE(allocates_from(map.get(1), initial));
  EXPECT_TRUE(
    same(map.set(1, rmm_next::device_resource_ref{other}), rmm_next::device_resource_ref{initial}));
  EXPECT_TRUE(allocates_from(map.get(1), other));
  EXPECT_TRUE(same(map.reset(1), rmm_next::device_resource_ref{other}));
  EXPECT_TRUE(allocates_from(map.get(1), initial));
}

TEST(PerDeviceResourceMap, HostDeviceRefTypeAndStreamOrderedAllocation)
{
  using ref = rmm_next::host_device_async_resource_ref;
  fake_resource initial{1};
  fake_resource other{2};
  rmm_next::per_device_resource_map<ref> map{[&](int) { return initial; }, 2};
  map.set(0, ref{other});

  ref r = map.get(0);
  cuda::stream_ref const stream{cudaStream_t{}};  // the fake resource never touches the stream
  void* ptr = r.allocate(stream, 32, 32);
  ASSERT_NE(ptr, nullptr);
  static_cast<char*>(ptr)[0] = 'x';  // host-accessible
  r.deallocate(stream, ptr, 32, 32);
  EXPECT_EQ(other.allocations(), 1);
  EXPECT_EQ(other.deallocations(), 1);
  EXPECT_TRUE(allocates_from(map.get(1), initial));
}

TEST(PerDeviceResourceMap, ConcurrentFirstUseCallsTheFactoryOnce)
{
  constexpr int num_threads = 16;
  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  std::latch start{num_threads};
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      int const device = t % num_devices;
      start.arrive_and_wait();
      if (!same(map.get(device), device_async_resource_ref{res.initial[device]})) {
        mismatches.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(mismatches.load(), 0);
  for (int d = 0; d < num_devices; ++d) {
    EXPECT_EQ(res.calls_per_device[d].load(), 1);
  }
}

TEST(PerDeviceResourceMap, ReadersSeeOnlyRefsThatWereSetWhileWritersSetAndReset)
{
  constexpr int num_readers       = 16;
  constexpr int num_writers       = 2;
  constexpr int writes_per_thread = 2000;
  constexpr int min_reads         = 2000;

  fixture_resources res{num_devices};
  device_map map{res.factory(), num_devices};
  // Per writer, its own resources; every ref a reader may see is initial[d] or one of these.
  std::vector<fake_resource> set_resources;
  for (int i = 0; i < num_writers * 3; ++i) {
    set_resources.emplace_back(i);
  }
  // What a setter gets for a device that had no ref yet: the stand-in for initial[d].
  std::vector<device_async_resource_ref> stand_ins;
  for (int d = 0; d < num_devices; ++d) {
    stand_ins.push_back(map.reset(d));
  }

  auto const allowed = [&](device_async_resource_ref const& r, int device) {
    if (same(r, device_async_resource_ref{res.initial[device]})) { return true; }
    if (same(r, stand_ins[static_cast<std::size_t>(device)])) { return true; }
    return std::any_of(set_resources.begin(), set_resources.end(), [&](fake_resource& s) {
      return same(r, device_async_resource_ref{s});
    });
  };

  std::atomic<int> writers_done{0};
  std::atomic<long> unexpected{0};
  std::atomic<long> failed_allocations{0};
  std::atomic<long> reads{0};
  std::latch start{num_readers + num_writers};
  std::vector<std::thread> threads;

  for (int w = 0; w < num_writers; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      for (int i = 0; i < writes_per_thread; ++i) {
        int const device = (i + w) % num_devices;
        auto& resource   = set_resources[static_cast<std::size_t>(w * 3 + i % 3)];
        auto const prev  = map.set(device, device_async_resource_ref{resource});
        if (!allowed(prev, device)) { unexpected.fetch_add(1); }
        if (i % 4 == 3) { map.reset(device); }
      }
      writers_done.fetch_add(1);
    });
  }
  for (int r = 0; r < num_readers; ++r) {
    threads.emplace_back([&, r] {
      start.arrive_and_wait();
      long n = 0;
      while (writers_done.load() < num_writers || n < min_reads) {
        int const device = static_cast<int>((n + r) % num_devices);
        auto ref         = map.get(device);
        if (!allowed(ref, device)) { unexpected.fetch_add(1); }
        if (n % 64 == 0) {
          void* ptr = ref.allocate_sync(48, 16);
          if (ptr == nullptr) { failed_allocations.fetch_add(1); }
          ref.deallocate_sync(ptr, 48, 16);
        }
        ++n;
      }
      reads.fetch_add(n);
    });
  }
  for (auto& th : threads) {
    th.join();
  }

  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(failed_allocations.load(), 0);
  EXPECT_GE(reads.load(), static_cast<long>(num_readers) * min_reads);
  for (int d = 0; d < num_devices; ++d) {
    EXPECT_LE(res.calls_per_device[d].load(), 1);  // 0 when readers only ever saw set refs
  }
  // Every allocation made through any ref was freed through the same resource.
  auto const totals = rmm_next::test::totals_of(set_resources, res.initial);
  EXPECT_EQ(totals.allocations, totals.deallocations);
  EXPECT_GT(totals.allocations, 0);
}

TEST(PerDeviceResourceMap, SetAndResetKeepMemoryConstant)
{
  // A scoped override (set, then reset) per request, millions of times, while other threads
  // read: the map's memory must not grow with the number of overrides.
  constexpr long pairs      = 2'000'000;
  constexpr int num_readers = 2;
  constexpr int devices     = 2;
  fixture_resources res{devices};
  device_map map{res.factory(), devices};
  fake_resource mine{1};
  for (int d = 0; d < devices; ++d) {
    map.set(d, device_async_resource_ref{mine});
    map.reset(d);
  }

  std::atomic<bool> done{false};
  std::atomic<long> unexpected{0};
  std::latch started{num_readers + 1};
  std::vector<std::thread> readers;
  for (int r = 0; r < num_readers; ++r) {
    readers.emplace_back([&, r] {
      started.arrive_and_wait();
      for (long n = r; !done.load(std::memory_order_relaxed); ++n) {
        int const device = static_cast<int>(n % devices);
        auto const ref   = map.get(device);
        if (!same(ref, device_async_resource_ref{mine}) &&
            !same(ref, device_async_resource_ref{res.initial[device]})) {
          unexpected.fetch_add(1);
        }
      }
    });
  }
  started.arrive_and_wait();
  std::size_t const before = heap_bytes();
  for (long i = 0; i < pairs; ++i) {
    int const device = static_cast<int>(i % devices);
    map.set(device, device_async_resource_ref{mine});
    map.reset(device);
  }
  std::size_t const after = heap_bytes();
  done.store(true);
  for (auto& th : readers) {
    th.join();
  }

  EXPECT_EQ(unexpected.load(), 0);
  std::size_t const grown = after > before ? after - before : 0;
  EXPECT_LT(grown, std::size_t{16} << 20)
    << "the heap grew by " << grown << " bytes over " << pairs << " set/reset pairs";
  EXPECT_EQ(res.factory_calls.load(), devices);
}

}  // namespace

// The free functions over the process-wide map name themselves in their errors.
TEST(PerDeviceResourceMap, FreeFunctionsNameThemselvesWithoutADriver)
{
  int count{};
  if (cudaGetDeviceCount(&count) == cudaSuccess) { GTEST_SKIP() << "a CUDA driver is present"; }
  (void)cudaGetLastError();
  auto const message = [](auto&& call) {
    try {
      (void)call();
    } catch (rmm_next::cuda_error const& e) {
      return std::string{e.what()};
    }
    return std::string{"no exception"};
  };
  std::string const current = message([] { return rmm_next::get_current_device_resource_ref(); });
  EXPECT_EQ(current.rfind("rmm_next::get_current_device_resource_ref: cudaGetDevice", 0), 0u)
    << current;
  std::string const explicit_device =
    message([] { return rmm_next::get_per_device_resource_ref(0); });
  EXPECT_EQ(explicit_device.rfind("rmm_next::get_per_device_resource_ref: cudaGetDeviceCount", 0),
            0u)
    << explicit_device;
}
