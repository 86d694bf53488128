/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CCCL's pools and type-erased resources with rmm-next's, on a device: an rmm-next resource over a
// cuda::device_memory_pool and its pool_ref, CCCL's pool_ref and an rmm-next adaptor over an
// rmm-next pool, rmm-next resources inside cuda::mr::any_resource and shared_resource (CCCL 3.2
// and later), resource_cast behind the process-wide refs (CCCL 3.4 and later), the owning
// per-device setters with get_current_device_resource_ref (every CCCL), and the pool attributes
// CUDA 13.3 added, read by rmm-next's pool statistics as CCCL 3.5 reads them. Each round trip
// allocates, has a kernel write every byte and another count the bytes that differ, and frees.
//
// Built against the toolkit's CCCL (cccl_interop_gpu_test) and, where a newer one is given
// (RMM_NEXT_TEST_CCCL_INCLUDE, or RMM's with RMM_NEXT_RMM_ROOT), against it too
// (cccl_interop_newer_cccl_gpu_test). Tests that need a newer CCCL than the build's skip, saying
// which.

#include "support/cccl_version.hpp"
#include "support/device_round_trip.cuh"
#include "support/stream_guard.hpp"

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/any_resource.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/pool_statistics.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace {

using rmm_next::async_device_resource;
using rmm_next::device_async_resource_ref;
using rmm_next::pool_options;
using rmm_next::test::device_round_trip;
using rmm_next::test::needs_cccl;
using rmm_next::test::stream_guard;

constexpr std::size_t bytes     = std::size_t{4} << 20;
constexpr std::size_t alignment = 256;

/** The used bytes of `pool` once `stream` is done. */
std::uint64_t used_after(cudaMemPool_t pool, cudaStream_t stream)
{
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::uint64_t used{};
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used), cudaSuccess);
  return used;
}

/** Allocates `bytes` through `resource` on `stream`, round-trips them, frees; true when clean. */
template <class Resource>
bool round_trips(Resource& resource, cudaStream_t stream, std::uint32_t seed)
{
  void* ptr = resource.allocate(cuda::stream_ref{stream}, bytes, alignment);
  if (ptr == nullptr) { return false; }
  unsigned long long const mismatches = device_round_trip(ptr, bytes, seed, stream);
  resource.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  EXPECT_EQ(mismatches, 0ULL);
  return mismatches == 0;
}

class CcclInterop : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaSetDevice(0), cudaSuccess); }
};

#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 2)

TEST_F(CcclInterop, AnRmmNextResourceViewsACcclDeviceMemoryPool)
{
  stream_guard stream;
  cuda::device_memory_pool pool{cuda::device_ref{0}};
  {
    async_device_resource view{pool.get(), 0};
    EXPECT_EQ(view.pool_handle(), pool.get());
    void* ptr = view.allocate(cuda::stream_ref{stream}, bytes, alignment);
    EXPECT_EQ(device_round_trip(ptr, bytes, 1, stream), 0ULL);
    EXPECT_GE(view.statistics().used_bytes, bytes);
    EXPECT_EQ(pool.attribute(cuda::memory_pool_attributes::used_mem_current),
              view.statistics().used_bytes)
      << "one pool, read by both";
    view.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);

    // Through the pool's ref: the same pool, so the resources compare equal.
    cuda::device_memory_pool_ref ref{pool.get()};
    async_device_resource view_of_ref{ref.get(), 0};
    EXPECT_TRUE(view_of_ref == view);
    EXPECT_TRUE(round_trips(view_of_ref, stream, 2));
  }
  // The views never destroyed the pool: CCCL still allocates from it.
  EXPECT_TRUE(round_trips(pool, stream, 3));
  EXPECT_EQ(used_after(pool.get(), stream), 0U);
}

TEST_F(CcclInterop, CcclsPoolRefAndAnRmmNextAdaptorOverItUseAnRmmNextPool)
{
  stream_guard stream;
  async_device_resource owned{pool_options{}, 0};
  cuda::device_memory_pool_ref ref{owned.pool_handle()};
  void* ptr = ref.allocate(cuda::stream_ref{stream}, bytes, alignment);
  EXPECT_EQ(device_round_trip(ptr, bytes, 4, stream), 0ULL);
  EXPECT_GE(owned.statistics().used_bytes, bytes) << "CCCL allocated from rmm-next's pool";
  owned.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);  // the same pool frees it
  EXPECT_EQ(used_after(owned.pool_handle(), stream), 0U);

  rmm_next::statistics_adaptor counted{ref};
  EXPECT_TRUE(round_trips(counted, stream, 5));
  EXPECT_EQ(counted.statistics().allocations.total, 1);
  EXPECT_EQ(counted.statistics().bytes.current, 0);
}

TEST_F(CcclInterop, AnAnyResourceHoldingAnRmmNextPoolRoundTrips)
{
  stream_guard stream;
  async_device_resource owned{pool_options{}, 0};
  cudaMemPool_t const pool = owned.pool_handle();
  cuda::mr::any_resource<cuda::mr::device_accessible> held{std::move(owned)};
  void* ptr = held.allocate(cuda::stream_ref{stream}, bytes, alignment);
  EXPECT_EQ(device_round_trip(ptr, bytes, 6, stream), 0ULL);
  EXPECT_GE(used_after(pool, stream), bytes);
#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 4)
  auto* inside = cuda::mr::resource_cast<async_device_resource>(&held);
  ASSERT_NE(inside, nullptr);
  EXPECT_EQ(inside->pool_handle(), pool);
  EXPECT_GE(inside->statistics().used_bytes, bytes);
#endif
  held.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  EXPECT_EQ(used_after(pool, stream), 0U);

  // Through a ref to it, and a copy (which shares the pool).
  device_async_resource_ref ref{held};
  EXPECT_TRUE(round_trips(ref, stream, 7));
  auto copy = held;
  EXPECT_TRUE(round_trips(copy, stream, 8));
  EXPECT_EQ(used_after(pool, stream), 0U);
}

TEST_F(CcclInterop, ASharedResourceHoldingAnRmmNextPoolRoundTrips)
{
  stream_guard stream;
  auto shared = cuda::mr::make_shared_resource<async_device_resource>(pool_options{}, 0);
  auto copy   = shared;
  EXPECT_TRUE(copy == shared);
  EXPECT_TRUE(round_trips(copy, stream, 9));
  device_async_resource_ref ref{shared};
  EXPECT_TRUE(round_trips(ref, stream, 10));
  cuda::mr::any_resource<cuda::mr::device_accessible> held{shared};
  EXPECT_TRUE(round_trips(held, stream, 11));
}

#else

TEST_F(CcclInterop, AnRmmNextResourceViewsACcclDeviceMemoryPool)
{
  GTEST_SKIP() << needs_cccl("cuda::device_memory_pool, any_resource and shared_resource", "3.2");
}

#endif

TEST_F(CcclInterop, PoolStatisticsHaveTheCuda133AttributesWhereTheRuntimeHasThem)
{
  constexpr std::uint64_t maximum = std::uint64_t{1} << 30;
  async_device_resource owned{
    pool_options{.maximum_pool_size  = maximum,
                 .export_handle_type = rmm_next::allocation_handle_type::posix_file_descriptor},
    0};
  rmm_next::pool_statistics const s = owned.statistics();
  int driver{};
  ASSERT_EQ(cudaDriverGetVersion(&driver), cudaSuccess);
  std::printf("runtime headers %d, driver %d: the CUDA 13.3 pool attributes are %s\n",
              CUDART_VERSION,
              driver,
              s.allocation_type ? "read" : "not available");
  if (!s.allocation_type) {
    // Compiled against an older CUDA, or a driver that does not answer them: all empty.
    EXPECT_TRUE(CUDART_VERSION < 13030 || driver < 13030)
      << "a CUDA 13.3 program on a CUDA 13.3 driver reads them";
    EXPECT_FALSE(s.export_handle_types.has_value());
    EXPECT_FALSE(s.location.has_value());
    EXPECT_FALSE(s.maximum_pool_size.has_value());
    EXPECT_FALSE(s.hardware_decompress.has_value());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the driver's refusal was cleared";
    return;
  }
  EXPECT_EQ(s.allocation_type, cudaMemAllocationTypePinned);
  EXPECT_EQ(s.export_handle_types, rmm_next::allocation_handle_type::posix_file_descriptor);
  ASSERT_TRUE(s.location.has_value());
  EXPECT_EQ(s.location->type, cudaMemLocationTypeDevice);
  EXPECT_EQ(s.location->id, 0);
  ASSERT_TRUE(s.maximum_pool_size.has_value());
  EXPECT_GE(*s.maximum_pool_size, maximum) << "the driver may round the bound up";
  EXPECT_EQ(s.hardware_decompress, false);
#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 5) && CUDART_VERSION >= 13030
  // The same values as CCCL 3.5 reads them.
  namespace attributes = cuda::memory_pool_attributes;
  cuda::device_memory_pool_ref ref{owned.pool_handle()};
  EXPECT_EQ(*s.allocation_type, ref.attribute(attributes::allocation_type));
  EXPECT_EQ(static_cast<cudaMemAllocationHandleType>(*s.export_handle_types),
            ref.attribute(attributes::export_handle_types));
  EXPECT_EQ(s.location->id, ref.attribute(attributes::location_id));
  EXPECT_EQ(s.location->type, ref.attribute(attributes::location_type));
  EXPECT_EQ(*s.maximum_pool_size, ref.attribute(attributes::max_pool_size));
  EXPECT_EQ(*s.hardware_decompress, ref.attribute(attributes::hw_decompress_enabled));
#endif
  // The device's current pool, which rmm-next did not make: no bound, no export handle.
  rmm_next::pool_statistics const current = async_device_resource{0}.statistics();
  EXPECT_EQ(current.maximum_pool_size, 0U);
  EXPECT_EQ(current.export_handle_types, rmm_next::allocation_handle_type::none);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "nothing left sticky";
}

TEST_F(CcclInterop, TheProcessWideOwningSetterHandsItsPoolToTheCurrentRef)
{
  stream_guard stream;
  async_device_resource pool{pool_options{}, 0};
  auto previous = rmm_next::set_current_device_resource(pool);  // a copy: shares the pool
  auto ref      = rmm_next::get_current_device_resource_ref();
  EXPECT_TRUE(ref == device_async_resource_ref{pool});
  void* ptr = ref.allocate(cuda::stream_ref{stream}, bytes, alignment);
  EXPECT_EQ(device_round_trip(ptr, bytes, 12, stream), 0ULL);
  EXPECT_GE(pool.statistics().used_bytes, bytes) << "the current ref allocates from `pool`";
#if RMM_NEXT_TEST_CCCL_AT_LEAST(3, 4)
  auto* found = cuda::mr::resource_cast<async_device_resource>(&ref);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->pool_handle(), pool.pool_handle());
#endif
  ref.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  EXPECT_EQ(used_after(pool.pool_handle(), stream), 0U);

  auto mine = rmm_next::set_current_device_resource(std::move(previous));
  device_async_resource_ref to_mine{mine};
  EXPECT_TRUE(to_mine == device_async_resource_ref{pool}) << "the map's copy came back";
  async_device_resource current_pool{0};
  EXPECT_TRUE(rmm_next::get_current_device_resource_ref() ==
              device_async_resource_ref{current_pool})
    << "the initial resource, on the device's current pool, again";
  EXPECT_TRUE(round_trips(to_mine, stream, 13));
}

}  // namespace
