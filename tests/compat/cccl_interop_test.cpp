/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// CCCL's type-erasure tools over rmm-next's resources, adaptors and refs, as RMM 26.06 and later
// tests its own: cuda::mr::resource_cast and dynamic_resource_cast (CCCL 3.4 and later), and
// cuda::mr::shared_resource with rmm-next adaptors inside and around it (CCCL 3.2 and later;
// any_resource is in conformance_test.cpp and any_resource_test.cpp). Built and run by the compile
// matrix (.ci/compile_matrix.sh) against every CCCL; with an older CCCL each test reports itself
// skipped and says what it needs. No GPU: the adaptors sit over host memory
// (support/fake_resource.hpp); the async resources are checked at compile time here and on a
// device in cccl_interop_gpu_test.cu.

#include "support/cccl_version.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/any_resource.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace rmm_next::test {
namespace {

using device_mr = cuda::mr::device_accessible;
using host_mr   = cuda::mr::host_accessible;

#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 4)

using counted = statistics_adaptor<device_async_resource_ref>;

// resource_cast names the concrete type; for rmm-next's async resources that is the class itself.
static_assert(std::is_same_v<decltype(cuda::mr::resource_cast<async_device_resource>(
                               std::declval<device_async_resource_ref*>())),
                             async_device_resource*>);
static_assert(std::is_same_v<decltype(cuda::mr::resource_cast<async_managed_resource>(
                               std::declval<host_device_async_resource_ref*>())),
                             async_managed_resource*>);
static_assert(std::is_same_v<decltype(cuda::mr::resource_cast<async_pinned_resource>(
                               std::declval<any_resource_for<host_async_resource_ref> const*>())),
                             async_pinned_resource const*>);

TEST(ResourceCast, FindsTheResourceARefIsBoundTo)
{
  fake_resource upstream{1};
  counted adaptor{device_async_resource_ref{upstream}};
  device_async_resource_ref ref{adaptor};
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&ref), &adaptor);
  EXPECT_EQ(cuda::mr::resource_cast<fake_resource>(&ref), nullptr) << "exact type, not upstream";
  EXPECT_EQ(cuda::mr::resource_cast<statistics_adaptor<host_device_async_resource_ref>>(&ref),
            nullptr);
  device_async_resource_ref const& const_ref = ref;
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&const_ref), &adaptor);

  // Synchronous refs, and a ref that narrowed its properties, reach the same object.
  device_resource_ref sync{adaptor};
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&sync), &adaptor);
  host_device_async_resource_ref wide{upstream};
  device_async_resource_ref narrowed{wide};
  EXPECT_EQ(cuda::mr::resource_cast<fake_resource>(&narrowed), &upstream);

  // Through the pointer, the adaptor's own members: the statistics of what the ref allocated.
  void* ptr = ref.allocate_sync(64, 64);
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&ref)->statistics().bytes.current, 64);
  ref.deallocate_sync(ptr, 64, 64);
}

TEST(ResourceCast, SeesThroughAnAnyResourceAndARefToIt)
{
  fake_resource upstream{1};
  any_device_resource held{limiting_adaptor<device_async_resource_ref>{
    device_async_resource_ref{upstream}, std::size_t{1} << 20}};
  auto* limited = cuda::mr::resource_cast<limiting_adaptor<device_async_resource_ref>>(&held);
  ASSERT_NE(limited, nullptr);
  EXPECT_EQ(limited->limit(), std::size_t{1} << 20);
  device_async_resource_ref ref{held};  // binds to the resource `held` holds
  EXPECT_EQ(cuda::mr::resource_cast<limiting_adaptor<device_async_resource_ref>>(&ref), limited);
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&held), nullptr);

  // An any_resource made from a ref holds a copy of the resource, of the resource's type.
  any_device_resource copied{device_async_resource_ref{upstream}};
  fake_resource* copy = cuda::mr::resource_cast<fake_resource>(&copied);
  ASSERT_NE(copy, nullptr);
  EXPECT_NE(copy, &upstream);
  EXPECT_TRUE(*copy == upstream) << "a copy shares the counters";
}

TEST(ResourceCast, FindsWhatAPerDeviceMapHolds)
{
  fake_resource initial{1};
  per_device_resource_map<device_async_resource_ref> map{[&](int) { return initial; }, 2};
  auto before = map.get(0);
  auto* made  = cuda::mr::resource_cast<fake_resource>(&before);
  ASSERT_NE(made, nullptr) << "the factory's resource, kept by the map";
  EXPECT_NE(made, &initial) << "the map's own copy";

  auto previous = map.set(0, counted{device_async_resource_ref{initial}});
  auto current  = map.get(0);
  counted* held = cuda::mr::resource_cast<counted>(&current);
  ASSERT_NE(held, nullptr);
  EXPECT_TRUE(allocates_from(current, initial));
  EXPECT_EQ(held->statistics().allocations.total, 1);
  EXPECT_NE(cuda::mr::resource_cast<fake_resource>(&previous), nullptr)
    << "what the set returned holds a copy of the factory's resource";

  auto released = map.release(0);
  EXPECT_NE(cuda::mr::resource_cast<counted>(&released), nullptr);
  auto after = map.get(0);
  EXPECT_EQ(cuda::mr::resource_cast<fake_resource>(&after), made);
}

/** Only device-accessible: what a statistics adaptor over a device ref is. */
using device_only = statistics_adaptor<device_async_resource_ref>;

TEST(DynamicResourceCast, AddsAPropertyTheResourceHas)
{
  // A ref made with both properties and narrowed to device_accessible gets host_accessible back
  // (the erased object carries what it was first erased with).
  fake_resource both{1};  // host- and device-accessible
  host_device_async_resource_ref host_device{both};
  device_async_resource_ref device_ref{host_device};
  auto widened = cuda::mr::dynamic_resource_cast<host_mr, device_mr>(&device_ref);
  static_assert(std::is_same_v<decltype(widened), host_device_async_resource_ref>);
  EXPECT_EQ(cuda::mr::resource_cast<fake_resource>(&widened), &both);
  auto* bytes = static_cast<unsigned char*>(widened.allocate_sync(16, 16));
  bytes[15]   = 0xab;  // host-accessible, as the resource says
  widened.deallocate_sync(bytes, 16, 16);
  EXPECT_EQ(both.allocations(), 1);

  // A resource without it, or one erased without it: std::bad_cast, and the source still works.
  device_only adaptor{device_async_resource_ref{both}};
  device_async_resource_ref only_device{adaptor};
  EXPECT_THROW((void)cuda::mr::dynamic_resource_cast<host_mr>(&only_device), std::bad_cast);
  EXPECT_TRUE(allocates_from(only_device, both));
  device_async_resource_ref erased_without{both};
  EXPECT_THROW((void)cuda::mr::dynamic_resource_cast<host_mr>(&erased_without), std::bad_cast);
}

TEST(DynamicResourceCast, NarrowsAnAnyResource)
{
  fake_resource both{1};
  any_resource_for<host_device_async_resource_ref> wide{both};
  auto narrow = cuda::mr::dynamic_resource_cast<device_mr>(std::move(wide));
  static_assert(std::is_same_v<decltype(narrow), any_device_resource>);
  ASSERT_TRUE(narrow.has_value());
  EXPECT_NE(cuda::mr::resource_cast<fake_resource>(&narrow), nullptr);
  EXPECT_TRUE(allocates_from(device_async_resource_ref{narrow}, both));

  any_device_resource device_only_held{device_only{device_async_resource_ref{both}}};
  auto const widen = [&] {
    return cuda::mr::dynamic_resource_cast<host_mr, device_mr>(std::move(device_only_held));
  };
  EXPECT_THROW((void)widen(), std::bad_cast);
}

#else

TEST(ResourceCast, FindsTheResourceARefIsBoundTo)
{
  GTEST_SKIP() << needs_cccl("cuda::mr::resource_cast", "3.4");
}
TEST(DynamicResourceCast, AddsAPropertyTheResourceHas)
{
  GTEST_SKIP() << needs_cccl("cuda::mr::dynamic_resource_cast", "3.4");
}

#endif

#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 2)

// rmm-next's adaptors over CCCL's pool refs and shared resources are resources too.
static_assert(detail::stream_ordered_resource_with<statistics_adaptor<cuda::device_memory_pool_ref>,
                                                   device_mr>);
static_assert(
  detail::stream_ordered_resource_with<statistics_adaptor<cuda::mr::shared_resource<fake_resource>>,
                                       device_mr,
                                       host_mr>);
static_assert(detail::stream_ordered_resource_with<cuda::mr::shared_resource<async_device_resource>,
                                                   device_mr>);

TEST(SharedResource, HoldsAnRmmNextAdaptorAndCopiesShareIt)
{
  fake_resource upstream{1};
  using counted = statistics_adaptor<device_async_resource_ref>;
  counted const watch{device_async_resource_ref{upstream}};  // copies share the counters
  cuda::mr::shared_resource<counted> shared{cuda::std::in_place_type<counted>, watch};
  auto copy = shared;
  EXPECT_TRUE(copy == shared);
  EXPECT_TRUE(allocates_from(device_async_resource_ref{copy}, upstream));
  EXPECT_TRUE(allocates_from(device_async_resource_ref{shared}, upstream));
  EXPECT_EQ(watch.statistics().allocations.total, 2);

  // In an any_resource: the copy it holds shares the adaptor too.
  any_device_resource held{shared};
  EXPECT_TRUE(allocates_from(device_async_resource_ref{held}, upstream));
  EXPECT_EQ(watch.statistics().allocations.total, 3);
  EXPECT_EQ(watch.statistics().bytes.current, 0);
}

TEST(SharedResource, IsAnUpstreamOfRmmNextAdaptors)
{
  fake_resource const watch{7};  // copies share the counters
  auto shared = cuda::mr::make_shared_resource<fake_resource>(watch);
  statistics_adaptor counted_over_shared{shared};
  static_assert(std::is_same_v<decltype(counted_over_shared),
                               statistics_adaptor<cuda::mr::shared_resource<fake_resource>>>);
  void* ptr = counted_over_shared.allocate_sync(128, 64);
  EXPECT_EQ(watch.allocations(), 1);
  EXPECT_EQ(counted_over_shared.statistics().bytes.current, 128);
  counted_over_shared.deallocate_sync(ptr, 128, 64);
  EXPECT_EQ(watch.deallocations(), 1);
  EXPECT_EQ(counted_over_shared.statistics().bytes.current, 0);
}

#else

TEST(SharedResource, HoldsAnRmmNextAdaptorAndCopiesShareIt)
{
  GTEST_SKIP() << needs_cccl("cuda::mr::shared_resource", "3.2");
}

#endif

}  // namespace
}  // namespace rmm_next::test
