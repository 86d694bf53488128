/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// resource_context with resources that need no GPU (the device count is given), plus the few
// behaviours that depend on whether a CUDA driver is present.

#include "support/fake_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_context.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

// A library's kinds, counted by a last enumerator count_.
enum class kind { temporaries, results, scratch, count_ };

// Kinds of an enum that cannot grow a count_ enumerator: counted by a specialization below.
enum class narrow_kind : std::uint8_t { first, second };

// A second library's kinds, host-device memory only.
enum class host_kind { staging, count_ };

}  // namespace

template <>
inline constexpr std::size_t rmm_next::allocation_kind_count<narrow_kind> = 2;

namespace {

using rmm_next::device_async_resource_ref;
using rmm_next::resource_context;
using rmm_next::test::allocates_from;
using rmm_next::test::fake_resource;
using context = resource_context<kind>;

constexpr int num_devices = 3;
constexpr int num_kinds   = 3;

static_assert(rmm_next::allocation_kind_count<kind> == 3);
static_assert(rmm_next::allocation_kind_count<narrow_kind> == 2);
static_assert(rmm_next::allocation_kind_count<host_kind> == 1);
static_assert(rmm_next::allocation_kind_count<int> == 0, "not an enum: no count");
static_assert(context::kind_count == 3);
static_assert(std::is_same_v<context::ref_type, device_async_resource_ref>);
static_assert(std::is_same_v<context::kind_type, kind>);
static_assert(
  std::is_same_v<context::map_type, rmm_next::per_device_resource_map<device_async_resource_ref>>);
static_assert(!std::is_copy_constructible_v<context> && !std::is_move_constructible_v<context>);

// One default per kind, no more, no less; each must make something the Ref binds to.
using maker = fake_resource (*)(int);
static_assert(std::is_constructible_v<context, maker, maker, maker>);
static_assert(std::is_constructible_v<context, int, maker, maker, maker>);
static_assert(!std::is_constructible_v<context, maker, maker>);
static_assert(!std::is_constructible_v<context, maker, maker, maker, maker>);
static_assert(!std::is_constructible_v<context, int, maker, maker>);
static_assert(!std::is_constructible_v<context, maker, maker, int (*)(int)>);
static_assert(!std::is_convertible_v<maker, resource_context<host_kind>>, "explicit");
// use_process_wide_resource hands out device_async_resource_ref: fine for device contexts only.
static_assert(std::is_constructible_v<context,
                                      rmm_next::use_process_wide_resource,
                                      maker,
                                      rmm_next::use_process_wide_resource>);
static_assert(
  !std::is_constructible_v<resource_context<host_kind, rmm_next::host_device_async_resource_ref>,
                           rmm_next::use_process_wide_resource>);

// A host-device context takes host-accessible memory only: device memory does not bind.
template <class Context, class Resource>
concept settable =
  requires(Context& c, Resource& r) { c.set(typename Context::kind_type{}, 0, r); };
using host_context = resource_context<host_kind, rmm_next::host_device_async_resource_ref>;
static_assert(settable<host_context, fake_resource>);
static_assert(!settable<host_context, rmm_next::async_device_resource>);
static_assert(settable<context, rmm_next::async_device_resource>);

/** Resources made ahead of time, one per kind and device; defaults hand out copies. */
struct fixture_resources {
  std::vector<std::vector<fake_resource>> initial;  // [kind][device]
  std::array<std::atomic<int>, num_kinds> calls{};
  std::mutex devices_mutex;  // defaults of different kinds may run at once
  std::vector<int> devices_asked;

  fixture_resources()
  {
    for (int k = 0; k < num_kinds; ++k) {
      initial.emplace_back();
      for (int d = 0; d < num_devices; ++d) {
        initial.back().emplace_back(100 * (k + 1) + d);
      }
    }
  }

  fake_resource& of(kind k, int device)
  {
    return initial[static_cast<std::size_t>(k)][static_cast<std::size_t>(device)];
  }

  auto default_for(kind k)
  {
    return [this, k](int device) {
      calls[static_cast<std::size_t>(k)].fetch_add(1);
      std::lock_guard lock{devices_mutex};
      devices_asked.push_back(device);
      return of(k, device);
    };
  }

  int total_calls() const
  {
    int total = 0;
    for (auto const& c : calls) {
      total += c.load();
    }
    return total;
  }
};

/** A context over the fixture's resources, serving num_devices devices. */
struct fixture_context : fixture_resources {
  context ctx{num_devices,
              default_for(kind::temporaries),
              default_for(kind::results),
              default_for(kind::scratch)};
};

template <class Ref>
bool same(Ref const& lhs, Ref const& rhs)
{
  return lhs == rhs;
}

device_async_resource_ref ref(fake_resource& r) { return device_async_resource_ref{r}; }

/** Runs `f`, expects std::out_of_range whose message contains every string in `parts`. */
template <class F>
void expect_out_of_range(F&& f, std::vector<std::string> const& parts)
{
  try {
    f();
    ADD_FAILURE() << "no exception; expected one naming " << parts.front();
  } catch (std::out_of_range const& e) {
    std::string const what = e.what();
    for (auto const& part : parts) {
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    }
  }
}

bool cuda_driver_present()
{
  int count{};
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

TEST(ResourceContext, EachKindStartsWithItsDefaultMadeOnFirstUse)
{
  fixture_context f;
  EXPECT_EQ(f.ctx.device_count(), num_devices);
  EXPECT_EQ(f.total_calls(), 0) << "defaults run on first use, not at construction";

  EXPECT_TRUE(same(f.ctx.get(kind::results, 2), ref(f.of(kind::results, 2))));
  EXPECT_TRUE(same(f.ctx.get(kind::results, 2), ref(f.of(kind::results, 2))));
  EXPECT_EQ(f.calls[static_cast<std::size_t>(kind::results)].load(), 1);
  EXPECT_EQ(f.total_calls(), 1);
  EXPECT_EQ(f.devices_asked, std::vector<int>{2}) << "the default is told the device";

  for (int k = 0; k < num_kinds; ++k) {
    for (int d = 0; d < num_devices; ++d) {
      auto const kd = static_cast<kind>(k);
      EXPECT_TRUE(same(f.ctx.get(kd, d), ref(f.of(kd, d)))) << "kind " << k << " device " << d;
      EXPECT_TRUE(allocates_from(f.ctx.get(kd, d), f.of(kd, d)));
    }
  }
  EXPECT_EQ(f.total_calls(), num_kinds * num_devices) << "once per kind and device";
}

TEST(ResourceContext, SetOverridesOneKindOnOneDevice)
{
  fixture_context f;
  fake_resource app_a{1};
  fake_resource app_b{2};

  auto previous = f.ctx.set(kind::results, 1, ref(app_a));
  EXPECT_EQ(f.total_calls(), 0) << "set does not make the default";
  EXPECT_TRUE(allocates_from(previous, f.of(kind::results, 1)));  // a stand-in for it
  EXPECT_TRUE(same(f.ctx.get(kind::results, 1), ref(app_a)));
  EXPECT_TRUE(allocates_from(f.ctx.get(kind::results, 1), app_a));

  // A resource lvalue binds directly.
  previous = f.ctx.set(kind::results, 1, app_b);
  EXPECT_TRUE(same(previous, ref(app_a)));
  EXPECT_TRUE(same(f.ctx.get(kind::results, 1), ref(app_b)));

  // Other devices of the kind and other kinds of the device keep their defaults.
  EXPECT_TRUE(same(f.ctx.get(kind::results, 0), ref(f.of(kind::results, 0))));
  EXPECT_TRUE(same(f.ctx.get(kind::results, 2), ref(f.of(kind::results, 2))));
  EXPECT_TRUE(same(f.ctx.get(kind::temporaries, 1), ref(f.of(kind::temporaries, 1))));
  EXPECT_TRUE(same(f.ctx.get(kind::scratch, 1), ref(f.of(kind::scratch, 1))));
  EXPECT_EQ(app_a.allocations(), 1) << "only the explicit allocation above";
  EXPECT_EQ(app_b.allocations(), 0);

  // The restore idiom.
  f.ctx.set(kind::results, 1, previous);
  EXPECT_TRUE(same(f.ctx.get(kind::results, 1), ref(app_a)));
}

TEST(ResourceContext, ResetReturnsToTheDefaultAndOldRefsStayValid)
{
  std::weak_ptr<fake_resource::counters const> made;
  fake_resource app{1};
  {
    // The temporaries default makes a fresh resource per call; only the context holds it.
    context ctx{2,
                [&made](int device) {
                  fake_resource r{device};
                  made = r.lifetime();
                  return r;
                },
                [&app](int) { return ref(app); },
                [&app](int) { return ref(app); }};
    auto initial = ctx.get(kind::temporaries, 0);
    ASSERT_FALSE(made.expired());

    EXPECT_TRUE(same(ctx.set(kind::temporaries, 0, ref(app)), initial));
    EXPECT_TRUE(same(ctx.reset(kind::temporaries, 0), ref(app)));
    EXPECT_TRUE(same(ctx.get(kind::temporaries, 0), initial));
    ctx.set(kind::temporaries, 0, ref(app));
    EXPECT_FALSE(made.expired()) << "set and reset never destroy what a default made";

    // The ref handed out before the overrides still allocates from the default's resource.
    void* ptr = initial.allocate_sync(100, 256);
    ASSERT_NE(ptr, nullptr);
    EXPECT_EQ(made.lock()->allocations.load(), 1);
    initial.deallocate_sync(ptr, 100, 256);
  }
  EXPECT_TRUE(made.expired()) << "what a default made dies with the context";
  EXPECT_EQ(app.allocations(), 0) << "the context never calls into set resources itself";
}

TEST(ResourceContext, DefaultsMayShareOneResourceOrBorrowOne)
{
  auto shared = std::make_shared<fake_resource>(7);
  fake_resource borrowed{8};
  std::weak_ptr<fake_resource> watch = shared;
  {
    context ctx{1,
                [shared](int) { return shared; },
                [shared](int) { return shared; },
                [&borrowed](int) { return ref(borrowed); }};
    shared.reset();
    ASSERT_FALSE(watch.expired()) << "the context shares ownership";
    EXPECT_TRUE(same(ctx.get(kind::temporaries, 0), ctx.get(kind::results, 0)));
    EXPECT_TRUE(allocates_from(ctx.get(kind::temporaries, 0), *watch.lock()));
    EXPECT_TRUE(allocates_from(ctx.get(kind::results, 0), *watch.lock()));
    EXPECT_TRUE(allocates_from(ctx.get(kind::scratch, 0), borrowed));
  }
  EXPECT_TRUE(watch.expired()) << "released with the context";
}

TEST(ResourceContext, MapOfAKindIsThePerDeviceResourceMapBehindIt)
{
  fixture_context f;
  fake_resource app{1};
  auto& results = f.ctx.map(kind::results);
  static_assert(std::is_same_v<decltype(results), context::map_type&>);
  EXPECT_EQ(&results, &f.ctx.map(kind::results));
  EXPECT_NE(&results, &f.ctx.map(kind::temporaries));
  EXPECT_EQ(results.device_count(), num_devices);

  // Written through the map, seen through the context, and the other way round.
  results.set(2, ref(app));
  EXPECT_TRUE(same(f.ctx.get(kind::results, 2), ref(app)));
  f.ctx.reset(kind::results, 2);
  EXPECT_TRUE(same(results.get(2), ref(f.of(kind::results, 2))));

  // Code written for a per_device_resource_map takes one kind of the context.
  auto const use_map = [](rmm_next::per_device_resource_map<device_async_resource_ref> const& m) {
    return m.get(0);
  };
  context const& read_only = f.ctx;
  EXPECT_TRUE(same(use_map(read_only.map(kind::scratch)), ref(f.of(kind::scratch, 0))));
}

TEST(ResourceContext, KindsOutOfRangeThrowAndChangeNothing)
{
  fixture_context f;
  fake_resource app{1};
  f.ctx.set(kind::results, 0, ref(app));
  int const calls_before = f.total_calls();

  for (auto const bad : {kind::count_, static_cast<kind>(-1), static_cast<kind>(99)}) {
    std::string const value = std::to_string(static_cast<int>(bad));
    std::vector<std::string> const parts{"allocation kind " + value + " is out of range [0, 3)",
                                         "3 kind(s)"};
    expect_out_of_range([&] { (void)f.ctx.get(bad, 0); }, parts);
    expect_out_of_range([&] { f.ctx.set(bad, 0, ref(app)); }, parts);
    expect_out_of_range([&] { f.ctx.reset(bad, 0); }, parts);
    expect_out_of_range([&] { (void)f.ctx.map(bad); }, parts);
    // The kind is checked before the device (no CUDA call for get/set_current).
    expect_out_of_range([&] { (void)f.ctx.get(bad); }, parts);
    expect_out_of_range([&] { f.ctx.set_current(bad, ref(app)); }, parts);
    expect_out_of_range([&] { f.ctx.reset_current(bad); }, parts);
  }
  EXPECT_EQ(f.total_calls(), calls_before);
  EXPECT_TRUE(same(f.ctx.get(kind::results, 0), ref(app)));
  EXPECT_EQ(app.allocations(), 0);

  // An unsigned underlying type: the value is printed as a number.
  fake_resource r{2};
  resource_context<narrow_kind> narrow{
    1, [&r](int) { return ref(r); }, [&r](int) { return ref(r); }};
  EXPECT_TRUE(allocates_from(narrow.get(narrow_kind::second, 0), r));
  expect_out_of_range([&] { (void)narrow.get(static_cast<narrow_kind>(200), 0); },
                      {"allocation kind 200 is out of range [0, 2)"});
}

TEST(ResourceContext, DevicesOutOfRangeThrowAndChangeNothing)
{
  fixture_context f;
  fake_resource app{1};
  for (int const bad : {-1, num_devices, 1000}) {
    std::vector<std::string> const parts{"device id " + std::to_string(bad) + " is out of range",
                                         std::to_string(num_devices) + " device(s)"};
    expect_out_of_range([&] { (void)f.ctx.get(kind::temporaries, bad); }, parts);
    expect_out_of_range([&] { f.ctx.set(kind::results, bad, ref(app)); }, parts);
    expect_out_of_range([&] { f.ctx.reset(kind::scratch, bad); }, parts);
  }
  EXPECT_EQ(f.total_calls(), 0);
  for (int k = 0; k < num_kinds; ++k) {
    auto const kd = static_cast<kind>(k);
    EXPECT_TRUE(same(f.ctx.get(kd, 0), ref(f.of(kd, 0))));
  }
}

TEST(ResourceContext, CurrentDeviceMembersMatchExplicitOnes)
{
  fixture_context f;
  fake_resource app{1};
  int device{};
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    EXPECT_THROW((void)f.ctx.get(kind::results), rmm_next::cuda_error);
    EXPECT_THROW(f.ctx.set_current(kind::results, ref(app)), rmm_next::cuda_error);
    EXPECT_THROW(f.ctx.reset_current(kind::results), rmm_next::cuda_error);
    EXPECT_EQ(f.total_calls(), 0);
    return;
  }
  if (device >= num_devices) { GTEST_SKIP() << "current device " << device << " >= 3"; }
  EXPECT_TRUE(same(f.ctx.get(kind::scratch), ref(f.of(kind::scratch, device))));
  (void)f.ctx.get(kind::results);  // made: set returns it (else a stand-in for it)
  EXPECT_TRUE(same(f.ctx.set_current(kind::results, ref(app)), ref(f.of(kind::results, device))));
  EXPECT_TRUE(same(f.ctx.get(kind::results, device), ref(app)));
  EXPECT_TRUE(same(f.ctx.get(kind::results), ref(app)));
  EXPECT_TRUE(same(f.ctx.reset_current(kind::results), ref(app)));
  EXPECT_TRUE(same(f.ctx.get(kind::results), ref(f.of(kind::results, device))));
}

TEST(ResourceContext, ProcessWideDefaultReadsTheProcessWideMap)
{
  fake_resource lib{1};
  context ctx{1,
              rmm_next::use_process_wide_resource{},
              [&lib](int) { return ref(lib); },
              [&lib](int) { return ref(lib); }};
  EXPECT_TRUE(allocates_from(ctx.get(kind::results, 0), lib));
  if (!cuda_driver_present()) {
    // The process-wide map needs cudaGetDeviceCount: the error reaches the caller, and the kind
    // stays without a ref.
    EXPECT_THROW((void)ctx.get(kind::temporaries, 0), rmm_next::cuda_error);
    EXPECT_THROW((void)ctx.get(kind::temporaries, 0), rmm_next::cuda_error);
    // set does not make the default: it works without CUDA, and reset brings the error back.
    fake_resource app{2};
    (void)ctx.set(kind::temporaries, 0, ref(app));
    EXPECT_TRUE(allocates_from(ctx.get(kind::temporaries, 0), app));
    (void)ctx.reset(kind::temporaries, 0);
    EXPECT_THROW((void)ctx.get(kind::temporaries, 0), rmm_next::cuda_error);
    return;
  }
  EXPECT_TRUE(same(ctx.get(kind::temporaries, 0), rmm_next::get_per_device_resource_ref(0)));
}

TEST(ResourceContext, DefaultThatThrowsAffectsOnlyItsKind)
{
  fake_resource good{1};
  int calls = 0;
  context ctx{2,
              [&](int) {
                if (++calls == 1) { throw std::runtime_error{"default failed"}; }
                return ref(good);
              },
              [&good](int) { return good; },
              [&good](int) { return good; }};
  EXPECT_THROW((void)ctx.get(kind::temporaries, 1), std::runtime_error);
  EXPECT_TRUE(allocates_from(ctx.get(kind::results, 1), good));
  EXPECT_TRUE(same(ctx.get(kind::temporaries, 1), ref(good))) << "the next use tries again";
  EXPECT_EQ(calls, 2);
}

TEST(ResourceContext, ContextsOfOneEnumAreIndependent)
{
  fixture_resources a;
  fixture_resources b;
  context lib_a{num_devices,
                a.default_for(kind::temporaries),
                a.default_for(kind::results),
                a.default_for(kind::scratch)};
  context lib_b{num_devices,
                b.default_for(kind::temporaries),
                b.default_for(kind::results),
                b.default_for(kind::scratch)};
  fake_resource app{1};
  lib_a.set(kind::results, 0, ref(app));
  EXPECT_TRUE(same(lib_a.get(kind::results, 0), ref(app)));
  EXPECT_TRUE(same(lib_b.get(kind::results, 0), ref(b.of(kind::results, 0))));
  EXPECT_EQ(b.total_calls(), 1);
}

TEST(ResourceContext, HostDeviceContextHandsOutHostWritableMemory)
{
  using host_ref = rmm_next::host_device_async_resource_ref;
  fake_resource staging{1};
  fake_resource app{2};
  resource_context<host_kind, host_ref> ctx{2, [&staging](int) { return staging; }};
  static_assert(std::is_same_v<decltype(ctx.get(host_kind::staging, 0)), host_ref>);

  ctx.set(host_kind::staging, 1, host_ref{app});
  cuda::stream_ref const stream{cudaStream_t{}};  // the fake resource never touches the stream
  for (int d = 0; d < 2; ++d) {
    host_ref r = ctx.get(host_kind::staging, d);
    auto* p    = static_cast<char*>(r.allocate(stream, 16, 16));
    ASSERT_NE(p, nullptr);
    p[0] = 'x';  // host-accessible by type
    r.deallocate(stream, p, 16, 16);
  }
  EXPECT_EQ(staging.allocations(), 1);
  EXPECT_EQ(app.allocations(), 1);
}

TEST(ResourceContext, DeviceCountGivenOrDiscovered)
{
  fake_resource r{1};
  auto const make = [&r](int) { return ref(r); };
  EXPECT_THROW((context{-1, make, make, make}), rmm_next::logic_error);

  context none{0, make, make, make};
  EXPECT_EQ(none.device_count(), 0);
  expect_out_of_range([&] { (void)none.get(kind::results, 0); }, {"0 device(s)"});

  context discovered{make, make, make};
  int count{};
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    EXPECT_THROW((void)discovered.device_count(), rmm_next::cuda_error);
    EXPECT_THROW((void)discovered.get(kind::results, 0), rmm_next::cuda_error);
    return;
  }
  EXPECT_EQ(discovered.device_count(), count);
  EXPECT_EQ(discovered.map(kind::scratch).device_count(), count);
}

TEST(ResourceContext, ReadersOfEveryKindWhileOneKindIsOverridden)
{
  constexpr int num_readers = 8;
  constexpr int writes      = 2000;
  constexpr int min_reads   = 2000;
  fixture_context f;
  fake_resource app_a{1};
  fake_resource app_b{2};
  std::atomic<bool> writer_done{false};
  std::atomic<long> unexpected{0};
  std::latch start{num_readers + 1};

  std::vector<std::thread> threads;
  for (int t = 0; t < num_readers; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      int const d = t % num_devices;
      for (long n = 0; n < min_reads || !writer_done.load(); ++n) {
        auto results  = f.ctx.get(kind::results, d);
        bool const ok = d != 0 ? same(results, ref(f.of(kind::results, d)))
                               : same(results, ref(f.of(kind::results, 0))) ||
                                   same(results, ref(app_a)) || same(results, ref(app_b));
        if (!ok || !same(f.ctx.get(kind::temporaries, d), ref(f.of(kind::temporaries, d)))) {
          unexpected.fetch_add(1);
        }
        // Whatever was read allocates.
        void* p = results.allocate_sync(8, 8);
        if (p == nullptr) { unexpected.fetch_add(1); }
        results.deallocate_sync(p, 8, 8);
      }
    });
  }
  threads.emplace_back([&] {
    start.arrive_and_wait();
    for (int i = 0; i < writes; ++i) {
      f.ctx.set(kind::results, 0, i % 2 == 0 ? ref(app_a) : ref(app_b));
      if (i % 7 == 0) { f.ctx.reset(kind::results, 0); }
    }
    writer_done.store(true);
  });
  for (auto& th : threads) {
    th.join();
  }
  EXPECT_EQ(unexpected.load(), 0);
  // Device 0's default is made only if a reader found no ref set there.
  EXPECT_GE(f.calls[static_cast<std::size_t>(kind::results)].load(), num_devices - 1);
  EXPECT_LE(f.calls[static_cast<std::size_t>(kind::results)].load(), num_devices);
}

}  // namespace
