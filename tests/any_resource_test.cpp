/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// any_resource_for<Ref> and what the owning members of per_device_resource_map do with it: the
// map keeps a handed-over resource alive while it is set and hands it back, owned, to the owning
// set or release that replaces it. No GPU: the resources are host memory
// (support/fake_resource.hpp), the device count is given. The compile matrix
// (.ci/compile_matrix.sh) builds and runs this program against every CCCL: with CCCL 3.2 and later
// the owning type is cuda::mr::any_resource, before it rmm-next's shared holder.

#include "support/fake_resource.hpp"
#include "support/heap_bytes.hpp"

#include <rmm_next/any_resource.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using rmm_next::any_device_resource;
using rmm_next::any_resource_for;
using rmm_next::device_async_resource_ref;
using rmm_next::device_resource_ref;
using rmm_next::test::allocates_from;
using rmm_next::test::fake_resource;
using device_map = rmm_next::per_device_resource_map<device_async_resource_ref>;
using lifetime   = std::weak_ptr<fake_resource::counters const>;

// ---- The owning types
// ----------------------------------------------------------------------------

#if RMM_NEXT_CCCL_ANY_RESOURCE
static_assert(
  std::is_same_v<any_device_resource, cuda::mr::any_resource<cuda::mr::device_accessible>>);
static_assert(
  std::is_same_v<any_resource_for<rmm_next::host_device_async_resource_ref>,
                 cuda::mr::any_resource<cuda::mr::host_accessible, cuda::mr::device_accessible>>);
static_assert(std::is_same_v<any_resource_for<device_resource_ref>,
                             cuda::mr::any_synchronous_resource<cuda::mr::device_accessible>>);
#else
static_assert(std::is_base_of_v<device_async_resource_ref, any_device_resource>);
static_assert(std::is_base_of_v<device_resource_ref, any_resource_for<device_resource_ref>>);
#endif
static_assert(std::is_same_v<device_map::any_resource_type, any_device_resource>);
// An owning resource is a resource of its properties wherever its ref type is one (CCCL 3.1 and
// later; CCCL 3.0's concepts want allocate_async, which rmm-next's refs hide), and the ref type
// binds to it.
static_assert(rmm_next::detail::stream_ordered_resource_with<any_device_resource,
                                                             cuda::mr::device_accessible> ==
              rmm_next::detail::stream_ordered_resource_with<device_async_resource_ref,
                                                             cuda::mr::device_accessible>);
#if RMM_NEXT_CCCL_STREAM_ORDERED_MR
static_assert(
  rmm_next::detail::stream_ordered_resource_with<any_device_resource, cuda::mr::device_accessible>);
#endif
static_assert(std::is_constructible_v<device_async_resource_ref, any_device_resource&>);
static_assert(std::is_copy_constructible_v<any_device_resource>);
// Which `set` a call picks: an lvalue resource or any ref is referred to, an rvalue resource or an
// owning resource is handed over.
static_assert(
  std::is_same_v<decltype(std::declval<device_map&>().set(0, std::declval<fake_resource&>())),
                 device_async_resource_ref>);
static_assert(std::is_same_v<decltype(std::declval<device_map&>().set(
                               0, device_async_resource_ref{std::declval<fake_resource&>()})),
                             device_async_resource_ref>);
static_assert(std::is_same_v<decltype(std::declval<device_map&>().set(0, fake_resource{})),
                             any_device_resource>);
static_assert(
  std::is_same_v<decltype(std::declval<device_map&>().set(0, std::declval<any_device_resource&>())),
                 any_device_resource>);

TEST(AnyResource, OwnsWhatItIsMadeFromAndAllocatesFromIt)
{
  fake_resource made{1};
  lifetime const alive = made.lifetime();
  fake_resource const watch{made};  // a copy shares the counters (and keeps them alive)
  {
    any_device_resource held{std::move(made)};
    EXPECT_TRUE(allocates_from(device_async_resource_ref{held}, watch));
    void* ptr = held.allocate_sync(32, 32);
    EXPECT_EQ(watch.allocations(), 2);
    held.deallocate_sync(ptr, 32, 32);
  }
  EXPECT_EQ(watch.deallocations(), 2);
  EXPECT_EQ(alive.use_count(), 1) << "only `watch` holds the counters once `held` is gone";
}

#if !RMM_NEXT_CCCL_ANY_RESOURCE
TEST(AnyResource, BeforeCccl32CopiesShareTheResourceAndAMoveKeepsIt)
{
  lifetime alive;
  {
    fake_resource made{1};
    alive = made.lifetime();
    any_device_resource held{std::move(made)};
    any_device_resource copy{held};
    EXPECT_TRUE(copy == held) << "refs to one resource";
    any_device_resource moved{std::move(held)};
    EXPECT_TRUE(moved == copy);
    void* ptr = held.allocate_sync(16, 16);  // NOLINT(bugprone-use-after-move): stays usable
    ASSERT_NE(ptr, nullptr);
    held.deallocate_sync(ptr, 16, 16);
    EXPECT_EQ(alive.lock()->allocations.load(), 1);
  }
  EXPECT_TRUE(alive.expired()) << "the last copy frees the resource";

  // Made from a ref it only refers: the resource's owner keeps it.
  fake_resource owner{2};
  {
    any_device_resource referring{device_async_resource_ref{owner}};
    EXPECT_TRUE(allocates_from(device_async_resource_ref{referring}, owner));
  }
  EXPECT_EQ(owner.lifetime().use_count(), 1);
}
#endif

// ---- The owning members of per_device_resource_map
// ------------------------------------------------

constexpr int num_devices = 3;

/** A map whose factory hands out copies of `initial[d]`, counting its calls. */
struct map_fixture {
  std::vector<fake_resource> initial{fake_resource{100}, fake_resource{101}, fake_resource{102}};
  std::atomic<int> factory_calls{0};
  device_map map{[this](int device) {
                   ++factory_calls;
                   return initial[static_cast<std::size_t>(device)];
                 },
                 num_devices};
};

/** A resource made for handing over, with a copy that watches its counters. */
struct handed {
  explicit handed(int id) : watch{id}, alive{watch.lifetime()} {}
  /** A copy for `set`: the map's copy and `watch` share the counters. */
  [[nodiscard]] fake_resource give() const { return watch; }
  /** Whether the map (or what it returned) still holds a copy, `watch` aside. */
  [[nodiscard]] bool held_elsewhere() const { return alive.use_count() > 1; }
  fake_resource watch;
  lifetime alive;
};

TEST(PerDeviceResourceMapOwning, SetKeepsTheResourceAndGetRefersToIt)
{
  map_fixture f;
  handed a{1};
  auto previous = f.map.set(1, a.give());
  EXPECT_TRUE(a.held_elsewhere()) << "the map keeps what was handed over";
  EXPECT_TRUE(allocates_from(f.map.get(1), a.watch));
  EXPECT_EQ(f.factory_calls.load(), 0) << "an owning set does not make the factory's resource";

  // The device had no ref yet: what came back stands in for the factory's resource.
  EXPECT_TRUE(allocates_from(device_async_resource_ref{previous}, f.initial[1]));
  EXPECT_EQ(f.factory_calls.load(), 1);
  EXPECT_TRUE(allocates_from(f.map.get(1), a.watch)) << "still set";
}

TEST(PerDeviceResourceMapOwning, SetHandsThePreviouslyHandedOverResourceBack)
{
  map_fixture f;
  handed a{1};
  handed b{2};
  (void)f.map.set(0, a.give());
  {
    auto previous = f.map.set(0, b.give());
    EXPECT_TRUE(allocates_from(device_async_resource_ref{previous}, a.watch));
    EXPECT_TRUE(allocates_from(f.map.get(0), b.watch));
    EXPECT_TRUE(a.held_elsewhere()) << "`previous` owns it now";
  }
  EXPECT_FALSE(a.held_elsewhere()) << "the caller dropped it: destroyed";
  EXPECT_TRUE(b.held_elsewhere());

  // Other devices are untouched and their factory resources not made.
  EXPECT_EQ(f.factory_calls.load(), 0);
}

TEST(PerDeviceResourceMapOwning, SetBackRestoresAndSettingBackTheStandInIsAReset)
{
  map_fixture f;
  handed a{1};
  handed b{2};
  auto stand_in = f.map.set(2, a.give());
  auto from_a   = f.map.set(2, b.give());
  auto from_b   = f.map.set(2, std::move(from_a));  // the restore idiom
  EXPECT_TRUE(allocates_from(f.map.get(2), a.watch));
  EXPECT_TRUE(allocates_from(device_async_resource_ref{from_b}, b.watch));

  auto back_to_a = f.map.set(2, std::move(stand_in));
  EXPECT_EQ(f.factory_calls.load(), 0) << "setting the stand-in back is a reset: nothing made";
  EXPECT_TRUE(allocates_from(device_async_resource_ref{back_to_a}, a.watch));
  EXPECT_TRUE(allocates_from(f.map.get(2), f.initial[2]));
  EXPECT_EQ(f.factory_calls.load(), 1);
}

TEST(PerDeviceResourceMapOwning, ReleaseHandsBackAndRestoresTheFactoryResource)
{
  map_fixture f;
  handed a{1};
  EXPECT_TRUE(allocates_from(f.map.get(0), f.initial[0]));
  auto from_initial = f.map.set(0, a.give());
  // The factory's resource, which the map keeps for its lifetime: the returned resource reaches
  // it (on CCCL 3.2 and later through a copy, which shares the counters).
  EXPECT_TRUE(allocates_from(device_async_resource_ref{from_initial}, f.initial[0]));
  {
    auto released = f.map.release(0);
    EXPECT_TRUE(allocates_from(device_async_resource_ref{released}, a.watch));
    EXPECT_TRUE(allocates_from(f.map.get(0), f.initial[0]));
  }
  EXPECT_FALSE(a.held_elsewhere());
  // A release with nothing handed over returns the current resource and changes nothing.
  auto again = f.map.release(0);
  EXPECT_TRUE(allocates_from(device_async_resource_ref{again}, f.initial[0]));
  EXPECT_TRUE(allocates_from(f.map.get(0), f.initial[0]));
  EXPECT_EQ(f.factory_calls.load(), 1);
}

TEST(PerDeviceResourceMapOwning, ARefSetterLeavesTheHandedOverResourceWithTheMap)
{
  map_fixture f;
  handed a{1};
  fake_resource other{2};
  (void)f.map.set(1, a.give());
  device_async_resource_ref const to_a = f.map.get(1);

  // Replaced by a ref: the map keeps `a`, so the ref the setter returns stays valid.
  device_async_resource_ref const previous = f.map.set(1, device_async_resource_ref{other});
  EXPECT_TRUE(a.held_elsewhere());
  EXPECT_TRUE(allocates_from(previous, a.watch));
  EXPECT_TRUE(allocates_from(to_a, a.watch));
  EXPECT_TRUE(allocates_from(f.map.get(1), other));

  // Set back by its ref, it is the map's own again: the next owning set hands it back.
  f.map.set(1, previous);
  EXPECT_TRUE(allocates_from(f.map.get(1), a.watch));
  {
    auto handed_back = f.map.set(1, fake_resource{3});
    EXPECT_TRUE(allocates_from(device_async_resource_ref{handed_back}, a.watch));
  }
  EXPECT_FALSE(a.held_elsewhere());
}

TEST(PerDeviceResourceMapOwning, AResourceLeftWithTheMapDiesAtTheNextOwningCall)
{
  map_fixture f;
  handed a{1};
  handed b{2};
  fake_resource other{3};
  (void)f.map.set(0, a.give());
  (void)f.map.reset(0);  // `a` stays with the map
  EXPECT_TRUE(a.held_elsewhere());
  {
    auto previous = f.map.set(0, b.give());  // the previous one is the factory's
    EXPECT_TRUE(allocates_from(device_async_resource_ref{previous}, f.initial[0]));
    EXPECT_FALSE(a.held_elsewhere()) << "destroyed by the owning set that followed";
  }

  (void)f.map.set(0, device_async_resource_ref{other});  // `b` stays with the map
  EXPECT_TRUE(b.held_elsewhere());
  auto released = f.map.release(0);
  EXPECT_TRUE(allocates_from(device_async_resource_ref{released}, other));
  EXPECT_FALSE(b.held_elsewhere()) << "destroyed by the release that followed";
}

TEST(PerDeviceResourceMapOwning, HandedOverResourcesDieWithTheMap)
{
  handed a{1};
  handed b{2};
  {
    map_fixture f;
    (void)f.map.set(0, a.give());
    (void)f.map.set(1, b.give());
    (void)f.map.reset(1);
    EXPECT_TRUE(a.held_elsewhere());
    EXPECT_TRUE(b.held_elsewhere());
  }
  EXPECT_FALSE(a.held_elsewhere());
  EXPECT_FALSE(b.held_elsewhere());
}

TEST(PerDeviceResourceMapOwning, BadDeviceIdsThrowAndChangeNothing)
{
  map_fixture f;
  handed a{1};
  handed b{2};
  (void)f.map.set(0, a.give());
  for (int const bad : {-1, num_devices, 1 << 30}) {
    try {
      (void)f.map.set(bad, b.give());
      ADD_FAILURE() << "no exception for device id " << bad;
    } catch (std::out_of_range const& e) {
      std::string const what = e.what();
      EXPECT_EQ(
        what.rfind("rmm_next::per_device_resource_map::set: device id " + std::to_string(bad) + " ",
                   0),
        0U)
        << what;
    }
    EXPECT_THROW((void)f.map.release(bad), std::out_of_range);
  }
  EXPECT_FALSE(b.held_elsewhere()) << "a refused resource is not kept";
  EXPECT_TRUE(allocates_from(f.map.get(0), a.watch));
  EXPECT_EQ(f.factory_calls.load(), 0);
}

#if RMM_NEXT_CCCL_ANY_RESOURCE
TEST(PerDeviceResourceMapOwning, AnEmptyAnyResourceIsRefused)
{
  map_fixture f;
  handed a{1};
  (void)f.map.set(1, a.give());
  any_device_resource full{fake_resource{2}};
  any_device_resource const taken{std::move(full)};
  try {
    (void)f.map.set(1, std::move(full));  // NOLINT(bugprone-use-after-move): what is tested
    ADD_FAILURE() << "an empty any_resource was accepted";
  } catch (rmm_next::logic_error const& e) {
    EXPECT_EQ(std::string{e.what()}.rfind(
                "rmm_next::per_device_resource_map::set: the resource is empty", 0),
              0U)
      << e.what();
  }
  EXPECT_TRUE(allocates_from(f.map.get(1), a.watch)) << "nothing changed";
}
#endif

TEST(PerDeviceResourceMapOwning, SynchronousRefType)
{
  fake_resource initial{1};
  rmm_next::per_device_resource_map<device_resource_ref> map{[&](int) { return initial; }, 1};
  handed a{2};
  auto const previous = map.set(0, a.give());
  static_assert(
    std::is_same_v<std::remove_const_t<decltype(previous)>, any_resource_for<device_resource_ref>>);
  EXPECT_TRUE(allocates_from(map.get(0), a.watch));
  auto released = map.release(0);
  EXPECT_TRUE(allocates_from(device_resource_ref{released}, a.watch));
  EXPECT_TRUE(allocates_from(map.get(0), initial));
}

/**
 * A resource larger than three pointers: cuda::mr::any_resource keeps it on the heap, where a move
 * of the any_resource leaves it (rmm-next's async resources are that large).
 */
struct large_fake_resource : fake_resource {
  using fake_resource::fake_resource;
  std::array<void*, 4> padding{};
};
static_assert(sizeof(large_fake_resource) > 3 * sizeof(void*));
static_assert(sizeof(rmm_next::async_device_resource) > 3 * sizeof(void*));

TEST(PerDeviceResourceMapOwning, ReadersSeeOnlyHandedOverResourcesWhileAWriterReplacesThem)
{
  constexpr int num_readers = 8;
  constexpr int writes      = 4000;
  constexpr long min_reads  = 2000;
  map_fixture f;
  std::vector<large_fake_resource> pool{
    large_fake_resource{1}, large_fake_resource{2}, large_fake_resource{3}};
  // The writer keeps what it gets back until the readers are done: refs they read before a set
  // may still be in use, and stay valid while the returned resource lives (it is large: it did
  // not move out of the heap).
  std::vector<any_device_resource> returned;
  returned.reserve(writes);
  // Copies of one fake_resource compare equal, and so do refs to them.
  auto const allowed = [&](device_async_resource_ref const& r, int device) {
    if (r == device_async_resource_ref{f.initial[static_cast<std::size_t>(device)]}) {
      return true;
    }
    return std::any_of(pool.begin(), pool.end(), [&](large_fake_resource& p) {
      return r == device_async_resource_ref{p};
    });
  };
  std::atomic<bool> done{false};
  std::atomic<long> unexpected{0};
  std::atomic<long> reads{0};
  std::latch start{num_readers + 1};
  std::vector<std::thread> readers;
  for (int t = 0; t < num_readers; ++t) {
    readers.emplace_back([&, t] {
      start.arrive_and_wait();
      long n = 0;
      while (!done.load(std::memory_order_relaxed) || n < min_reads) {
        int const device = static_cast<int>((n + t) % num_devices);
        auto ref         = f.map.get(device);
        void* ptr        = ref.allocate_sync(48, 16);
        ref.deallocate_sync(ptr, 48, 16);
        if (ptr == nullptr || !allowed(ref, device)) { unexpected.fetch_add(1); }
        ++n;
      }
      reads.fetch_add(n);
    });
  }
  start.arrive_and_wait();
  for (int i = 0; i < writes; ++i) {
    int const device = i % num_devices;
    if (i % 5 == 4) {
      returned.push_back(f.map.release(device));
    } else {
      returned.push_back(
        f.map.set(device, large_fake_resource{pool[static_cast<std::size_t>(i % 3)]}));
    }
  }
  done.store(true);
  for (auto& th : readers) {
    th.join();
  }
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GE(reads.load(), num_readers * min_reads);
  // Every allocation went back to the resource it came from.
  auto const totals = rmm_next::test::totals_of(pool, f.initial);
  EXPECT_EQ(totals.allocations, reads.load()) << "one allocation per read";
  EXPECT_EQ(totals.allocations, totals.deallocations);
}

TEST(PerDeviceResourceMapOwning, SetAndReleaseKeepMemoryConstant)
{
  constexpr long pairs = 200'000;
  map_fixture f;
  fake_resource const mine{1};
  for (int d = 0; d < num_devices; ++d) {
    (void)f.map.set(d, fake_resource{mine});
    (void)f.map.release(d);
  }
  std::size_t const before = rmm_next::test::heap_bytes();
  for (long i = 0; i < pairs; ++i) {
    int const device = static_cast<int>(i % num_devices);
    (void)f.map.set(device, fake_resource{mine});
    (void)f.map.release(device);
  }
  std::size_t const after = rmm_next::test::heap_bytes();
  std::size_t const grown = after > before ? after - before : 0;
  EXPECT_LT(grown, std::size_t{1} << 20)
    << "the heap grew by " << grown << " bytes over " << pairs << " owning set/release pairs";
  EXPECT_EQ(mine.lifetime().use_count(), 1) << "every copy handed over was destroyed";
}

}  // namespace
