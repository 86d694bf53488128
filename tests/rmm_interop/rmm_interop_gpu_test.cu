/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// rmm-next and RMM 26.10 in one process (built only with -DRMM_NEXT_RMM_ROOT, see
// cmake/rmm_next_rmm.cmake): an rmm-next resource as RMM's current device resource under
// device_uvector and exec_policy; RMM's adaptors above rmm-next's resources and RMM's arena below
// rmm-next's adaptors; CCCL's cuda::buffer (CCCL >= 3.4, here RMM's 3.5) over rmm-next resources.

#include "../support/kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <rmm/cuda_stream.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/exec_policy.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <cuda/buffer>
#include <cuda/std/version>

#include <cstddef>
#include <cstdint>
#include <vector>

static_assert(CCCL_MAJOR_VERSION > 3 || (CCCL_MAJOR_VERSION == 3 && CCCL_MINOR_VERSION >= 4),
              "these tests need CCCL 3.4 or later (cuda::buffer, CCCL 3.1 resource refs)");

namespace {

using word              = std::uint32_t;
constexpr std::size_t n = std::size_t{1} << 20;

rmm_next::async_device_resource owned_pool()
{
  return rmm_next::async_device_resource{rmm_next::pool_options{}};
}

TEST(RmmInterop, RmmNextServesRmmsCurrentResourceUnderDeviceUvectorAndExecPolicy)
{
  auto pool     = owned_pool();
  auto previous = rmm::mr::set_current_device_resource(pool);
  rmm::cuda_stream stream;
  cuda::stream_ref const sv = stream;
  {
    rmm::device_uvector<long long> v(n, sv);
    EXPECT_GE(pool.statistics().used_bytes, n * sizeof(long long));  // from the rmm-next pool
    thrust::sequence(rmm::exec_policy(sv), v.begin(), v.end());
    long long const sum = thrust::reduce(rmm::exec_policy(sv), v.begin(), v.end(), 0LL);
    EXPECT_EQ(sum, static_cast<long long>(n) * (static_cast<long long>(n) - 1) / 2);
  }
  stream.synchronize();
  EXPECT_EQ(pool.statistics().used_bytes, 0u);
  (void)rmm::mr::set_current_device_resource(std::move(previous));
}

TEST(RmmInterop, RmmsStatisticsAdaptorCountsWhatRmmNextAllocates)
{
  auto pool = owned_pool();
  rmm::mr::statistics_resource_adaptor stats{pool};
  rmm::cuda_stream stream;
  cuda::stream_ref const sv = stream;
  {
    rmm::device_uvector<word> v(n, sv, stats);
    EXPECT_EQ(stats.get_bytes_counter().value, static_cast<std::int64_t>(n * sizeof(word)));
    EXPECT_GE(pool.statistics().used_bytes, n * sizeof(word));
  }
  stream.synchronize();
  EXPECT_EQ(stats.get_bytes_counter().value, 0);
  EXPECT_EQ(stats.get_bytes_counter().peak, static_cast<std::int64_t>(n * sizeof(word)));
}

TEST(RmmInterop, RmmNextAdaptorsWorkOverRmmsArena)
{
  rmm::mr::arena_memory_resource arena{rmm::mr::cuda_memory_resource{}, std::size_t{64} << 20};
  rmm_next::thread_cache_adaptor<rmm_next::device_async_resource_ref> cache{
    rmm_next::device_async_resource_ref{arena}};
  rmm_next::statistics_adaptor<rmm_next::device_async_resource_ref> counted{
    rmm_next::device_async_resource_ref{cache}};
  rmm::cuda_stream stream;
  cuda::stream_ref const sv = stream;
  unsigned long long* mismatches{};
  ASSERT_EQ(cudaMalloc(&mismatches, sizeof(*mismatches)), cudaSuccess);
  ASSERT_EQ(cudaMemset(mismatches, 0, sizeof(*mismatches)), cudaSuccess);

  void* p = counted.allocate(sv, 4096 * sizeof(word));
  rmm_next::test::fill_kernel<<<16, 256, 0, stream.value()>>>(static_cast<word*>(p), 4096, 5);
  counted.deallocate(sv, p, 4096 * sizeof(word));
  void* q = counted.allocate(sv, 4096 * sizeof(word));  // the cache's block again
  EXPECT_EQ(q, p);
  rmm_next::test::count_mismatches_kernel<<<16, 256, 0, stream.value()>>>(
    static_cast<word const*>(q), 4096, 5, mismatches);
  counted.deallocate(sv, q, 4096 * sizeof(word));
  stream.synchronize();
  unsigned long long host{};
  ASSERT_EQ(cudaMemcpy(&host, mismatches, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, 0u);
  EXPECT_EQ(counted.statistics().allocations.total, 2);
  EXPECT_EQ(cache.statistics().hits, 1u);
  (void)cudaFree(mismatches);
  EXPECT_GT(cache.flush(), 0u);  // back to the arena, before the arena goes
}

template <class Resource>
void buffer_round_trip(Resource resource)
{
  rmm::cuda_stream stream;
  cuda::stream_ref const sv = stream;
  cuda::buffer<word, cuda::mr::device_accessible> buf{sv, resource, n, cuda::no_init};
  ASSERT_EQ(buf.size(), n);
  rmm_next::test::fill_kernel<<<rmm_next::test::grid_for(n), 256, 0, stream.value()>>>(
    buf.data(), n, 9);
  std::vector<word> host(n);
  ASSERT_EQ(cudaMemcpyAsync(
              host.data(), buf.data(), n * sizeof(word), cudaMemcpyDeviceToHost, stream.value()),
            cudaSuccess);
  stream.synchronize();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    wrong += host[i] != rmm_next::test::pattern(i, 9) ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0u);
}

TEST(RmmInterop, CudaBufferOverRmmNextResources)
{
  auto pool = owned_pool();
  buffer_round_trip(pool);
  EXPECT_EQ(pool.statistics().used_bytes_high >= n * sizeof(word), true);
  buffer_round_trip(rmm_next::thread_cache_adaptor{owned_pool()});
}

}  // namespace
