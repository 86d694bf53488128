/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The process-wide map and the free functions on real devices, and per-library maps on two
// devices. Tests that need two devices skip when fewer are visible.

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using rmm_next::async_device_resource;
using rmm_next::device_async_resource_ref;

#define EXPECT_CUDA_OK(call) EXPECT_EQ(cudaSuccess, (call)) << #call

constexpr std::size_t one_mib = std::size_t{1} << 20;

int visible_devices()
{
  int count{};
  EXPECT_CUDA_OK(cudaGetDeviceCount(&count));
  return count;
}

/** The device `ptr` lives on, or -1 when it is not device memory. */
int device_of(void* ptr)
{
  cudaPointerAttributes attrs{};
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&attrs, ptr));
  return attrs.type == cudaMemoryTypeDevice ? attrs.device : -1;
}

/** The current pool of `device` (cudaMemGetMemPool, device location; cudaDeviceGetMemPool before
 * CUDA 13.0). */
cudaMemPool_t current_pool_of(int device)
{
  cudaMemPool_t pool{};
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id   = device;
  EXPECT_CUDA_OK(cudaMemGetMemPool(&pool, &loc, cudaMemAllocationTypePinned));
#else
  EXPECT_CUDA_OK(cudaDeviceGetMemPool(&pool, device));
#endif
  return pool;
}

/** True when `ref` allocates from an async_device_resource on `device`'s current pool. */
bool is_current_pool_resource(device_async_resource_ref ref, int device)
{
  async_device_resource expected{device};
  return ref == device_async_resource_ref{expected};
}

/** Restores the current device at scope exit. */
struct restore_device {
  int device = rmm_next::detail::current_device();
  ~restore_device() { (void)cudaSetDevice(device); }
};

__global__ void fill(int* data, std::size_t n, int value)
{
  auto const i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) { data[i] = value + static_cast<int>(i); }
}

/** The release threshold of `device`'s current pool. */
std::uint64_t current_pool_threshold(int device)
{
  std::uint64_t threshold{};
  EXPECT_CUDA_OK(
    cudaMemPoolGetAttribute(current_pool_of(device), cudaMemPoolAttrReleaseThreshold, &threshold));
  return threshold;
}

// First in this program: it needs a device whose initial resource nothing has made yet.
TEST(PerDeviceResource, SetAndResetDoNotMakeTheInitialResource)
{
  int const device = visible_devices() - 1;
  if (current_pool_threshold(device) != 0) {
    GTEST_SKIP() << "the release threshold of device " << device << "'s current pool is already "
                 << "raised: the initial resource may exist";
  }
  async_device_resource own{rmm_next::pool_options{}, device};
  // Making the initial resource (an async_device_resource on the current pool) would raise the
  // pool's release threshold, for every cudaMallocAsync user in the process.
  auto const previous = rmm_next::set_per_device_resource_ref(device, own);
  EXPECT_EQ(current_pool_threshold(device), 0U) << "set made the initial resource";
  EXPECT_FALSE(previous == device_async_resource_ref{own});
  EXPECT_TRUE(rmm_next::reset_per_device_resource_ref(device) == device_async_resource_ref{own});
  EXPECT_EQ(current_pool_threshold(device), 0U) << "reset made the initial resource";
  EXPECT_TRUE(rmm_next::set_per_device_resource_ref(device, own) == previous);
  EXPECT_TRUE(rmm_next::set_per_device_resource_ref(device, previous) ==
              device_async_resource_ref{own});  // setting it back is a reset
  EXPECT_EQ(current_pool_threshold(device), 0U);

  // Used, the ref set returned allocates from the initial resource, which it makes.
  restore_device restore;
  ASSERT_EQ(cudaSuccess, cudaSetDevice(device));
  device_async_resource_ref stand_in = previous;
  void* ptr                          = stand_in.allocate_sync(one_mib, rmm_next::default_alignment);
  EXPECT_EQ(device_of(ptr), device);
  stand_in.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);
  EXPECT_NE(current_pool_threshold(device), 0U);
  EXPECT_TRUE(is_current_pool_resource(rmm_next::get_per_device_resource_ref(device), device));
}

TEST(PerDeviceResource, InitialResourceIsAsyncDeviceResourceOnCurrentPool)
{
  for (int d = 0; d < visible_devices(); ++d) {
    EXPECT_TRUE(is_current_pool_resource(rmm_next::get_per_device_resource_ref(d), d))
      << "device " << d;
  }
}

TEST(PerDeviceResource, CurrentDeviceFollowsCudaSetDevice)
{
  restore_device restore;
  for (int d = 0; d < visible_devices(); ++d) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    auto ref = rmm_next::get_current_device_resource_ref();
    EXPECT_TRUE(ref == rmm_next::get_per_device_resource_ref(d));
    void* ptr = ref.allocate_sync(one_mib, rmm_next::default_alignment);
    EXPECT_EQ(device_of(ptr), d);
    ref.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);
  }
}

TEST(PerDeviceResource, AllocationsLandOnTheDeviceAskedFor)
{
  // Without changing the current device.
  int const current = rmm_next::detail::current_device();
  for (int d = 0; d < visible_devices(); ++d) {
    auto ref  = rmm_next::get_per_device_resource_ref(d);
    void* ptr = ref.allocate_sync(one_mib, rmm_next::default_alignment);
    EXPECT_EQ(device_of(ptr), d);
    ref.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);
    EXPECT_EQ(rmm_next::detail::current_device(), current);
  }
}

TEST(PerDeviceResource, SetGetResetRoundTripThroughFreeFunctions)
{
  restore_device restore;
  int const count = visible_devices();
  std::vector<async_device_resource> own;
  for (int d = 0; d < count; ++d) {
    own.emplace_back(rmm_next::pool_options{}, d);
  }

  for (int d = 0; d < count; ++d) {
    ASSERT_EQ(cudaSuccess, cudaSetDevice(d));
    auto const initial = rmm_next::get_current_device_resource_ref();
    EXPECT_TRUE(rmm_next::set_current_device_resource_ref(own[d]) == initial);
    EXPECT_TRUE(rmm_next::get_current_device_resource_ref() == device_async_resource_ref{own[d]});
    EXPECT_TRUE(rmm_next::get_per_device_resource_ref(d) == device_async_resource_ref{own[d]});

    auto ref  = rmm_next::get_current_device_resource_ref();
    void* ptr = ref.allocate_sync(one_mib, rmm_next::default_alignment);
    EXPECT_GE(own[d].statistics().used_bytes, one_mib) << "allocated from the pool that was set";
    ref.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);

    EXPECT_TRUE(rmm_next::reset_current_device_resource_ref() == device_async_resource_ref{own[d]});
    EXPECT_TRUE(rmm_next::get_current_device_resource_ref() == initial);
  }

  // The explicit-device spelling, from device 0.
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  int const last          = count - 1;
  auto const initial_last = rmm_next::get_per_device_resource_ref(last);
  EXPECT_TRUE(rmm_next::set_per_device_resource_ref(last, own[last]) == initial_last);
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(last) == device_async_resource_ref{own[last]});
  if (last != 0) {
    EXPECT_FALSE(rmm_next::get_current_device_resource_ref() ==
                 device_async_resource_ref{own[last]});
  }
  EXPECT_TRUE(rmm_next::reset_per_device_resource_ref(last) ==
              device_async_resource_ref{own[last]});
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(last) == initial_last);
}

TEST(PerDeviceResource, RefsFromBeforeASetStillAllocate)
{
  auto initial = rmm_next::get_per_device_resource_ref(0);
  async_device_resource own{rmm_next::pool_options{}, 0};
  rmm_next::set_per_device_resource_ref(0, own);
  rmm_next::reset_per_device_resource_ref(0);
  rmm_next::set_per_device_resource_ref(0, own);

  void* ptr = initial.allocate_sync(one_mib, rmm_next::default_alignment);
  EXPECT_EQ(device_of(ptr), 0);
  initial.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);
  rmm_next::reset_per_device_resource_ref(0);
}

TEST(PerDeviceResource, KernelWritesThroughMemoryFromTheCurrentRef)
{
  constexpr std::size_t n     = 1 << 20;
  constexpr std::size_t bytes = n * sizeof(int);
  cudaStream_t stream{};
  ASSERT_EQ(cudaSuccess, cudaStreamCreate(&stream));

  auto ref = rmm_next::get_current_device_resource_ref();
  auto* ptr =
    static_cast<int*>(ref.allocate(cuda::stream_ref{stream}, bytes, rmm_next::default_alignment));
  ASSERT_NE(ptr, nullptr);
  fill<<<(n + 255) / 256, 256, 0, stream>>>(ptr, n, 7);
  EXPECT_CUDA_OK(cudaGetLastError());
  std::vector<int> host(n);
  EXPECT_CUDA_OK(cudaMemcpyAsync(host.data(), ptr, bytes, cudaMemcpyDeviceToHost, stream));
  ref.deallocate(cuda::stream_ref{stream}, ptr, bytes, rmm_next::default_alignment);
  EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_CUDA_OK(cudaStreamDestroy(stream));

  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (host[i] != 7 + static_cast<int>(i)) { ++wrong; }
  }
  EXPECT_EQ(wrong, 0U);
}

TEST(PerDeviceResource, BadDeviceIdsThrowOutOfRangeAndChangeNothing)
{
  int const count   = visible_devices();
  auto const before = rmm_next::get_per_device_resource_ref(0);
  async_device_resource own{0};
  for (int const bad : {-1, count, count + 5}) {
    try {
      rmm_next::set_per_device_resource_ref(bad, own);
      ADD_FAILURE() << "no exception for device " << bad;
    } catch (std::out_of_range const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("device id " + std::to_string(bad)), std::string::npos) << what;
      EXPECT_NE(what.find(std::to_string(count) + " device(s)"), std::string::npos) << what;
    }
    EXPECT_THROW((void)rmm_next::get_per_device_resource_ref(bad), std::out_of_range);
    EXPECT_THROW(rmm_next::reset_per_device_resource_ref(bad), std::out_of_range);
  }
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(0) == before);
}

TEST(PerDeviceResourceTwoDevices, EachDeviceHasItsOwnResourceAndPool)
{
  if (visible_devices() < 2) { GTEST_SKIP() << "needs 2 CUDA devices"; }
  auto r0 = rmm_next::get_per_device_resource_ref(0);
  auto r1 = rmm_next::get_per_device_resource_ref(1);
  EXPECT_FALSE(r0 == r1);
  EXPECT_NE(current_pool_of(0), current_pool_of(1));
  EXPECT_TRUE(is_current_pool_resource(r0, 0));
  EXPECT_TRUE(is_current_pool_resource(r1, 1));

  async_device_resource pool0{0};
  async_device_resource pool1{1};
  auto const used1 = pool1.statistics().used_bytes;
  void* p0         = r0.allocate_sync(one_mib, rmm_next::default_alignment);
  EXPECT_EQ(device_of(p0), 0);
  EXPECT_GE(pool0.statistics().used_bytes, one_mib);
  EXPECT_EQ(pool1.statistics().used_bytes, used1) << "device 1's pool is untouched";
  void* p1 = r1.allocate_sync(one_mib, rmm_next::default_alignment);
  EXPECT_EQ(device_of(p1), 1);
  EXPECT_GE(pool1.statistics().used_bytes, used1 + one_mib);
  r0.deallocate_sync(p0, one_mib, rmm_next::default_alignment);
  r1.deallocate_sync(p1, one_mib, rmm_next::default_alignment);
}

TEST(PerDeviceResourceTwoDevices, MapsOfTwoLibrariesStayIndependent)
{
  if (visible_devices() < 2) { GTEST_SKIP() << "needs 2 CUDA devices"; }
  // Library A keeps the driver's current pools; library B owns a pool per device.
  rmm_next::per_device_resource_map<device_async_resource_ref> library_a{
    [](int device) { return async_device_resource{device}; }};
  std::vector<cudaMemPool_t> b_pools(static_cast<std::size_t>(visible_devices()));
  rmm_next::per_device_resource_map<device_async_resource_ref> library_b{[&b_pools](int device) {
    async_device_resource r{rmm_next::pool_options{}, device};
    b_pools[static_cast<std::size_t>(device)] = r.pool_handle();
    return r;
  }};

  auto const process_1 = rmm_next::get_per_device_resource_ref(1);
  auto const b_1       = library_b.get(1);
  auto const b_0       = library_b.get(0);
  EXPECT_FALSE(b_0 == b_1);
  ASSERT_NE(b_pools[0], nullptr);
  ASSERT_NE(b_pools[1], nullptr);
  EXPECT_NE(b_pools[0], b_pools[1]);
  EXPECT_NE(b_pools[1], current_pool_of(1));

  async_device_resource mine{rmm_next::pool_options{}, 1};
  library_a.set(1, mine);
  EXPECT_TRUE(library_a.get(1) == device_async_resource_ref{mine});
  EXPECT_TRUE(library_b.get(1) == b_1) << "library B's map is its own";
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(1) == process_1) << "so is the process map";
  EXPECT_TRUE(is_current_pool_resource(library_a.get(0), 0));

  // Library B's allocations come from its own pool on the device asked for.
  async_device_resource b_view{b_pools[1], 1};
  auto ref  = library_b.get(1);
  void* ptr = ref.allocate_sync(one_mib, rmm_next::default_alignment);
  EXPECT_EQ(device_of(ptr), 1);
  EXPECT_GE(b_view.statistics().used_bytes, one_mib);
  ref.deallocate_sync(ptr, one_mib, rmm_next::default_alignment);
}

}  // namespace
