/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of async_pinned_resource: the shared matrix (async_resource_tests.hpp) and
// what only pinned host pools have: the host's current/default pools and device access grants.

#include "async_resource_tests.hpp"

#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

using resource = async_pinned_resource;

INSTANTIATE_TYPED_TEST_SUITE_P(pinned, async_resource_matrix, ::testing::Types<resource>);

static_assert(std::is_constructible_v<device_async_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_device_resource_ref, resource&>);
static_assert(std::is_constructible_v<host_resource_ref, resource&>);

using async_pinned_resource_gpu_test = gpu_test;

/** @brief The access device `device` has to `pool`. */
cudaMemAccessFlags access_of(cudaMemPool_t pool, int device)
{
  cudaMemAccessFlags flags{};
  cudaMemLocation loc{cudaMemLocationTypeDevice, device};
  EXPECT_EQ(cudaMemPoolGetAccess(&flags, pool, &loc), cudaSuccess);
  return flags;
}

int visible_devices()
{
  int count{};
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  return count;
}

/** @brief Devices the resource grants access to by default: every one with memory pools. */
std::vector<int> pool_capable_devices()
{
  std::vector<int> ids;
  for (int d = 0; d < visible_devices(); ++d) {
    int supported{};
    EXPECT_EQ(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, d), cudaSuccess);
    if (supported != 0) { ids.push_back(d); }
  }
  return ids;
}

/** @brief A kernel on the current device writes the memory; the host reads it. */
void expect_kernel_writes_host_reads(resource& r, cudaStream_t stream, std::uint32_t seed)
{
  constexpr std::size_t words = std::size_t{1} << 18;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* ptr                   = static_cast<std::uint32_t*>(r.allocate(stream, bytes));
  ASSERT_NE(ptr, nullptr);
  fill_kernel<std::uint32_t><<<grid_for(words), block_size, 0, stream>>>(ptr, words, seed);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (ptr[i] != pattern(i, seed)) { ++bad; }
  }
  EXPECT_EQ(bad, 0U);
  r.deallocate(stream, ptr, bytes);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

#if CUDART_VERSION >= 13000
TEST_F(async_pinned_resource_gpu_test, DefaultPoolsAreTheHostsPinnedPools)
{
  cudaMemLocation loc{cudaMemLocationTypeHost, 0};
  cudaMemPool_t current{};
  cudaMemPool_t dflt{};
  ASSERT_EQ(cudaMemGetMemPool(&current, &loc, cudaMemAllocationTypePinned), cudaSuccess);
  ASSERT_EQ(cudaMemGetDefaultMemPool(&dflt, &loc, cudaMemAllocationTypePinned), cudaSuccess);
  cudaMemPool_t device_pool{};
  ASSERT_EQ(cudaDeviceGetMemPool(&device_pool, device_), cudaSuccess);

  resource const r;
  EXPECT_EQ(r.pool_handle(), current);
  EXPECT_NE(r.pool_handle(), device_pool) << "the host pool is not the device-memory pool";
  EXPECT_EQ(r.device(), device_);
  resource const d{default_pool{}};
  EXPECT_EQ(d.pool_handle(), dflt);
}
#else
TEST_F(async_pinned_resource_gpu_test, DefaultConstructionCreatesAHostNumaPoolOfItsOwn)
{
  // Before CUDA 13.0 the host has no current or default pool: each resource creates one on the
  // device's host NUMA node.
  cudaMemPool_t device_pool{};
  ASSERT_EQ(cudaDeviceGetMemPool(&device_pool, device_), cudaSuccess);
  resource const r;
  resource const d{default_pool{}};
  resource const r_copy = r;
  EXPECT_NE(r.pool_handle(), nullptr);
  EXPECT_NE(r.pool_handle(), device_pool) << "the host pool is not the device-memory pool";
  EXPECT_NE(r.pool_handle(), d.pool_handle());
  EXPECT_TRUE(r_copy == r);
  EXPECT_EQ(r.device(), device_);
  EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
  // Allocation from such a pool: OwnedPoolOnTheHostLocation.
}
#endif

TEST_F(async_pinned_resource_gpu_test, GrantsEveryDeviceReadWriteByDefault)
{
  std::vector<int> const devices = pool_capable_devices();
  ASSERT_FALSE(devices.empty());
  resource current;
  resource owned{pool_options{}};
  for (int const d : devices) {
    EXPECT_EQ(access_of(current.pool_handle(), d), cudaMemAccessFlagsProtReadWrite) << d;
    EXPECT_EQ(access_of(owned.pool_handle(), d), cudaMemAccessFlagsProtReadWrite) << d;
  }
  expect_kernel_writes_host_reads(current, stream_, 51);
  expect_kernel_writes_host_reads(owned, stream_, 52);
}

TEST_F(async_pinned_resource_gpu_test, GrantsOnlyTheDevicesNamed)
{
  resource r{pool_options{}, device_, std::vector<int>{device_}};
  EXPECT_EQ(r.device(), device_);
  EXPECT_EQ(access_of(r.pool_handle(), device_), cudaMemAccessFlagsProtReadWrite);
  for (int const d : pool_capable_devices()) {
    if (d != device_) { EXPECT_EQ(access_of(r.pool_handle(), d), cudaMemAccessFlagsProtNone) << d; }
  }
  expect_kernel_writes_host_reads(r, stream_, 53);

  // Naming no device leaves the pool host-only; the host still uses it.
  resource host_only{pool_options{}, std::nullopt, std::vector<int>{}};
  EXPECT_EQ(access_of(host_only.pool_handle(), device_), cudaMemAccessFlagsProtNone);
  auto* ptr = static_cast<unsigned char*>(host_only.allocate_sync(MiB));
  ASSERT_NE(ptr, nullptr);
  std::memset(ptr, 0x3c, MiB);
  EXPECT_EQ(ptr[MiB - 1], 0x3c);
  host_only.deallocate_sync(ptr, MiB);
}

TEST_F(async_pinned_resource_gpu_test, AccessibleDeviceOutOfRangeThrows)
{
  std::string msg = expect_throws<std::out_of_range>(
    [] { (void)resource{current_pool{}, std::nullopt, std::vector<int>{99}}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  msg = expect_throws<std::out_of_range>(
    [&] { (void)resource{pool_options{}, device_, std::vector<int>{device_, -1}}; });
  EXPECT_TRUE(contains(msg, "-1")) << msg;
  msg = expect_throws<std::out_of_range>(
    [] { (void)resource{pool_options{}, 99, std::vector<int>{0}}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  resource still_works{pool_options{}, device_, std::vector<int>{device_}};
  void* ptr = still_works.allocate_sync(KiB);
  ASSERT_NE(ptr, nullptr);
  still_works.deallocate_sync(ptr, KiB);
}

TEST_F(async_pinned_resource_gpu_test, ViewOfAHostPoolGetsDeviceAccess)
{
  cudaMemPool_t const pool = make_test_pool<resource>(device_);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(access_of(pool, device_), cudaMemAccessFlagsProtNone) << "host pools start host-only";
  {
    resource view{pool};
    EXPECT_EQ(view.pool_handle(), pool);
    EXPECT_EQ(access_of(pool, device_), cudaMemAccessFlagsProtReadWrite);
    expect_kernel_writes_host_reads(view, stream_, 54);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TEST_F(async_pinned_resource_gpu_test, KernelsReadWhatTheHostWrote)
{
  resource r;
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* ptr                   = static_cast<std::uint32_t*>(r.allocate_sync(bytes));
  ASSERT_NE(ptr, nullptr);
  for (std::size_t i = 0; i < words; ++i) {
    ptr[i] = pattern(i, 55);
  }
  EXPECT_EQ(device_mismatches(ptr, bytes, 55, stream_), 0U);

  // Copies between pinned host memory and device memory.
  void* dev{};
  ASSERT_EQ(cudaMallocAsync(&dev, bytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev, ptr, bytes, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  EXPECT_EQ(device_mismatches(dev, bytes, 55, stream_), 0U);
  ASSERT_EQ(cudaFreeAsync(dev, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  r.deallocate_sync(ptr, bytes);
}

TEST_F(async_pinned_resource_gpu_test, OwnedPoolOnTheHostLocation)
{
  // The host location of this runtime: Host from CUDA 13.0 on, the device's NUMA node before.
  resource r{pool_options{.location = resource_traits<resource>::location(device_)}};
  void* ptr = r.allocate(stream_, MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expect_memory_kind<resource>(ptr, device_);
  expect_usable<resource>(ptr, MiB, 56, stream_);
  r.deallocate(stream_, ptr, MiB);
}

TEST_F(async_pinned_resource_gpu_test, StreamsOfDevicesWithoutAccessThrowDeviceMismatch)
{
  if (visible_devices() < 2) { GTEST_SKIP() << "needs 2 GPUs"; }
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t other{};
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);

  resource only_zero{pool_options{}, 0, std::vector<int>{0}};
  try {
    void* ptr = only_zero.allocate(other, KiB);
    ADD_FAILURE() << "allocated " << ptr << " for a device without access";
  } catch (device_mismatch const& e) {
    EXPECT_EQ(e.resource_device(), 0);
    EXPECT_EQ(e.stream_device(), 1);
    EXPECT_TRUE(contains(e.what(), "pinned host memory")) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // Granted to every device (the default): device 1's kernels may use it.
  resource everywhere{pool_options{}, 0};
  void* ptr = everywhere.allocate(other, MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  expect_usable<resource>(ptr, MiB, 54, other);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  everywhere.deallocate(other, ptr, MiB);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

}  // namespace
}  // namespace rmm_next::test
