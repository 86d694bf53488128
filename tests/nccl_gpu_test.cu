/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// nccl_registered on a device: a one-rank communicator registers every segment of a vmm_resource,
// and an all-reduce over blocks of the registered segments gives the right sums. (The test links
// libnccl for the communicator; nccl.hpp finds the same library loaded.)

#include "support/kernels.cuh"

#include <rmm_next/error.hpp>
#include <rmm_next/nccl.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <vector>

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

__global__ void iota_kernel(float* out, std::size_t n, float scale)
{
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = scale * static_cast<float>(i % 1024);
  }
}

TEST(NcclGpu, AOneRankAllReduceOverRegisteredSegments)
{
  int device{};
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ncclComm_t comm{};
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &device), ncclSuccess);
  std::vector<void*> registered;
  {
    rmm_next::vmm_options options{.segment_size = 16 * MiB};
    options.on_segment_map = [&](void* base, std::size_t) { registered.push_back(base); };
    std::optional<rmm_next::vmm_resource> holder;
    try {
      holder.emplace(rmm_next::nccl_registered(comm, options));
    } catch (rmm_next::not_supported const& e) {
      (void)ncclCommDestroy(comm);
      GTEST_SKIP() << e.what();
    }
    rmm_next::vmm_resource& mr = *holder;
    cudaStream_t stream{};
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    std::size_t const n = 2 * MiB;  // floats: 8 MiB per buffer, two segments in all
    auto* send          = static_cast<float*>(mr.allocate(stream, n * sizeof(float)));
    auto* recv          = static_cast<float*>(mr.allocate(stream, n * sizeof(float)));
    iota_kernel<<<rmm_next::test::grid_for(n), rmm_next::test::block_size, 0, stream>>>(
      send, n, 2.0F);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(send, recv, n, ncclFloat, ncclSum, comm, stream), ncclSuccess);
    std::vector<float> host(n);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += host[i] == 2.0F * static_cast<float>(i % 1024) ? 0 : 1;
    }
    EXPECT_EQ(wrong, 0U);
    EXPECT_EQ(registered.size(), mr.segments().size());
    mr.deallocate(stream, send, n * sizeof(float));
    mr.deallocate(stream, recv, n * sizeof(float));
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }  // the resource deregisters its segments before the communicator goes
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
