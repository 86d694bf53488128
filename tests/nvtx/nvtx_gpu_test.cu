/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU test of the async resources' NVTX annotations, through the suite's injection library:
// named ranges around allocate, deallocate and allocate_sync; each allocation named after its
// resource (class, device, pool) and never registered as a region, also when threads reuse each
// other's memory; nothing named when an allocation fails; a statistics_adaptor's range around
// the resource's.

#include "recorder.hpp"
#include "trace.hpp"

#include "support/kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace rmm_next_test::nvtx {
namespace {

using rmm_next::async_device_resource;

/** @brief The name `r` gives its allocations. */
template <class Resource>
std::string name_of(Resource const& r)
{
  return rmm_next::detail::allocation_name({Resource::kind, r.device()}, r.pool_handle()).data();
}

class nvtx_gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_TRUE(injection_path_set);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    async_device_resource warm_up;  // the first annotated call loads the injection library
    warm_up.deallocate_sync(warm_up.allocate_sync(256), 256);
    ASSERT_TRUE(core_attached()) << "NVTX did not load the injection library";
    ASSERT_TRUE(memory_attached()) << "NVTX did not attach the memory extension";
    clear();
  }
  void TearDown() override
  {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  /** @brief Fills `bytes` at `ptr` on the stream and checks them: the memory is usable. */
  void expect_usable(void* ptr, std::size_t bytes)
  {
    using rmm_next::test::block_size;
    using rmm_next::test::grid_for;
    auto* words           = static_cast<std::uint32_t*>(ptr);
    std::size_t const n   = bytes / sizeof(std::uint32_t);
    unsigned long long* d = nullptr;
    ASSERT_EQ(cudaMallocAsync(&d, sizeof(*d), stream_), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(d, 0, sizeof(*d), stream_), cudaSuccess);
    rmm_next::test::fill_kernel<<<grid_for(n), block_size, 0, stream_>>>(words, n, 7U);
    rmm_next::test::count_mismatches_kernel<<<grid_for(n), block_size, 0, stream_>>>(
      words, n, 7U, d);
    unsigned long long mismatches = 1;
    ASSERT_EQ(cudaMemcpyAsync(&mismatches, d, sizeof(*d), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    ASSERT_EQ(cudaFreeAsync(d, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(mismatches, 0U);
  }

  cudaStream_t stream_{};
};

TEST_F(nvtx_gpu_test, StreamOrderedAllocationIsARangeAndANamedRegion)
{
  async_device_resource mr;
  void* p = mr.allocate(stream_, 1000);
  expect_usable(p, 1000);
  mr.deallocate(stream_, p, 1000);
  std::vector<std::string> const expected{
    "push async_device_resource::allocate",
    "name p " + name_of(mr),
    "pop",
    "push async_device_resource::deallocate",
    "pop",
  };
  EXPECT_EQ(trace(events(), {{p, "p"}}), expected);
}

TEST_F(nvtx_gpu_test, NamesAreRegisteredOnceInTheRmmNextDomain)
{
  async_device_resource mr;
  for (int i = 0; i < 10; ++i) {
    mr.deallocate_sync(mr.allocate_sync(256), 256);
  }
  std::vector<event> const all = all_events();
  EXPECT_EQ(count(all, call::domain_create), 1);
  EXPECT_EQ(count(all, call::domain_create, "rmm_next"), 1);
  for (char const* name : {"async_device_resource::allocate",
                           "async_device_resource::deallocate",
                           "async_device_resource::allocate_sync"}) {
    EXPECT_EQ(count(all, call::register_string, name), 1) << name;
  }
}

TEST_F(nvtx_gpu_test, SynchronousAllocationNestsTheStreamOrderedOne)
{
  async_device_resource mr;
  void* q = mr.allocate_sync(4096);
  expect_usable(q, 4096);
  mr.deallocate_sync(q, 4096);
  std::vector<std::string> const expected{
    "push async_device_resource::allocate_sync",
    "push async_device_resource::allocate",
    "name q " + name_of(mr),
    "pop",
    "pop",
    "push async_device_resource::deallocate",
    "pop",
  };
  EXPECT_EQ(trace(events(), {{q, "q"}}), expected);
}

TEST_F(nvtx_gpu_test, NoNameForNullptrOrFailures)
{
  async_device_resource mr;
  EXPECT_EQ(mr.allocate(stream_, 0), nullptr);
  mr.deallocate(stream_, nullptr, 0);
  EXPECT_THROW((void)mr.allocate(stream_, 64, 512), rmm_next::bad_alloc);
  EXPECT_THROW((void)mr.allocate(stream_, std::size_t{1} << 50), rmm_next::out_of_memory);
  std::vector<std::string> const expected{
    "push async_device_resource::allocate",
    "pop",  // 0 bytes
    "push async_device_resource::deallocate",
    "pop",  // nullptr
    "push async_device_resource::allocate",
    "pop",  // bad alignment
    "push async_device_resource::allocate",
    "pop",  // out of memory
  };
  EXPECT_EQ(trace(events()), expected);
}

TEST_F(nvtx_gpu_test, EachResourceNamesItsRanges)
{
  auto check = [this](auto& mr, std::string const& name) {
    clear();
    void* p = mr.allocate(stream_, 512);
    mr.deallocate(stream_, p, 512);
    std::vector<std::string> const expected{
      "push " + name + "::allocate",
      "name p " + name_of(mr),
      "pop",
      "push " + name + "::deallocate",
      "pop",
    };
    EXPECT_EQ(trace(events(), {{p, "p"}}), expected);
  };
  rmm_next::async_pinned_resource pinned;
  check(pinned, "async_pinned_resource");
  try {
    rmm_next::async_managed_resource managed;
    check(managed, "async_managed_resource");
  } catch (rmm_next::not_supported const& e) {
    std::printf("managed pools not supported here: %s\n", e.what());
  }
}

TEST_F(nvtx_gpu_test, StatisticsAdaptorRangeEnclosesTheResources)
{
  rmm_next::statistics_adaptor<async_device_resource> stats{async_device_resource{}};
  void* p = stats.allocate(stream_, 300);
  stats.deallocate(stream_, p, 300);
  std::vector<std::string> const expected{
    "push statistics_adaptor::allocate",
    "push async_device_resource::allocate",
    "name p " + name_of(stats.upstream_resource()),
    "pop",
    "pop",
    "push statistics_adaptor::deallocate",
    "push async_device_resource::deallocate",
    "pop",
    "pop",
  };
  EXPECT_EQ(trace(events(), {{p, "p"}}), expected);
  EXPECT_EQ(stats.statistics().bytes.total, 300);
}

TEST_F(nvtx_gpu_test, EveryAllocationIsNamedAndNoneIsRegisteredAcrossThreads)
{
  // Threads allocate and free on their own streams from one pool, so addresses are reused, also
  // across threads: every allocation is named after the resource, and nothing is registered or
  // unregistered (the driver's pool allocations are allocations to the tools already).
  constexpr int threads = 8;
  constexpr int pairs   = 500;
  async_device_resource mr;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([mr, t]() mutable {
      cudaStream_t stream{};
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      std::size_t const bytes = 256 * static_cast<std::size_t>(1 + t % 2);
      for (int i = 0; i < pairs; ++i) {
        void* p = mr.allocate(stream, bytes);
        mr.deallocate(stream, p, bytes);
        if (i % 100 == 99) { ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess); }
      }
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  std::vector<event> const recorded = events();
  expect_balanced(recorded);
  EXPECT_EQ(count(recorded, call::region_name, name_of(mr)), threads * pairs);
  EXPECT_EQ(count(recorded, call::region_name), threads * pairs);
  EXPECT_EQ(count(recorded, call::region_register), 0);
  EXPECT_EQ(count(recorded, call::region_unregister), 0);
}

}  // namespace
}  // namespace rmm_next_test::nvtx
