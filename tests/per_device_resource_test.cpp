/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The process-wide map's owning free functions (set_per_device_resource,
// set_current_device_resource, reset_per_device_resource, reset_current_device_resource: RMM 26.06
// and later's signatures) next to get_current_device_resource_ref and the _ref setters, against a
// fake CUDA runtime with two devices (support/fake_cuda_runtime.cpp). With CCCL 3.4 and later,
// cuda::mr::resource_cast finds the resources behind the refs, as RMM 26.06+ users look for them.
//
// The process-wide map lives for the whole program: each test leaves it as it found it, and the
// fake runtime is never reset (the map's initial resources name its pools).

#include "support/cccl_version.hpp"
#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/any_resource.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

namespace fake_cuda = rmm_next::test::fake_cuda;
using rmm_next::any_device_resource;
using rmm_next::async_device_resource;
using rmm_next::device_async_resource_ref;
using rmm_next::pool_options;

constexpr std::size_t bytes = 4096;

/** The used bytes of `pool` as the fake driver counts them. */
std::size_t used_bytes(cudaMemPool_t pool) { return fake_cuda::record(pool).used_bytes; }

/**
 * Allocates through `ref` on a stream of the device `pool` belongs to and frees; returns what
 * `pool` used meanwhile.
 */
std::size_t bytes_taken_from(device_async_resource_ref ref, cudaMemPool_t pool)
{
  cuda::stream_ref const stream{fake_cuda::make_stream(fake_cuda::record(pool).location.id)};
  std::size_t const before = used_bytes(pool);
  void* ptr                = ref.allocate(stream, bytes, rmm_next::default_alignment);
  std::size_t const taken  = used_bytes(pool) - before;
  ref.deallocate(stream, ptr, bytes, rmm_next::default_alignment);
  return taken;
}

/** The device's current pool, which the process-wide map's initial resource allocates from. */
cudaMemPool_t current_pool(int device)
{
  return fake_cuda::current_pool(cudaMemLocation{cudaMemLocationTypeDevice, device},
                                 cudaMemAllocationTypePinned);
}

class ProcessWide : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(fake_cuda::fake().device_count, 2);
  }
  void TearDown() override
  {
    // Back to the initial resources, and nothing the map still holds.
    (void)rmm_next::reset_per_device_resource(0);
    (void)rmm_next::reset_per_device_resource(1);
  }
};

TEST_F(ProcessWide, SetCurrentDeviceResourceKeepsThePoolAndTheCurrentRefAllocatesFromIt)
{
  int const created   = fake_cuda::pools_created();
  int const destroyed = fake_cuda::pools_destroyed();
  cudaMemPool_t pool{};
  {
    async_device_resource mine{pool_options{}};
    pool          = mine.pool_handle();
    auto previous = rmm_next::set_current_device_resource(std::move(mine));
    EXPECT_EQ(fake_cuda::pools_created(), created + 1);

    // The map keeps the owned pool alive; the current ref allocates from it.
    EXPECT_EQ(bytes_taken_from(rmm_next::get_current_device_resource_ref(), pool), bytes);
    EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(0), pool), bytes);
    EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(1), current_pool(1)), bytes)
      << "device 1 is untouched";

    // Restoring: the previous resource is the initial one, on the device's current pool.
    auto handed_back = rmm_next::set_current_device_resource(std::move(previous));
    EXPECT_EQ(bytes_taken_from(rmm_next::get_current_device_resource_ref(), current_pool(0)),
              bytes);
    EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed) << "`handed_back` owns the pool now";
    EXPECT_EQ(bytes_taken_from(device_async_resource_ref{handed_back}, pool), bytes);
  }
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed + 1) << "the last copy destroyed the pool";
}

TEST_F(ProcessWide, ResetHandsTheResourceBackOwned)
{
  int const destroyed = fake_cuda::pools_destroyed();
  cudaMemPool_t pool  = nullptr;
  {
    async_device_resource mine{pool_options{}, 1};
    pool = mine.pool_handle();
    (void)rmm_next::set_per_device_resource(1, mine);  // a copy: shares the pool
  }
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed) << "the map holds a copy";
  EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(1), pool), bytes);
  {
    auto released = rmm_next::reset_per_device_resource(1);
    EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(1), current_pool(1)), bytes);
    EXPECT_EQ(bytes_taken_from(device_async_resource_ref{released}, pool), bytes);
  }
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed + 1);

  // reset_current_device_resource on the current device, here 1.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  (void)rmm_next::set_current_device_resource(async_device_resource{pool_options{}, 1});
  {
    auto released = rmm_next::reset_current_device_resource();
    EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed + 1);
  }
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed + 2);
  EXPECT_EQ(bytes_taken_from(rmm_next::get_current_device_resource_ref(), current_pool(1)), bytes);
}

TEST_F(ProcessWide, RefSettersAndOwningSettersMix)
{
  int const destroyed = fake_cuda::pools_destroyed();
  async_device_resource caller_owned{pool_options{}};
  async_device_resource handed{pool_options{}};
  cudaMemPool_t const handed_pool = handed.pool_handle();
  (void)rmm_next::set_current_device_resource(std::move(handed));
  handed = async_device_resource{0};  // drop this copy: only the map holds the pool

  // A _ref setter leaves the handed-over resource with the map: the ref it returns works.
  device_async_resource_ref const to_handed =
    rmm_next::set_current_device_resource_ref(device_async_resource_ref{caller_owned});
  EXPECT_EQ(
    bytes_taken_from(rmm_next::get_current_device_resource_ref(), caller_owned.pool_handle()),
    bytes);
  EXPECT_EQ(bytes_taken_from(to_handed, handed_pool), bytes);
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed);

  // Set back by its ref, then replaced by the initial resource: still held.
  (void)rmm_next::set_current_device_resource_ref(to_handed);
  EXPECT_EQ(bytes_taken_from(rmm_next::get_current_device_resource_ref(), handed_pool), bytes);
  (void)rmm_next::reset_current_device_resource_ref();
  EXPECT_EQ(bytes_taken_from(to_handed, handed_pool), bytes);
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed);

  // The next owning call destroys it; what it returns is the initial resource.
  auto previous = rmm_next::set_current_device_resource(async_device_resource{0});
  EXPECT_EQ(fake_cuda::pools_destroyed(), destroyed + 1);
  EXPECT_EQ(bytes_taken_from(device_async_resource_ref{previous}, current_pool(0)), bytes);
}

TEST_F(ProcessWide, EnableSegmentCacheServesTheDevicesRefFromSegmentsOfItsPool)
{
  cudaMemPool_t const pool = current_pool(1);
  cuda::stream_ref const stream{fake_cuda::make_stream(1)};
  std::size_t const before                = used_bytes(pool);
  device_async_resource_ref const wrapped = rmm_next::enable_segment_cache(1);
  EXPECT_TRUE(rmm_next::enable_segment_cache(1) == wrapped);  // once only
  device_async_resource_ref ref = rmm_next::get_per_device_resource_ref(1);
  EXPECT_FALSE(ref == wrapped);
  void* a = ref.allocate(stream, bytes, rmm_next::default_alignment);
  EXPECT_EQ(used_bytes(pool) - before, std::size_t{2} << 20) << "one small segment";
  ref.deallocate(stream, a, bytes, rmm_next::default_alignment);
  EXPECT_EQ(used_bytes(pool) - before, std::size_t{2} << 20) << "the segment stays cached";
  void* b = ref.allocate(stream, bytes, rmm_next::default_alignment);
  EXPECT_EQ(b, a) << "the freed block comes back on its stream";
  ref.deallocate(stream, b, bytes, rmm_next::default_alignment);
  EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(0), current_pool(0)), bytes)
    << "device 0 is untouched";
  (void)rmm_next::set_per_device_resource_ref(1, wrapped);
  EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(1), pool), bytes);
}

TEST_F(ProcessWide, BadDeviceIdsThrowAndChangeNothing)
{
  for (int const bad : {-1, 2, 1000}) {
    try {
      (void)rmm_next::set_per_device_resource(bad, async_device_resource{0});
      ADD_FAILURE() << "no exception for device id " << bad;
    } catch (std::out_of_range const& e) {
      std::string const what = e.what();
      EXPECT_EQ(
        what.rfind("rmm_next::set_per_device_resource: device id " + std::to_string(bad) + " ", 0),
        0U)
        << what;
      EXPECT_NE(what.find("2 device(s)"), std::string::npos) << what;
    }
    EXPECT_THROW((void)rmm_next::reset_per_device_resource(bad), std::out_of_range);
  }
  EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(0), current_pool(0)), bytes);
  EXPECT_EQ(bytes_taken_from(rmm_next::get_per_device_resource_ref(1), current_pool(1)), bytes);
}

#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 4)
TEST_F(ProcessWide, ResourceCastFindsTheResourcesBehindTheRefs)
{
  // The initial resource: an async_device_resource on the device's current pool.
  auto initial    = rmm_next::get_current_device_resource_ref();
  auto* on_device = cuda::mr::resource_cast<async_device_resource>(&initial);
  ASSERT_NE(on_device, nullptr);
  EXPECT_EQ(on_device->pool_handle(), current_pool(0));
  EXPECT_EQ(cuda::mr::resource_cast<rmm_next::statistics_adaptor<async_device_resource>>(&initial),
            nullptr)
    << "exact type only";

  // A handed-over adaptor, found behind the current ref and behind what a reset returns.
  using counted  = rmm_next::statistics_adaptor<async_device_resource>;
  auto previous  = rmm_next::set_current_device_resource(counted{async_device_resource{0}});
  auto current   = rmm_next::get_current_device_resource_ref();
  counted* found = cuda::mr::resource_cast<counted>(&current);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(bytes_taken_from(current, current_pool(0)), bytes);
  EXPECT_EQ(found->statistics().allocations.total, 1);
  EXPECT_EQ(cuda::mr::resource_cast<async_device_resource>(&current), nullptr);
  // What the first set returned holds a copy of the initial resource (same pool).
  auto* copy_of_initial = cuda::mr::resource_cast<async_device_resource>(&previous);
  ASSERT_NE(copy_of_initial, nullptr);
  EXPECT_NE(copy_of_initial, on_device) << "a copy";
  EXPECT_TRUE(*copy_of_initial == *on_device) << "of the same pool";

  auto released = rmm_next::reset_current_device_resource();
  EXPECT_EQ(cuda::mr::resource_cast<counted>(&released), found)
    << "an adaptor larger than three pointers stays where it was when it is handed back";
  EXPECT_EQ(found->statistics().allocations.total, 1);
  auto after = rmm_next::get_current_device_resource_ref();
  EXPECT_EQ(cuda::mr::resource_cast<async_device_resource>(&after), on_device)
    << "the map's initial resource again";
}
#else
TEST_F(ProcessWide, ResourceCastFindsTheResourcesBehindTheRefs)
{
  GTEST_SKIP() << rmm_next::test::needs_cccl("cuda::mr::resource_cast", "3.4");
}
#endif

}  // namespace
