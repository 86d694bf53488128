/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// What the async resources do without a GPU, and their compile-time contract on this CCCL.
#include "support/without_a_driver.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace {

using rmm_next::async_device_resource;
using rmm_next::async_managed_resource;
using rmm_next::async_pinned_resource;

// Copyable handles, as CCCL >= 3.2 refs require.
static_assert(std::is_nothrow_copy_constructible_v<async_device_resource>);
static_assert(std::is_nothrow_copy_assignable_v<async_pinned_resource>);
static_assert(std::is_nothrow_move_constructible_v<async_managed_resource>);

// Each ref alias binds to exactly the resources whose properties it needs.
static_assert(std::is_constructible_v<rmm_next::device_async_resource_ref, async_device_resource&>);
static_assert(
  std::is_constructible_v<rmm_next::device_async_resource_ref, async_managed_resource&>);
static_assert(std::is_constructible_v<rmm_next::device_async_resource_ref, async_pinned_resource&>);
static_assert(std::is_constructible_v<rmm_next::device_resource_ref, async_device_resource&>);
static_assert(
  std::is_constructible_v<rmm_next::host_device_async_resource_ref, async_managed_resource&>);
static_assert(
  std::is_constructible_v<rmm_next::host_device_async_resource_ref, async_pinned_resource&>);
static_assert(
  !std::is_constructible_v<rmm_next::host_device_async_resource_ref, async_device_resource&>);
static_assert(std::is_constructible_v<rmm_next::host_device_resource_ref, async_pinned_resource&>);
static_assert(std::is_constructible_v<rmm_next::host_async_resource_ref, async_pinned_resource&>);
static_assert(std::is_constructible_v<rmm_next::host_resource_ref, async_managed_resource&>);
static_assert(!std::is_constructible_v<rmm_next::host_async_resource_ref, async_device_resource&>);
static_assert(!std::is_constructible_v<rmm_next::host_resource_ref, async_device_resource&>);
// Refs never bind to temporaries.
static_assert(
  !std::is_constructible_v<rmm_next::device_async_resource_ref, async_device_resource&&>);
// A ref with more properties converts to one with fewer, never the other way.
static_assert(std::is_convertible_v<rmm_next::host_device_async_resource_ref,
                                    rmm_next::device_async_resource_ref>);
static_assert(!std::is_convertible_v<rmm_next::device_async_resource_ref,
                                     rmm_next::host_device_async_resource_ref>);

// Sources a resource can be built from; anything else is rejected at compile time.
static_assert(std::is_constructible_v<async_device_resource, rmm_next::default_pool>);
static_assert(std::is_constructible_v<async_device_resource, rmm_next::pool_options, int>);
static_assert(std::is_constructible_v<async_device_resource, cudaMemPool_t>);
static_assert(!std::is_constructible_v<async_device_resource, double*>);
static_assert(!std::is_convertible_v<int, async_device_resource>);

template <class Resource>
void expect_constructs_or_says_no_driver()
{
  if (rmm_next::test::has_usable_device()) {
    try {
      Resource r{};
      EXPECT_NE(r.pool_handle(), nullptr);
    } catch (rmm_next::not_supported const& e) {
      // A device without the feature: the message names it.
      EXPECT_NE(std::string{e.what()}.find("need"), std::string::npos) << e.what();
    }
    return;
  }
  try {
    Resource r{};
    FAIL() << "constructed a resource without a usable driver";
  } catch (rmm_next::cuda_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("no usable CUDA driver or device"), std::string::npos) << what;
    EXPECT_NE(what.find(rmm_next::detail::resource_name(Resource::kind)), std::string::npos)
      << what;
  }
  // Without a driver every runtime call reports it; with one, no error may be left behind.
}

TEST(AsyncResourcesWithoutDevice, DeviceResourceThrowsTypedError)
{
  expect_constructs_or_says_no_driver<async_device_resource>();
}

TEST(AsyncResourcesWithoutDevice, ManagedResourceThrowsTypedError)
{
  expect_constructs_or_says_no_driver<async_managed_resource>();
}

TEST(AsyncResourcesWithoutDevice, PinnedResourceThrowsTypedError)
{
  expect_constructs_or_says_no_driver<async_pinned_resource>();
}

TEST(AsyncResourcesWithoutDevice, EveryPoolSourceThrowsTypedError)
{
  if (rmm_next::test::has_usable_device()) {
    // With a device the same calls construct (the GPU suite checks what they construct).
    EXPECT_NE(async_device_resource{rmm_next::default_pool{}}.pool_handle(), nullptr);
    EXPECT_NE(async_device_resource{rmm_next::pool_options{}}.pool_handle(), nullptr);
    EXPECT_NE(async_device_resource(rmm_next::current_pool{}, 0).pool_handle(), nullptr);
    return;
  }
  EXPECT_THROW(async_device_resource{rmm_next::default_pool{}}, rmm_next::cuda_error);
  EXPECT_THROW(async_device_resource{rmm_next::pool_options{}}, rmm_next::cuda_error);
  EXPECT_THROW(async_device_resource(rmm_next::current_pool{}, 0), rmm_next::cuda_error);
  EXPECT_THROW(async_pinned_resource(rmm_next::current_pool{}, 0, {0}), rmm_next::cuda_error);
}

TEST(Alignment, PowersOfTwoUpTo256AreValid)
{
  for (std::size_t a = 1; a <= 256; a *= 2) {
    EXPECT_TRUE(rmm_next::detail::is_valid_alignment(a)) << a;
  }
  for (std::size_t a : {0UL, 3UL, 6UL, 100UL, 255UL, 257UL, 512UL, 4096UL}) {
    EXPECT_FALSE(rmm_next::detail::is_valid_alignment(a)) << a;
  }
}

TEST(Alignment, BadAlignmentMessageNamesIt)
{
  try {
    rmm_next::detail::throw_bad_alignment(rmm_next::detail::memory_kind::pinned, 512);
    FAIL() << "no exception";
  } catch (rmm_next::bad_alloc const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("alignment 512"), std::string::npos) << what;
    EXPECT_NE(what.find("async_pinned_resource"), std::string::npos) << what;
  }
}

TEST(AllocationFailure, OutOfMemoryNamesSizeAndDevice)
{
  try {
    rmm_next::detail::throw_allocation_failure(
      {rmm_next::detail::memory_kind::device, 3}, cudaErrorMemoryAllocation, 1ULL << 50);
    FAIL() << "no exception";
  } catch (rmm_next::out_of_memory const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("out_of_memory"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(1ULL << 50)), std::string::npos) << what;
    EXPECT_NE(what.find("device 3"), std::string::npos) << what;
  }
}

TEST(AllocationFailure, OtherErrorsAreBadAllocNotOutOfMemory)
{
  try {
    rmm_next::detail::throw_allocation_failure(
      {rmm_next::detail::memory_kind::managed, 0}, cudaErrorInvalidValue, 64);
    FAIL() << "no exception";
  } catch (rmm_next::out_of_memory const&) {
    FAIL() << "an invalid value is not exhaustion";
  } catch (rmm_next::bad_alloc const& e) {
    EXPECT_NE(std::string{e.what()}.find("cudaErrorInvalidValue"), std::string::npos);
  }
}

TEST(AllocationFailure, AStickyErrorIsACudaErrorSayingTheContextIsLost)
{
  // An illegal address left by an earlier kernel is not a failed allocation: every later call
  // fails the same way until the process ends.
  for (cudaError_t sticky : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert}) {
    try {
      rmm_next::detail::throw_allocation_failure(
        {rmm_next::detail::memory_kind::device, 0}, sticky, 64);
      FAIL() << "no exception";
    } catch (rmm_next::cuda_error const& e) {
      EXPECT_EQ(e.code(), sticky);
      std::string const what = e.what();
      EXPECT_NE(what.find("context is lost"), std::string::npos) << what;
      EXPECT_NE(what.find(cudaGetErrorName(sticky)), std::string::npos) << what;
    } catch (std::bad_alloc const& e) {
      FAIL() << "a lost context is not an allocation failure: " << e.what();
    }
  }
  EXPECT_TRUE(rmm_next::detail::is_sticky_error(cudaErrorIllegalAddress));
  EXPECT_FALSE(rmm_next::detail::is_sticky_error(cudaErrorMemoryAllocation));
  EXPECT_FALSE(rmm_next::detail::is_sticky_error(cudaErrorInvalidValue));
}

TEST(DeviceMismatch, IsALogicErrorNamingBothDevicesAndTheRemedy)
{
  try {
    rmm_next::detail::throw_device_mismatch({rmm_next::detail::memory_kind::device, 0}, 1);
    FAIL() << "no exception";
  } catch (rmm_next::device_mismatch const& e) {
    std::string const what = e.what();
    EXPECT_EQ(e.resource_device(), 0);
    EXPECT_EQ(e.stream_device(), 1);
    EXPECT_NE(what.find("rmm_next::async_device_resource::allocate: device_mismatch: "),
              std::string::npos)
      << what;
    EXPECT_NE(what.find("stream of device 1"), std::string::npos) << what;
    EXPECT_NE(what.find("device 0 memory"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMemPoolSetAccess"), std::string::npos) << what;
  }
  EXPECT_THROW(
    rmm_next::detail::throw_device_mismatch({rmm_next::detail::memory_kind::pinned, 2}, 3),
    rmm_next::logic_error);
}

}  // namespace
