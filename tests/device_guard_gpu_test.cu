/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// What switching devices inside rmm-next leaves behind: no primary context on a device the
// program never used, and the caller's pending CUDA error. The first test needs a process in
// which nothing has touched device 0 yet, so it runs first, in a program of its own.

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>

namespace {

int device_count()
{
  int count{};
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  return count;
}

/** Whether `device`'s primary context is active (`cuDevicePrimaryCtxGetState`). */
bool primary_context_active(int device)
{
  CUresult (*get_state)(CUdevice, unsigned int*, int*) = nullptr;
  cudaDriverEntryPointQueryResult found{};
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState",
                                             reinterpret_cast<void**>(&get_state),
                                             7000,
                                             cudaEnableDefault,
                                             &found),
            cudaSuccess);
  unsigned int flags{};
  int active{};
  EXPECT_EQ(get_state(device, &flags, &active), CUDA_SUCCESS);
  return active != 0;
}

TEST(DeviceGuard, TouchingOnlyDeviceOneLeavesDeviceZeroWithoutAContext)
{
  if (device_count() < 2) { GTEST_SKIP() << "needs 2 GPUs"; }
  ASSERT_FALSE(primary_context_active(0)) << "something touched device 0 before this test";
  std::thread{[] {  // a fresh thread: no current context, cudaGetDevice says 0
    (void)rmm_next::get_per_device_resource_ref(1);
    EXPECT_FALSE(primary_context_active(0)) << "after get_per_device_resource_ref(1)";
    {
      rmm_next::detail::device_guard guard{1};
    }
    EXPECT_FALSE(primary_context_active(0)) << "after a device_guard for device 1";
  }}
    .join();
  std::thread{[] {  // again fresh: an owned pool on device 1, made and destroyed
    {
      rmm_next::async_device_resource owned{rmm_next::pool_options{}, 1};
      EXPECT_EQ(owned.device(), 1);
      EXPECT_FALSE(primary_context_active(0)) << "after making an owned pool on device 1";
    }
    EXPECT_FALSE(primary_context_active(0)) << "after destroying an owned pool on device 1";
  }}
    .join();
  EXPECT_TRUE(primary_context_active(1));
  EXPECT_FALSE(primary_context_active(0));
}

__global__ void noop_kernel() {}

TEST(DeviceGuard, ThePendingErrorOfTheCallersKernelSurvives)
{
  int const other = device_count() > 1 ? 1 : 0;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  noop_kernel<<<1, 4096>>>();  // more threads than a block may have: a launch error, pending
  cudaError_t const pending = cudaPeekAtLastError();
  ASSERT_NE(pending, cudaSuccess);
  {
    rmm_next::detail::device_guard guard{other};
  }
  {
    rmm_next::async_device_resource owned{rmm_next::pool_options{}, other};
  }
  EXPECT_EQ(cudaGetLastError(), pending);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(DeviceGuard, GivesBackTheContextItFound)
{
  if (device_count() < 2) { GTEST_SKIP() << "needs 2 GPUs"; }
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  {
    rmm_next::detail::device_guard guard{0};
    int now{-1};
    EXPECT_EQ(cudaGetDevice(&now), cudaSuccess);
    EXPECT_EQ(now, 0);
  }
  int now{-1};
  EXPECT_EQ(cudaGetDevice(&now), cudaSuccess);
  EXPECT_EQ(now, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(DeviceGuard, AnUnknownDeviceThrowsAndChangesNothing)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_THROW(rmm_next::detail::device_guard{device_count()}, rmm_next::cuda_error);
  int now{-1};
  EXPECT_EQ(cudaGetDevice(&now), cudaSuccess);
  EXPECT_EQ(now, 0);
  rmm_next::detail::device_guard quiet{device_count(), std::nothrow};
  EXPECT_FALSE(quiet.ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
