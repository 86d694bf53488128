/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// pool_statistics against a fake CUDA runtime (support/fake_cuda_runtime.cpp): the byte counts,
// and the pool attributes CUDA 13.3 added (allocation type, export handle types, location,
// maximum size, hardware decompression), which statistics() reads where the runtime has them.
// Compiled against CUDA 13.3 or later the attributes must match how each pool was made, and be
// empty when the driver refuses them (an older driver); compiled against an older CUDA they are
// always empty.

#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/default_pool.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/pool_statistics.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace {

namespace fake_cuda = rmm_next::test::fake_cuda;
using rmm_next::allocation_handle_type;
using rmm_next::async_device_resource;
using rmm_next::pool_options;
using rmm_next::pool_statistics;

constexpr std::size_t one_gib = std::size_t{1} << 30;

class PoolStatistics : public ::testing::Test {
 protected:
  void SetUp() override { fake_cuda::reset(2); }
};

/** The five CUDA 13.3 attributes are all empty. */
void expect_no_cuda_13_3_attributes(pool_statistics const& s)
{
  EXPECT_FALSE(s.allocation_type.has_value());
  EXPECT_FALSE(s.export_handle_types.has_value());
  EXPECT_FALSE(s.location.has_value());
  EXPECT_FALSE(s.maximum_pool_size.has_value());
  EXPECT_FALSE(s.hardware_decompress.has_value());
}

TEST_F(PoolStatistics, ByteCountsComeFromThePool)
{
  async_device_resource r{pool_options{}, 0};
  cuda::stream_ref const stream{fake_cuda::make_stream(0)};
  void* ptr = r.allocate(stream, 1 << 20);
  EXPECT_EQ(r.statistics().used_bytes, std::uint64_t{1} << 20);
  EXPECT_EQ(r.statistics().reserved_bytes, std::uint64_t{1} << 20);
  EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
  r.deallocate(stream, ptr, 1 << 20);  // (the fake driver does not count frees)
}

#if CUDART_VERSION >= 13030

TEST_F(PoolStatistics, Cuda133AttributesSayHowAnOwnedPoolWasMade)
{
  async_device_resource r{
    pool_options{.maximum_pool_size  = one_gib,
                 .export_handle_type = allocation_handle_type::posix_file_descriptor},
    1};
  pool_statistics const s = r.statistics();
  EXPECT_EQ(s.allocation_type, cudaMemAllocationTypePinned);
  EXPECT_EQ(s.export_handle_types, allocation_handle_type::posix_file_descriptor);
  ASSERT_TRUE(s.location.has_value());
  EXPECT_EQ(s.location->type, cudaMemLocationTypeDevice);
  EXPECT_EQ(s.location->id, 1);
  EXPECT_EQ(s.maximum_pool_size, one_gib);
  EXPECT_EQ(s.hardware_decompress, false);

  async_device_resource decompress{pool_options{.hardware_decompress = true}, 0};
  EXPECT_EQ(decompress.statistics().hardware_decompress, true);
  EXPECT_EQ(decompress.statistics().maximum_pool_size, 0U) << "no bound asked for";
  EXPECT_EQ(decompress.statistics().export_handle_types, allocation_handle_type::none);
}

TEST_F(PoolStatistics, Cuda133AttributesOfManagedPinnedAndDriverPools)
{
  rmm_next::async_managed_resource managed{pool_options{}, 1};
  EXPECT_EQ(managed.statistics().allocation_type, cudaMemAllocationTypeManaged);
  ASSERT_TRUE(managed.statistics().location.has_value());
  EXPECT_EQ(managed.statistics().location->id, 1);

  rmm_next::async_pinned_resource pinned{pool_options{}};
  EXPECT_EQ(pinned.statistics().allocation_type, cudaMemAllocationTypePinned);
  ASSERT_TRUE(pinned.statistics().location.has_value());
  EXPECT_NE(pinned.statistics().location->type, cudaMemLocationTypeDevice) << "host memory";

  async_device_resource on_default{rmm_next::default_pool{}, 0};
  pool_statistics const s = on_default.statistics();
  EXPECT_EQ(s.allocation_type, cudaMemAllocationTypePinned);
  ASSERT_TRUE(s.location.has_value());
  EXPECT_EQ(s.location->type, cudaMemLocationTypeDevice);
  EXPECT_EQ(s.location->id, 0);
}

TEST_F(PoolStatistics, ADriverWithoutThemLeavesThemEmpty)
{
  fake_cuda::fake().knows_pool_attributes_13_3 = false;
  async_device_resource r{pool_options{.maximum_pool_size = one_gib}, 0};
  cuda::stream_ref const stream{fake_cuda::make_stream(0)};
  void* ptr               = r.allocate(stream, 4096);
  pool_statistics const s = r.statistics();
  expect_no_cuda_13_3_attributes(s);
  EXPECT_EQ(s.used_bytes, 4096U) << "the byte counts are still read";
  r.deallocate(stream, ptr, 4096);
}

#else

TEST_F(PoolStatistics, Cuda133AttributesAreEmptyBeforeCuda133)
{
  // This program was compiled against a CUDA without them: statistics() does not ask.
  async_device_resource r{pool_options{.maximum_pool_size = one_gib}, 0};
  expect_no_cuda_13_3_attributes(r.statistics());
  rmm_next::async_managed_resource managed{pool_options{}, 1};
  expect_no_cuda_13_3_attributes(managed.statistics());
  std::printf("compiled against CUDA %d.%d: the CUDA 13.3 pool attributes are not read\n",
              CUDART_VERSION / 1000,
              CUDART_VERSION % 1000 / 10);
}

#endif

}  // namespace
