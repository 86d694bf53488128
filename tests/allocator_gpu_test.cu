/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// allocator<T, Resource> and polymorphic_allocator over the real pinned and managed resources:
// std::vector's memory comes from the resource's pool, the host fills it, kernels read and write
// it, and it goes back to the pool when the vector dies. Everything runs on device 0.
#include <rmm_next/allocator.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/polymorphic_allocator.hpp>
#include <rmm_next/pool_options.hpp>

#include "support/kernels.cuh"
#include "support/stream_guard.hpp"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

using rmm_next::test::block_size;
using rmm_next::test::grid_for;
using rmm_next::test::pattern;
using rmm_next::test::stream_guard;

#define EXPECT_CUDA_OK(call) EXPECT_EQ(cudaSuccess, (call)) << #call
#define ASSERT_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

constexpr std::size_t elements = std::size_t{1} << 20;

/** What cudaPointerGetAttributes reports as the memory type of `ptr`. */
cudaMemoryType memory_type(void const* ptr)
{
  cudaPointerAttributes attrs{};
  EXPECT_CUDA_OK(cudaPointerGetAttributes(&attrs, ptr));
  return attrs.type;
}

template <class Resource>
struct kind;
template <>
struct kind<rmm_next::async_pinned_resource> {
  static constexpr cudaMemoryType memory_type = cudaMemoryTypeHost;
};
template <>
struct kind<rmm_next::async_managed_resource> {
  static constexpr cudaMemoryType memory_type = cudaMemoryTypeManaged;
};

/** A resource on a pool of its own (so that its statistics count this test only), or why not. */
template <class Resource>
std::optional<Resource> owned_pool_resource(std::string& why_not)
{
  try {
    return Resource{rmm_next::pool_options{}, 0};
  } catch (rmm_next::not_supported const& e) {
    why_not = e.what();
    return std::nullopt;
  }
}

#define MAKE_OWNED_OR_SKIP(Resource, name)                                        \
  std::string why_not;                                                            \
  auto name##_holder = owned_pool_resource<Resource>(why_not);                    \
  if (!name##_holder) { GTEST_SKIP() << "unsupported on device 0: " << why_not; } \
  Resource& name = *name##_holder

template <class Resource>
class AllocatorGpu : public ::testing::Test {};

using host_accessible_resources =
  ::testing::Types<rmm_next::async_pinned_resource, rmm_next::async_managed_resource>;
TYPED_TEST_SUITE(AllocatorGpu, host_accessible_resources);

TYPED_TEST(AllocatorGpu, VectorMemoryComesFromThePoolAndKernelsUseIt)
{
  MAKE_OWNED_OR_SKIP(TypeParam, resource);
  using vector = std::vector<float, rmm_next::allocator<float, TypeParam>>;
  stream_guard stream;
  {
    vector in(elements, resource);  // the host writes every element (value-initialized)
    vector out(elements, -1.0F, resource);
    EXPECT_EQ(memory_type(in.data()), kind<TypeParam>::memory_type);
    EXPECT_EQ(memory_type(out.data()), kind<TypeParam>::memory_type);
    EXPECT_GE(resource.statistics().used_bytes, 2 * elements * sizeof(float));

    for (std::size_t i = 0; i < elements; ++i) {
      in[i] = static_cast<float>(i % 1000);
    }
    // allocate_sync memory is usable on any stream at once: no synchronization needed here.
    rmm_next::test::transform_kernel<<<grid_for(elements), block_size, 0, stream>>>(
      in.data(), out.data(), elements);
    ASSERT_CUDA_OK(cudaGetLastError());
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < elements; ++i) {
      if (out[i] != 3.0F * static_cast<float>(i % 1000) + 1.0F) { ++wrong; }
    }
    EXPECT_EQ(wrong, 0U);

    // A kernel writes, the host reads.
    rmm_next::test::fill_kernel<<<grid_for(elements), block_size, 0, stream>>>(
      in.data(), elements, 7U);
    ASSERT_CUDA_OK(cudaGetLastError());
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    wrong = 0;
    for (std::size_t i = 0; i < elements; ++i) {
      if (in[i] != static_cast<float>(pattern(i, 7U))) { ++wrong; }
    }
    EXPECT_EQ(wrong, 0U);
  }
  // Freed on the resource's own stream: back in the pool once the device gets there.
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(resource.statistics().used_bytes, 0U);
}

TYPED_TEST(AllocatorGpu, GrowthReallocatesFromThePoolAndKeepsValues)
{
  MAKE_OWNED_OR_SKIP(TypeParam, resource);
  std::vector<int, rmm_next::allocator<int, TypeParam>> v{resource};
  for (int i = 0; i < 100000; ++i) {
    v.push_back(i);
  }
  EXPECT_EQ(memory_type(v.data()), kind<TypeParam>::memory_type);
  unsigned long long* mismatches{};
  ASSERT_CUDA_OK(cudaMallocManaged(&mismatches, sizeof(*mismatches)));
  *mismatches = 0;
  // The host overwrites every element with the pattern; a kernel counts those that differ.
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<int>(pattern(i, 0));
  }
  rmm_next::test::count_mismatches_kernel<<<grid_for(v.size()), block_size>>>(
    v.data(), v.size(), 0U, mismatches);
  ASSERT_CUDA_OK(cudaGetLastError());
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(*mismatches, 0U);
  EXPECT_CUDA_OK(cudaFree(mismatches));

  rmm_next::pool_statistics const stats = resource.statistics();
  EXPECT_GE(stats.used_bytes, v.capacity() * sizeof(int));
  // Each growth allocated the new buffer before freeing the old one.
  EXPECT_GT(stats.used_bytes_high, stats.used_bytes);
  decltype(v){resource}.swap(v);  // v's buffer goes back with the temporary
  EXPECT_EQ(v.capacity(), 0U);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(resource.statistics().used_bytes, 0U);
}

TEST(AllocatorGpu, DefaultConstructedUsesTheCurrentPinnedPool)
{
  std::vector<double, rmm_next::allocator<double, rmm_next::async_pinned_resource>> v(4096, 2.5);
  EXPECT_EQ(memory_type(v.data()), cudaMemoryTypeHost);
#if CUDART_VERSION >= 13000
  cudaMemLocation host{};
  host.type = cudaMemLocationTypeHost;
  cudaMemPool_t current{};
  ASSERT_CUDA_OK(cudaMemGetMemPool(&current, &host, cudaMemAllocationTypePinned));
  EXPECT_EQ(v.get_allocator().resource().pool_handle(), current);
#else  // no current host pool before CUDA 13.0: the resource created its own
  EXPECT_NE(v.get_allocator().resource().pool_handle(), nullptr);
#endif
  EXPECT_EQ(v.back(), 2.5);
}

TEST(AllocatorGpu, AllocatorsOfOnePoolAreEqual)
{
#if CUDART_VERSION >= 13000
  rmm_next::async_pinned_resource first;                             // the current pinned pool
  rmm_next::async_pinned_resource second{rmm_next::current_pool{}};  // the same pool again
#else  // no current host pool before CUDA 13.0: a copy shares the pool its original created
  rmm_next::async_pinned_resource first;
  rmm_next::async_pinned_resource second{first};
#endif
  MAKE_OWNED_OR_SKIP(rmm_next::async_pinned_resource, owned);
  using alloc = rmm_next::allocator<float, rmm_next::async_pinned_resource>;
  EXPECT_TRUE(alloc{first} == alloc{second});
  EXPECT_FALSE(alloc{first} == alloc{owned});

  // Memory from one goes back through the other.
  alloc a{first};
  alloc b{second};
  float* p = a.allocate(1000);
  p[999]   = 1.0F;
  b.deallocate(p, 1000);
}

TEST(AllocatorGpu, ExhaustionThrowsOutOfMemoryAndTheVectorSurvives)
{
  rmm_next::async_pinned_resource pinned;
  std::vector<float, rmm_next::allocator<float, rmm_next::async_pinned_resource>> v(
    16, 4.0F, pinned);
  try {
    v.reserve((std::size_t{1} << 50) / sizeof(float));  // 1 PiB
    FAIL() << "expected rmm_next::out_of_memory";
  } catch (rmm_next::out_of_memory const& e) {
    EXPECT_NE(std::string{e.what()}.find("out_of_memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(v.size(), 16U);
  EXPECT_EQ(v[15], 4.0F);
  v.push_back(5.0F);
  EXPECT_EQ(v.back(), 5.0F);
}

TEST(PolymorphicAllocatorGpu, OneVectorTypeOverPinnedAndManaged)
{
  MAKE_OWNED_OR_SKIP(rmm_next::async_pinned_resource, pinned);
  std::string managed_why_not;
  auto managed_holder = owned_pool_resource<rmm_next::async_managed_resource>(managed_why_not);
  if (!managed_holder) { GTEST_SKIP() << "managed unsupported: " << managed_why_not; }
  rmm_next::async_managed_resource& managed = *managed_holder;

  using vector = std::vector<float, rmm_next::host_device_polymorphic_allocator<float>>;
  stream_guard stream;
  {
    vector in(elements, 2.0F, pinned);
    vector out(elements, 0.0F, managed);
    EXPECT_EQ(memory_type(in.data()), cudaMemoryTypeHost);
    EXPECT_EQ(memory_type(out.data()), cudaMemoryTypeManaged);
    EXPECT_GE(pinned.statistics().used_bytes, elements * sizeof(float));
    EXPECT_GE(managed.statistics().used_bytes, elements * sizeof(float));
    EXPECT_FALSE(in.get_allocator() == out.get_allocator());

    rmm_next::test::transform_kernel<<<grid_for(elements), block_size, 0, stream>>>(
      in.data(), out.data(), elements);
    ASSERT_CUDA_OK(cudaGetLastError());
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    std::size_t wrong = 0;
    for (float const x : out) {
      if (x != 7.0F) { ++wrong; }
    }
    EXPECT_EQ(wrong, 0U);

    in.swap(out);  // memory and allocators move together
    EXPECT_EQ(memory_type(in.data()), cudaMemoryTypeManaged);
    EXPECT_TRUE(in.get_allocator() == vector::allocator_type{managed});
  }
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(pinned.statistics().used_bytes, 0U);
  EXPECT_EQ(managed.statistics().used_bytes, 0U);
}

TEST(PolymorphicAllocatorGpu, BuiltFromARef)
{
  MAKE_OWNED_OR_SKIP(rmm_next::async_pinned_resource, pinned);
  rmm_next::host_device_async_resource_ref ref{pinned};
  std::vector<int, rmm_next::host_polymorphic_allocator<int>> v(
    1000, 3, rmm_next::host_polymorphic_allocator<int>{ref});
  EXPECT_EQ(memory_type(v.data()), cudaMemoryTypeHost);
  EXPECT_GE(pinned.statistics().used_bytes, 1000 * sizeof(int));
  EXPECT_TRUE(v.get_allocator() == rmm_next::host_polymorphic_allocator<int>{pinned});
  EXPECT_EQ(v[999], 3);
}

}  // namespace
