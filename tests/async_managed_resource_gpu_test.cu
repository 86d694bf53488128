/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of async_managed_resource: the shared matrix (async_resource_tests.hpp) and
// what only managed pools have: the managed current/default pools and preferred locations.
//
// Managed memory is never requested beyond what the device has free: a program that asks for
// more can hang the GPU. The one oversized request of the matrix (1 PiB) must fail at
// allocation; were it accepted, it is freed untouched and the test fails.

#include "async_resource_tests.hpp"

#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace rmm_next::test {
namespace {

using resource = async_managed_resource;

#if CUDART_VERSION < 13000
// No managed pools before CUDA 13.0: the shared resource tests have no type to run with here.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(async_resource_matrix);
#endif

#if CUDART_VERSION >= 13000
INSTANTIATE_TYPED_TEST_SUITE_P(managed, async_resource_matrix, ::testing::Types<resource>);

static_assert(std::is_constructible_v<device_async_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_device_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_async_resource_ref, resource&>);

using async_managed_resource_gpu_test = gpu_test;

TEST_F(async_managed_resource_gpu_test, DefaultPoolsAreTheDevicesManagedPools)
{
  cudaMemLocation loc{cudaMemLocationTypeDevice, device_};
  cudaMemPool_t current{};
  cudaMemPool_t dflt{};
  ASSERT_EQ(cudaMemGetMemPool(&current, &loc, cudaMemAllocationTypeManaged), cudaSuccess);
  ASSERT_EQ(cudaMemGetDefaultMemPool(&dflt, &loc, cudaMemAllocationTypeManaged), cudaSuccess);
  cudaMemPool_t device_pool{};
  ASSERT_EQ(cudaMemGetMemPool(&device_pool, &loc, cudaMemAllocationTypePinned), cudaSuccess);

  resource const r;
  EXPECT_EQ(r.pool_handle(), current);
  EXPECT_NE(r.pool_handle(), device_pool) << "the managed pool is not the device-memory pool";
  EXPECT_EQ(r.device(), device_);
  resource const d{default_pool{}};
  EXPECT_EQ(d.pool_handle(), dflt);
}

/**
 * Allocates from an owned managed pool preferring `location`, and checks that kernels and the
 * host share the memory. A driver that rejects the location must say so with a typed error.
 */
void expect_preferred_location_works(cudaMemLocation location,
                                     std::string const& name,
                                     cudaStream_t stream)
{
  std::optional<resource> r;
  try {
    r.emplace(pool_options{.location = location});
  } catch (cuda_error const& e) {
    note("managed pool preferring " + name + " rejected with a typed error: " + e.what());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return;
  }
  note("managed pool preferring " + name + " created");
  constexpr std::size_t words = std::size_t{1} << 18;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* in                    = static_cast<std::uint32_t*>(r->allocate(stream, bytes));
  auto* out                   = static_cast<std::uint32_t*>(r->allocate_sync(bytes));
  ASSERT_NE(in, nullptr);
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_memory_kind<resource>(in, r->device());

  fill_kernel<std::uint32_t><<<grid_for(words), block_size, 0, stream>>>(in, words, 17);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (in[i] != pattern(i, 17)) { ++bad; }
  }
  EXPECT_EQ(bad, 0U) << "host reading what a kernel wrote";

  for (std::size_t i = 0; i < words; ++i) {
    in[i] = static_cast<std::uint32_t>(i * 5);
  }
  transform_kernel<std::uint32_t><<<grid_for(words), block_size, 0, stream>>>(in, out, words);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (out[i] != 3U * static_cast<std::uint32_t>(i * 5) + 1U) { ++bad; }
  }
  EXPECT_EQ(bad, 0U) << "a kernel reading what the host wrote";
  r->deallocate(stream, in, bytes);
  r->deallocate(stream, out, bytes);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST_F(async_managed_resource_gpu_test, OwnedPoolPreferringTheHost)
{
  expect_preferred_location_works(cudaMemLocation{cudaMemLocationTypeHost, 0}, "the host", stream_);
}

TEST_F(async_managed_resource_gpu_test, OwnedPoolWithoutPreferredLocation)
{
  expect_preferred_location_works(
    cudaMemLocation{cudaMemLocationTypeNone, 0}, "no location", stream_);
}

TEST_F(async_managed_resource_gpu_test, OwnedPoolPreferringTheDevice)
{
  // The default location of an owned managed pool, spelled out: must work.
  resource r{pool_options{.location = cudaMemLocation{cudaMemLocationTypeDevice, device_}}};
  void* ptr = r.allocate(stream_, 4 * MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expect_memory_kind<resource>(ptr, device_);
  expect_usable<resource>(ptr, 4 * MiB, 18, stream_);
  r.deallocate(stream_, ptr, 4 * MiB);
}

TEST_F(async_managed_resource_gpu_test, HostUsesMemoryWhileAKernelRunsElsewhere)
{
  // With concurrent managed access (required by the resource), the host may touch memory that
  // no kernel uses while kernels run on other streams.
  resource r;
  void* busy_ptr = r.allocate(stream_, 64 * MiB);
  ASSERT_NE(busy_ptr, nullptr);
  fill(busy_ptr, 64 * MiB, 21, stream_);  // runs on stream_ while the host works below
  auto* mine = static_cast<std::uint32_t*>(r.allocate_sync(MiB));
  ASSERT_NE(mine, nullptr);
  for (std::size_t i = 0; i < MiB / sizeof(std::uint32_t); ++i) {
    mine[i] = pattern(i, 22);
  }
  EXPECT_EQ(device_mismatches(busy_ptr, 64 * MiB, 21, stream_), 0U);
  EXPECT_EQ(device_mismatches(mine, MiB, 22, stream_), 0U);
  r.deallocate(stream_, busy_ptr, 64 * MiB);
  r.deallocate(stream_, mine, MiB);
}

#else
// Managed pools need CUDA 13.0: every way of making the resource throws not_supported, naming
// what it needs and what the program has, and leaves no CUDA error behind.
using async_managed_resource_gpu_test = gpu_test;

void expect_not_supported(char const* how, auto make)
{
  try {
    make();
    ADD_FAILURE() << how << ": expected not_supported before CUDA 13.0";
  } catch (not_supported const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("async_managed_resource"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA 13.0"), std::string::npos) << what;
    EXPECT_NE(what.find("compiled against CUDA 12."), std::string::npos) << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << how;
}

TEST_F(async_managed_resource_gpu_test, EveryConstructionThrowsNotSupportedBeforeCuda13)
{
  expect_not_supported("default", [] { resource r; });
  expect_not_supported("device", [this] { resource r{device_}; });
  expect_not_supported("current_pool", [] { resource r{current_pool{}}; });
  expect_not_supported("default_pool", [] { resource r{default_pool{}}; });
  expect_not_supported("pool_options", [] { resource r{pool_options{}}; });
  cudaMemPool_t device_pool{};
  ASSERT_EQ(cudaDeviceGetMemPool(&device_pool, device_), cudaSuccess);
  expect_not_supported("view", [device_pool] { resource r{device_pool}; });
}
#endif

}  // namespace
}  // namespace rmm_next::test
