/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// How the async resources are built, against a fake CUDA runtime (support/fake_cuda_runtime.cpp
// replaces libcudart's functions in this program): what a failed construction leaves behind,
// which device and pool a resource ends up with, and which streams it accepts. No GPU needed.

#include "support/fake_cuda_runtime.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fake_cuda = rmm_next::test::fake_cuda;
using rmm_next::async_device_resource;
using rmm_next::async_pinned_resource;
using rmm_next::pool_options;

class Construction : public ::testing::Test {
 protected:
  void SetUp() override { fake_cuda::reset(2); }
};

TEST_F(Construction, AnOwnedPoolIsDestroyedWhenALaterStepThrows)
{
  // The allocation right after cudaMemPoolCreate (the resource's shared state) fails.
  fake_cuda::fake().fail_new_after_pool_create = true;
  EXPECT_THROW((async_device_resource{pool_options{}, 0}), std::bad_alloc);
  EXPECT_EQ(fake_cuda::pools_created(), 1);
  EXPECT_EQ(fake_cuda::pools_destroyed(), 1) << "the pool leaked";

  // The resource's own stream cannot be made.
  fake_cuda::fake().fail_next["cudaStreamCreateWithFlags"] = cudaErrorMemoryAllocation;
  EXPECT_THROW((async_device_resource{pool_options{}, 0}), rmm_next::cuda_error);
  EXPECT_EQ(fake_cuda::pools_destroyed(), fake_cuda::pools_created());

  // The release threshold cannot be set.
  fake_cuda::fake().fail_next["cudaMemPoolSetAttribute"] = cudaErrorInvalidValue;
  EXPECT_THROW((async_device_resource{pool_options{}, 0}), rmm_next::cuda_error);
  EXPECT_EQ(fake_cuda::pools_destroyed(), fake_cuda::pools_created());

  // The initial size cannot be reserved.
  fake_cuda::fake().fail_next["cudaMallocFromPoolAsync"] = cudaErrorMemoryAllocation;
  EXPECT_THROW((async_device_resource{pool_options{.initial_pool_size = 1 << 20}, 0}),
               rmm_next::out_of_memory);
  EXPECT_EQ(fake_cuda::pools_destroyed(), fake_cuda::pools_created());

  // A device to grant access to is not visible.
  EXPECT_THROW((async_pinned_resource{pool_options{}, 0, std::vector<int>{5}}), std::out_of_range);
  EXPECT_EQ(fake_cuda::pools_created(), 5);
  EXPECT_EQ(fake_cuda::pools_destroyed(), 5);

  // Built, the pool lives as long as a copy of the resource does.
  {
    async_device_resource r{pool_options{}, 1};
    EXPECT_EQ(fake_cuda::pools_destroyed(), 5);
  }
  EXPECT_EQ(fake_cuda::pools_destroyed(), 6);
}

TEST_F(Construction, AnAdoptedPoolKeepsItsThresholdWhenConstructionFails)
{
  // The driver's shared pools: a construction that throws must not have changed them.
  cudaMemPool_t const host_pool =
    fake_cuda::current_pool({cudaMemLocationTypeHost, 0}, cudaMemAllocationTypePinned);
  EXPECT_THROW((async_pinned_resource{rmm_next::current_pool{}, 0, std::vector<int>{5}}),
               std::out_of_range);
  EXPECT_THROW((async_pinned_resource{
                 rmm_next::current_pool{.release_threshold = 42}, 0, std::vector<int>{7}}),
               std::out_of_range);
  EXPECT_EQ(fake_cuda::record(host_pool).release_threshold, 0U);
#if CUDART_VERSION < 13000
  // Before CUDA 13.0 no host pool is shared: the pinned resources created pools of their own,
  // whose thresholds they set, and destroyed them when construction failed.
  for (auto const& [pool, threshold] : fake_cuda::fake().threshold_sets) {
    EXPECT_NE(pool, host_pool);
    EXPECT_TRUE(fake_cuda::record(pool).destroyed) << "an owned pool outlived its construction";
  }
  fake_cuda::fake().threshold_sets.clear();
#endif

  cudaMemPool_t const device_pool =
    fake_cuda::current_pool({cudaMemLocationTypeDevice, 1}, cudaMemAllocationTypePinned);
  fake_cuda::fake().fail_next["cudaStreamCreateWithFlags"] = cudaErrorMemoryAllocation;
  EXPECT_THROW(async_device_resource{1}, rmm_next::cuda_error);
  EXPECT_EQ(fake_cuda::record(device_pool).release_threshold, 0U);
  EXPECT_TRUE(fake_cuda::fake().threshold_sets.empty()) << "a failed construction set a threshold";

  // Built, a resource raises a threshold of 0 (or sets the one asked for).
  {
    async_device_resource const r{1};
    EXPECT_EQ(r.pool_handle(), device_pool);
    EXPECT_EQ(fake_cuda::record(device_pool).release_threshold, UINT64_MAX);
    async_pinned_resource const p{rmm_next::current_pool{.release_threshold = 42}, 0, {0, 1}};
#if CUDART_VERSION >= 13000
    EXPECT_EQ(p.pool_handle(), host_pool);
#else  // a pool of its own (see above), with the threshold asked for
    EXPECT_NE(p.pool_handle(), host_pool);
#endif
    EXPECT_EQ(fake_cuda::record(p.pool_handle()).release_threshold, 42U);
  }
}

TEST_F(Construction, AViewedDevicePoolBelongsToItsDevice)
{
  cudaMemPool_t const on_one =
    fake_cuda::make_pool({cudaMemLocationTypeDevice, 1}, cudaMemAllocationTypePinned);
  ASSERT_EQ(fake_cuda::fake().current_device, 0);
  EXPECT_EQ(async_device_resource{on_one}.device(), 1) << "took the current device";
  EXPECT_EQ((async_device_resource{on_one, 1}).device(), 1);
  EXPECT_EQ(fake_cuda::fake().current_device, 0);

  // A device that cannot use the pool is refused.
  try {
    async_device_resource r{on_one, 0};
    ADD_FAILURE() << "viewed a device-1 pool as device 0's";
  } catch (rmm_next::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("device 0"), std::string::npos) << e.what();
  }

  // With peer access, the pool's device cannot be told: it must be named.
  fake_cuda::record(on_one).access[0] = cudaMemAccessFlagsProtReadWrite;
  try {
    async_device_resource r{on_one};
    ADD_FAILURE() << "guessed the device of a pool two devices may use";
  } catch (rmm_next::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("devices 0, 1"), std::string::npos) << what;
  }
  EXPECT_EQ((async_device_resource{on_one, 1}).device(), 1);

  // The caller's pool is never destroyed nor changed.
  EXPECT_FALSE(fake_cuda::record(on_one).destroyed);
  EXPECT_TRUE(fake_cuda::fake().threshold_sets.empty());
}

TEST_F(Construction, AViewedHostPoolBelongsToTheCurrentDevice)
{
  cudaMemPool_t const host =
    fake_cuda::make_pool({cudaMemLocationTypeHost, 0}, cudaMemAllocationTypePinned);
  fake_cuda::fake().current_device = 1;
  EXPECT_EQ((async_pinned_resource{host, std::nullopt, std::vector<int>{0, 1}}).device(), 1);
}

// ---- The stream's device (the GPU tests check the same on two devices) ------------------------

TEST_F(Construction, AllocateRefusesAStreamOfADeviceWithoutAccess)
{
  async_device_resource r{pool_options{}, 0};
  cudaStream_t const on_one = fake_cuda::make_stream(1);
  try {
    (void)r.allocate(on_one, 1024);
    ADD_FAILURE() << "allocated in the order of device 1 from device 0's pool";
  } catch (rmm_next::device_mismatch const& e) {
    EXPECT_EQ(e.resource_device(), 0);
    EXPECT_EQ(e.stream_device(), 1);
  }
  EXPECT_EQ(fake_cuda::record(r.pool_handle()).used_bytes, 0U);

  // The default streams are the current device's.
  fake_cuda::fake().current_device = 1;
  EXPECT_THROW((void)r.allocate(cudaStream_t{}, 1024), rmm_next::device_mismatch);
  EXPECT_THROW((void)r.allocate(cudaStreamPerThread, 1024), rmm_next::device_mismatch);
  fake_cuda::fake().current_device = 0;
  r.deallocate(cudaStream_t{}, r.allocate(cudaStream_t{}, 1024), 1024);
  r.deallocate(on_one, r.allocate(fake_cuda::make_stream(0), 1024), 1024);  // any stream frees

  // Granted access, device 1's streams may allocate.
  fake_cuda::record(r.pool_handle()).access[1] = cudaMemAccessFlagsProtReadWrite;
  r.deallocate(on_one, r.allocate(on_one, 1024), 1024);
  // allocate_sync uses the resource's own stream.
  fake_cuda::fake().current_device = 1;
  r.deallocate_sync(r.allocate_sync(1024), 1024);
}

TEST_F(Construction, WithOneDeviceNoStreamIsChecked)
{
  fake_cuda::reset(1);
  async_device_resource r{pool_options{}, 0};
  fake_cuda::fake().device_count = 2;  // a stream the check would refuse
  r.deallocate(cudaStream_t{}, r.allocate(fake_cuda::make_stream(1), 1024), 1024);
}

// get_current keeps, per thread, the ref it read last for the current context; a device switch
// and every set must still be seen at once (in the fake, device d's context is d + 1).
TEST_F(Construction, GetCurrentFollowsTheCurrentDeviceAndEverySet)
{
  using ref = rmm_next::device_async_resource_ref;
  rmm_next::test::fake_resource initial[2]{rmm_next::test::fake_resource{10},
                                           rmm_next::test::fake_resource{11}};
  rmm_next::per_device_resource_map<ref> map{[&](int d) { return ref{initial[d]}; }, 2};
  EXPECT_TRUE(map.get_current() == ref{initial[0]});
  EXPECT_TRUE(map.get_current() == ref{initial[0]});  // the kept one
  fake_cuda::fake().current_device = 1;
  EXPECT_TRUE(map.get_current() == ref{initial[1]});

  rmm_next::test::fake_resource other{12};
  (void)map.set(1, ref{other});
  EXPECT_TRUE(map.get_current() == ref{other});
  (void)map.set(0, ref{other});  // another device's set: what device 1 reads is unchanged
  EXPECT_TRUE(map.get_current() == ref{other});
  (void)map.reset(1);
  EXPECT_TRUE(map.get_current() == ref{initial[1]});

  // A second map of the same ref type shares the thread's entry, never its refs.
  rmm_next::per_device_resource_map<ref> mirrored{[&](int d) { return ref{initial[1 - d]}; }, 2};
  EXPECT_TRUE(mirrored.get_current() == ref{initial[0]});
  EXPECT_TRUE(map.get_current() == ref{initial[1]});
  fake_cuda::fake().current_device = 0;
  EXPECT_TRUE(mirrored.get_current() == ref{initial[1]});
  EXPECT_TRUE(map.get_current() == ref{other});
}

// Pool management never invalidates a graph captured elsewhere: creating, adopting and destroying
// pools, reading and resetting their attributes and granting access all run in relaxed capture
// mode (the driver refuses each of them to a thread in global mode while another thread captures
// in global mode), and the thread has its own mode back afterwards.
TEST_F(Construction, PoolManagementRunsInRelaxedCaptureModeAndTheThreadKeepsItsMode)
{
  fake_cuda::fake().query_modes.clear();
  {
    async_device_resource owned{pool_options{.initial_pool_size = 1 << 20}, 0};
    (void)owned.statistics();
    owned.reset_high_watermarks();
    async_pinned_resource pinned{pool_options{}, 0};  // access for every visible device
    async_device_resource adopted{rmm_next::current_pool{}, 1};
  }  // the owned pools are destroyed
  std::vector<std::string> calls;
  for (auto const& [call, mode] : fake_cuda::fake().query_modes) {
    EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed) << call;
    calls.push_back(call);
  }
  for (char const* expected : {"cudaMemPoolCreate",
                               "cudaMemPoolSetAttribute",
                               "cudaMemPoolGetAttribute",
                               "cudaMemPoolSetAccess",
                               "cudaMemPoolDestroy"}) {
    EXPECT_NE(std::find(calls.begin(), calls.end(), expected), calls.end()) << expected;
  }
  cudaStreamCaptureMode mine = cudaStreamCaptureModeGlobal;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mine), cudaSuccess);
  EXPECT_EQ(mine, cudaStreamCaptureModeGlobal);  // what the thread had before
}

}  // namespace
