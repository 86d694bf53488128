/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so on a GPU, through its C interface: the frameworks' entry points,
// resource choices shared with C++ code, out of memory, frees the plugin must refuse, frees during
// stream capture, and the vmm_resource's blocks beside captures and in a forked child.

#include "support/capture_elsewhere.hpp"
#include "support/stream_guard.hpp"

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

rmm_next_statistics statistics()
{
  rmm_next_statistics s{};
  EXPECT_EQ(rmm_next_get_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

rmm_next_vmm_statistics vmm_statistics()
{
  rmm_next_vmm_statistics s{};
  EXPECT_EQ(rmm_next_vmm_get_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

/** @brief What a free of a pointer the plugin did not hand out leaves in rmm_next_last_error. */
std::string not_handed_out(char const* call)
{
  return std::string{"rmm_next::allocator_plugin: "} + call +
         " was given a pointer this allocator did not hand out (or freed already); it is not freed";
}

class AllocatorPlugin : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(statistics().allocated_bytes, 0U) << "a previous test leaked";
  }
  void TearDown() override
  {
    EXPECT_EQ(statistics().allocated_bytes, 0U);
    EXPECT_EQ(rmm_next_disable_thread_cache(0), 0) << rmm_next_last_error();
    EXPECT_EQ(rmm_next_use_current_pool(0), 0) << rmm_next_last_error();
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
};

TEST_F(AllocatorPlugin, EveryFrameworksEntryPointAllocatesAndFrees)
{
  rmm_next::test::stream_guard stream;
  rmm_next_statistics const before = statistics();
  void* t                          = rmm_next_torch_alloc(1000, 0, stream);
  void* c                          = rmm_next_cupy_malloc(stream, 3000, 0);
  void* n                          = rmm_next_numba_alloc(5000, 0);
  void* o                          = rmm_next_allocate(7000, 0, stream);
  for (void* p : {t, c, n, o}) {
    ASSERT_NE(p, nullptr) << rmm_next_last_error();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0U);
  }
  rmm_next_statistics const during = statistics();
  EXPECT_EQ(during.allocated_bytes, 16000U);
  EXPECT_EQ(during.torch_allocations - before.torch_allocations, 1U);
  EXPECT_EQ(during.cupy_allocations - before.cupy_allocations, 1U);
  EXPECT_EQ(during.numba_allocations - before.numba_allocations, 1U);
  EXPECT_EQ(during.other_allocations - before.other_allocations, 1U);
  EXPECT_GE(during.pool_used_bytes, 16000U);
  rmm_next_torch_free(t, 1000, 0, stream);
  rmm_next_cupy_free(stream, c, 0);  // size and stream from the table
  rmm_next_numba_free(n, 5000, 0);
  rmm_next_deallocate(o, 7000, 0, stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(statistics().deallocations - before.deallocations, 4U);
  // Zero bytes: NULL, and nothing counted as a failure.
  EXPECT_EQ(rmm_next_torch_alloc(0, 0, stream), nullptr);
  EXPECT_EQ(statistics().failed_allocations, before.failed_allocations);
}

TEST_F(AllocatorPlugin, OutOfMemoryIsNullAndAMessage)
{
  EXPECT_EQ(rmm_next_torch_alloc(std::int64_t{1} << 50, 0, nullptr), nullptr);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("out_of_memory"), std::string::npos);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* p = rmm_next_torch_alloc(1 << 20, 0, nullptr);
  EXPECT_NE(p, nullptr);
  rmm_next_torch_free(p, 1 << 20, 0, nullptr);
}

// With the segment cache as the device's resource (the plugin leaves the thread's capture mode
// alone in front of it): sizes near SIZE_MAX are NULL with an out-of-memory message and count as
// failed allocations, nothing is counted live, and the next allocation is served and usable.
TEST_F(AllocatorPlugin, WithTheSegmentCacheSizesNearSizeMaxAreNullAndTheNextAllocationWorks)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  rmm_next::test::stream_guard stream;
  rmm_next_statistics const before = statistics();
  for (std::size_t const bytes : {SIZE_MAX, SIZE_MAX - 4095}) {
    EXPECT_EQ(rmm_next_allocate(bytes, 0, stream), nullptr) << bytes;
    std::string const message = rmm_next_last_error();
    EXPECT_NE(message.find("out_of_memory"), std::string::npos) << message;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 2);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  constexpr std::size_t bytes = std::size_t{1} << 16;
  void* const p               = rmm_next_torch_alloc(bytes, 0, stream);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemsetAsync(p, 1, bytes, stream), cudaSuccess);
  rmm_next_torch_free(p, bytes, 0, stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

TEST_F(AllocatorPlugin, CppAndCShareTheProcessWideResource)
{
  // C++ sets device 0's resource: the C functions allocate from it.
  rmm_next::async_device_resource pool{rmm_next::pool_options{}};
  rmm_next::statistics_adaptor counted{rmm_next::device_async_resource_ref{pool}};
  auto const previous =
    rmm_next::set_per_device_resource_ref(0, rmm_next::device_async_resource_ref{counted});
  EXPECT_EQ(statistics().resource_kind, rmm_next_resource_external);
  void* p = rmm_next_torch_alloc(4096, 0, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(counted.statistics().allocations.current, 1);
  rmm_next_torch_free(p, 4096, 0, nullptr);
  rmm_next::set_per_device_resource_ref(0, previous);

  // C chooses an owned pool: C++ sees it.
  rmm_next_pool_options options{std::size_t{32} << 20, SIZE_MAX, 0};
  ASSERT_EQ(rmm_next_use_owned_pool(0, &options), 0) << rmm_next_last_error();
  EXPECT_EQ(statistics().resource_kind, rmm_next_resource_owned_pool);
  EXPECT_GE(statistics().pool_reserved_bytes, std::size_t{32} << 20);
  auto mr = rmm_next::get_per_device_resource_ref(0);
  void* q = mr.allocate_sync(4096, 256);
  EXPECT_GE(statistics().pool_used_bytes, 4096U);
  mr.deallocate_sync(q, 4096, 256);
}

TEST_F(AllocatorPlugin, ResourceChangeIsRefusedWhileMemoryIsLive)
{
  void* p = rmm_next_allocate(1 << 20, 0, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(rmm_next_use_owned_pool(0, nullptr), -1);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("still has"), std::string::npos);
  rmm_next_deallocate(p, 1 << 20, 0, nullptr);
  EXPECT_EQ(rmm_next_use_owned_pool(0, nullptr), 0) << rmm_next_last_error();
}

// A free of a host address or of a pointer into a block was counted and passed to cudaFreeAsync,
// whose error the resource's noexcept deallocate swallowed: allocated_bytes went to 2^64 - 8192,
// deallocations to 3 for 1, and every resource choice was refused from then on ("device 0 still
// has -8192 bytes allocated"), with rmm_next_last_error empty. Such frees are refused and named;
// nothing is counted, nothing reaches the driver, and the device's resource can be changed once its
// block is freed. A negative size counts as a failed allocation.
TEST_F(AllocatorPlugin, FreesOfPointersItDidNotHandOutAreRefusedAndCountNothing)
{
  rmm_next::test::stream_guard stream;
  rmm_next_statistics const before = statistics();
  void* const p                    = rmm_next_torch_alloc(4096, 0, stream);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  int host{};
  rmm_next_torch_free(&host, 4096, 0, stream);
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_torch_free"));
  rmm_next_torch_free(static_cast<char*>(p) + 256, 4096, 0, stream);
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_torch_free"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  rmm_next_statistics const during = statistics();
  EXPECT_EQ(during.deallocations, before.deallocations);
  EXPECT_EQ(during.allocated_bytes, 4096U);
  rmm_next_torch_free(p, 4096, 0, stream);
  rmm_next_torch_free(p, 4096, 0, stream);  // a second free of the block
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_torch_free"));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(rmm_next_torch_alloc(-1, 0, stream), nullptr);
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
  EXPECT_EQ(after.allocated_bytes, 0U);
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 1);
  EXPECT_EQ(rmm_next_use_owned_pool(0, nullptr), 0) << rmm_next_last_error();
  EXPECT_EQ(statistics().resource_kind, rmm_next_resource_owned_pool);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(AllocatorPlugin, ThreadCacheServesRepeatsAndReleasesOnDemand)
{
  ASSERT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0);  // again: no change
  rmm_next::test::stream_guard stream;
  for (int i = 0; i < 100; ++i) {
    void* p = rmm_next_torch_alloc(1000, 0, stream);
    ASSERT_NE(p, nullptr);
    rmm_next_torch_free(p, 1000, 0, stream);
  }
  rmm_next_statistics s = statistics();
  EXPECT_TRUE(s.thread_cache_enabled);
  EXPECT_GE(s.cache_hits, 99U);
  EXPECT_GT(s.cached_bytes, 0U);
  EXPECT_EQ(rmm_next_release_unused(0), 0) << rmm_next_last_error();
  EXPECT_EQ(statistics().cached_bytes, 0U);
}

TEST_F(AllocatorPlugin, RecordedStreamsAreWaitedForAtTheFree)
{
  rmm_next::test::stream_guard main, side;
  void* p = rmm_next_torch_alloc(1 << 20, 0, main);
  ASSERT_NE(p, nullptr);
  rmm_next_torch_record_stream(p, side);
  rmm_next_torch_record_stream(p, side);  // recorded once
  rmm_next_torch_free(p, 1 << 20, 0, main);
  EXPECT_EQ(cudaStreamSynchronize(main), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(AllocatorPlugin, FreesOfUncapturedMemoryWaitForTheCaptureToEnd)
{
  rmm_next::test::stream_guard stream;
  void* before = rmm_next_torch_alloc(1 << 20, 0, stream);  // ordinary memory
  ASSERT_NE(before, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  cudaGraph_t graph{};
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* inside = rmm_next_torch_alloc(1 << 20, 0, stream);  // a graph allocation
  EXPECT_NE(inside, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemsetAsync(inside, 0, 1 << 20, stream), cudaSuccess);
  rmm_next_torch_free(inside, 1 << 20, 0, stream);  // a free node
  rmm_next_torch_free(before, 1 << 20, 0, stream);  // not the graph's: held back
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << "the capture was invalidated";
  rmm_next_statistics const held = statistics();  // also frees what waited
  EXPECT_EQ(held.deferred_frees, 0U);
  EXPECT_EQ(held.allocated_bytes, 0U);

  cudaGraphExec_t exec{};
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

// torch.cuda.MemPool's segments (rmm_next_torch_segment_alloc) outlive any capture PyTorch asks
// for them in: never a graph node, ready on every stream when the call returns.
TEST_F(AllocatorPlugin, SegmentsAreOrdinaryMemoryEvenDuringACapture)
{
  rmm_next::test::stream_guard stream;
  rmm_next::test::stream_guard other;
  constexpr std::size_t size = std::size_t{2} << 20;
  cudaGraph_t graph{};
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* segment = rmm_next_torch_segment_alloc(size, 0, stream);
  EXPECT_NE(segment, nullptr) << rmm_next_last_error();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << "the capture was invalidated";
  std::size_t nodes = 1;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 0U);  // no allocation node
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_NE(segment, nullptr);
  EXPECT_EQ(cudaMemsetAsync(segment, 1, size, other), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  rmm_next_statistics const s = statistics();
  EXPECT_EQ(s.allocated_bytes, size);
  EXPECT_GE(s.torch_allocations, 1U);
  rmm_next_torch_free(segment, size, 0, stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST_F(AllocatorPlugin, ASegmentLargerThanTheDeviceIsNullAndTheNextSegmentWorks)
{
  std::size_t free_bytes{}, total_bytes{};
  ASSERT_EQ(rmm_next_mem_get_info(0, &free_bytes, &total_bytes), 0) << rmm_next_last_error();
  rmm_next_statistics const before = statistics();
  auto const oversized             = static_cast<ssize_t>(total_bytes + (std::size_t{1} << 30));
  EXPECT_EQ(rmm_next_torch_segment_alloc(oversized, 0, nullptr), nullptr);
  std::string const message = rmm_next_last_error();
  EXPECT_NE(message.find("out_of_memory"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(oversized) + " bytes on device 0"), std::string::npos)
    << message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(statistics().failed_allocations, before.failed_allocations + 1);
  constexpr std::size_t size = std::size_t{2} << 20;
  void* segment              = rmm_next_torch_segment_alloc(size, 0, nullptr);
  ASSERT_NE(segment, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemset(segment, 0, size), cudaSuccess);
  rmm_next_torch_free(segment, size, 0, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(AllocatorPlugin, AllocatedBytesHighKeepsThePeakUntilReset)
{
  rmm_next::test::stream_guard stream;
  ASSERT_EQ(rmm_next_reset_peak_statistics(0), 0) << rmm_next_last_error();
  EXPECT_EQ(statistics().allocated_bytes_high, 0U);
  void* a = rmm_next_allocate(3000, 0, stream);
  void* b = rmm_next_allocate(5000, 0, stream);
  rmm_next_deallocate(a, 3000, 0, stream);
  void* c               = rmm_next_allocate(1000, 0, stream);
  rmm_next_statistics s = statistics();
  EXPECT_EQ(s.allocated_bytes, 6000U);
  EXPECT_EQ(s.allocated_bytes_high, 8000U);
  ASSERT_EQ(rmm_next_reset_peak_statistics(-1), 0) << rmm_next_last_error();  // the current device
  s = statistics();
  EXPECT_EQ(s.allocated_bytes_high, 6000U);
  EXPECT_GE(s.pool_used_bytes_high, s.pool_used_bytes);
  rmm_next_deallocate(b, 5000, 0, stream);
  rmm_next_deallocate(c, 1000, 0, stream);
  EXPECT_EQ(statistics().allocated_bytes_high, 6000U);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

TEST_F(AllocatorPlugin, CupyMemoryOfAForgottenStreamIsFreedOnTheDefaultStream)
{
  cudaStream_t stream{};
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* p = rmm_next_cupy_malloc(stream, 4096, 0);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  rmm_next_cupy_forget_stream(stream);
  rmm_next_cupy_free(nullptr, p, 0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Freed already: refused, not freed again.
  rmm_next_cupy_free(nullptr, p, 0);
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_cupy_free"));
}

TEST_F(AllocatorPlugin, ReleasingAndForgettingLeaveAnotherThreadsCaptureIntact)
{
  ASSERT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0) << rmm_next_last_error();
  rmm_next::test::stream_guard stream;
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal,
                                     cudaStreamCaptureModeThreadLocal,
                                     cudaStreamCaptureModeRelaxed}) {
    void* p = rmm_next_torch_alloc(1 << 16, 0, stream);
    ASSERT_NE(p, nullptr);
    rmm_next_torch_free(p, 1 << 16, 0, stream);  // cached
    cudaStream_t gone{};
    ASSERT_EQ(cudaStreamCreateWithFlags(&gone, cudaStreamNonBlocking), cudaSuccess);
    void* c = rmm_next_cupy_malloc(gone, 4096, 0);
    ASSERT_NE(c, nullptr);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(gone), cudaSuccess);

    std::mutex m;
    std::condition_variable cv;
    int phase         = 0;
    cudaError_t ended = cudaErrorUnknown;
    std::thread capturer{[&] {
      rmm_next::test::stream_guard captured;
      cudaGraph_t graph{};
      ASSERT_EQ(cudaStreamBeginCapture(captured, mode), cudaSuccess);
      EXPECT_EQ(cudaMemsetAsync(c, 0, 16, captured), cudaSuccess);
      {
        std::unique_lock lock{m};
        phase = 1;
        cv.notify_all();
        cv.wait(lock, [&] { return phase == 2; });
      }
      ended = cudaStreamEndCapture(captured, &graph);
      if (graph != nullptr) { (void)cudaGraphDestroy(graph); }
    }};
    {
      std::unique_lock lock{m};
      cv.wait(lock, [&] { return phase == 1; });
    }
    EXPECT_EQ(rmm_next_release_unused(0), 0) << rmm_next_last_error();  // torch.cuda.empty_cache
    rmm_next_cupy_forget_stream(gone);  // a CuPy stream collected mid-capture
    {
      std::lock_guard lock{m};
      phase = 2;
      cv.notify_all();
    }
    capturer.join();
    EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
    EXPECT_EQ(statistics().cached_bytes, 0U);
    rmm_next_cupy_free(nullptr, c, 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

// The vmm_resource of each device (rmm_next_vmm_*): blocks inside its segments, written and read,
// reused after a stream-ordered free, counted apart from the per-device resource; options that
// differ once a segment exists are refused. One test: the resource lives for the process.
TEST_F(AllocatorPlugin, VmmBlocksLieInSegmentsAndOtherOptionsAreRefusedAfterwards)
{
  rmm_next::test::stream_guard stream;
  rmm_next_vmm_options options{std::size_t{8} << 20,
                               RMM_NEXT_VMM_HANDLE_POSIX_FD | RMM_NEXT_VMM_HANDLE_FABRIC,
                               rmm_next_vmm_granularity_recommended,
                               1,
                               1};
  ASSERT_EQ(rmm_next_vmm_configure(0, &options), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_vmm_configure(0, &options), 0) << "equal options again change nothing";
  rmm_next_statistics const map_before = statistics();
  std::size_t const bytes              = std::size_t{3} << 20;
  void* a                              = rmm_next_vmm_alloc(bytes, 0, stream);
  void* b                              = rmm_next_vmm_alloc(bytes, 0, stream);
  void* big                            = rmm_next_vmm_alloc(std::size_t{20} << 20, 0, stream);
  ASSERT_NE(a, nullptr) << rmm_next_last_error();
  ASSERT_NE(b, nullptr);
  ASSERT_NE(big, nullptr);
  std::vector<void*> bases(8);
  std::vector<std::size_t> sizes(8);
  ASSERT_EQ(rmm_next_vmm_segments(0, bases.data(), sizes.data(), bases.size()), 2)
    << "a and b share the first segment, the 20 MiB block has one of its own";
  EXPECT_GE(sizes[1], std::size_t{20} << 20);
  auto inside = [&](void* p, std::size_t i) {
    auto const address = reinterpret_cast<std::uintptr_t>(p);
    auto const base    = reinterpret_cast<std::uintptr_t>(bases[i]);
    return address >= base && address + bytes <= base + sizes[i];
  };
  EXPECT_TRUE(inside(a, 0) && inside(b, 0) && inside(big, 1));

  ASSERT_EQ(cudaMemsetAsync(a, 0x5a, bytes, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  std::vector<unsigned char> host(bytes);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), b, bytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::size_t wrong = 0;
  for (unsigned char const c : host) {
    wrong += c == 0x5a ? 0 : 1;
  }
  EXPECT_EQ(wrong, 0U);

  rmm_next_vmm_statistics v{};
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &v), 0) << rmm_next_last_error();
  EXPECT_EQ(v.made, 1);
  EXPECT_EQ(v.allocations, 3U);
  EXPECT_EQ(v.allocated_bytes, 2 * bytes + (std::size_t{20} << 20));
  EXPECT_EQ(v.segment_count, 2U);
  EXPECT_GE(v.segment_size, std::size_t{8} << 20);  // 8 MiB rounded up to the granularity
  EXPECT_EQ(v.segment_size % v.granularity, 0U);
  EXPECT_EQ(sizes[0], v.segment_size);
  EXPECT_EQ(sizes[1] % v.granularity, 0U);
  EXPECT_EQ(v.segment_bytes, sizes[0] + sizes[1]);
  EXPECT_NE(v.handle_types & RMM_NEXT_VMM_HANDLE_POSIX_FD, 0U);
  EXPECT_GE(v.access_devices, 1);
  EXPECT_EQ(statistics().allocations, map_before.allocations) << "not the per-device resource";

  options.segment_size = std::size_t{16} << 20;
  EXPECT_EQ(rmm_next_vmm_configure(0, &options), -1);
  EXPECT_NE(std::string{rmm_next_last_error()}.find("already made segments with other options"),
            std::string::npos)
    << rmm_next_last_error();

  rmm_next_vmm_free(a, bytes, 0, stream);
  void* again = rmm_next_vmm_alloc(bytes, 0, stream);  // a's block, after a's free on `stream`
  EXPECT_EQ(again, a);
  rmm_next_vmm_free(again, bytes, 0, stream);
  rmm_next_vmm_free(b, bytes, 0, stream);
  rmm_next_vmm_free(big, std::size_t{20} << 20, 0, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &v), 0);
  EXPECT_EQ(v.allocated_bytes, 0U);
  EXPECT_EQ(v.deallocations, 4U);
  EXPECT_EQ(v.segment_count, 2U) << "segments stay mapped for the process";
  int dummy{};  // host memory: in no segment, refused
  rmm_next_vmm_free(&dummy, 4, 0, stream);
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_vmm_free"));
  rmm_next_vmm_free(a, bytes, 0, stream);  // freed already: refused, not counted
  EXPECT_EQ(std::string{rmm_next_last_error()}, not_handed_out("rmm_next_vmm_free"));
  ASSERT_EQ(rmm_next_vmm_get_statistics(0, &v), 0);
  EXPECT_EQ(v.deallocations, 4U);
}

// ---- Captures on another thread, in each mode --------------------------------------------------

constexpr cudaStreamCaptureMode every_mode[] = {
  cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};

char const* name_of(cudaStreamCaptureMode mode)
{
  switch (mode) {
    case cudaStreamCaptureModeGlobal: return "global";
    case cudaStreamCaptureModeThreadLocal: return "thread_local";
    default: return "relaxed";
  }
}

/** @brief What a capture on another thread ended with. */
struct capture_result {
  cudaError_t ended{cudaErrorUnknown};     ///< cudaStreamEndCapture
  cudaError_t replayed{cudaErrorUnknown};  ///< instantiating and launching the graph twice
  std::size_t alloc_nodes{0};
  std::size_t free_nodes{0};
};

/**
 * @brief Captures `stream` in `mode` on a thread of its own, which runs `captured` inside the
 * capture; the calling thread runs `meanwhile` while the capture is open. The graph is then
 * instantiated and launched twice on `stream`.
 */
capture_result capture_on_another_thread(cudaStream_t stream,
                                         cudaStreamCaptureMode mode,
                                         std::function<void()> const& captured,
                                         std::function<void()> const& meanwhile)
{
  std::mutex m;
  std::condition_variable cv;
  int phase          = 0;  // 1: the capture is open; 2: the calling thread is done
  auto const advance = [&](int to) {
    std::lock_guard lock{m};
    phase = to;
    cv.notify_all();
  };
  auto const wait_for = [&](int at) {
    std::unique_lock lock{m};
    cv.wait(lock, [&] { return phase >= at; });
  };
  capture_result r;
  cudaGraph_t graph{};
  std::thread capturer{[&] {
    if (cudaStreamBeginCapture(stream, mode) == cudaSuccess) { captured(); }
    advance(1);
    wait_for(2);
    r.ended = cudaStreamEndCapture(stream, &graph);
  }};
  wait_for(1);
  meanwhile();
  advance(2);
  capturer.join();
  (void)cudaGetLastError();
  if (graph == nullptr) { return r; }
  std::size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess && count > 0) {
    std::vector<cudaGraphNode_t> nodes(count);
    (void)cudaGraphGetNodes(graph, nodes.data(), &count);
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type{};
      (void)cudaGraphNodeGetType(node, &type);
      r.alloc_nodes += type == cudaGraphNodeTypeMemAlloc ? 1 : 0;
      r.free_nodes += type == cudaGraphNodeTypeMemFree ? 1 : 0;
    }
  }
  cudaGraphExec_t exec{};
  r.replayed = cudaGraphInstantiate(&exec, graph, 0);
  for (int i = 0; i < 2 && r.replayed == cudaSuccess; ++i) {
    r.replayed = cudaGraphLaunch(exec, stream);
  }
  if (r.replayed == cudaSuccess) { r.replayed = cudaStreamSynchronize(stream); }
  if (exec != nullptr) { (void)cudaGraphExecDestroy(exec); }
  (void)cudaGraphDestroy(graph);
  return r;
}

/** @brief A PyTorch block (written, then freed) and a CuPy block, allocated and freed on `stream`.
 */
void torch_and_cupy_round_trip(cudaStream_t stream)
{
  constexpr std::size_t bytes = std::size_t{1} << 16;
  void* t                     = rmm_next_torch_alloc(bytes, 0, stream);
  EXPECT_NE(t, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemsetAsync(t, 0, bytes, stream), cudaSuccess);
  rmm_next_torch_free(t, bytes, 0, stream);
  void* c = rmm_next_cupy_malloc(stream, 8192, 0);
  EXPECT_NE(c, nullptr) << rmm_next_last_error();
  rmm_next_cupy_free(stream, c, 0);
}

// Another thread captures; this thread allocates and frees through every entry point on streams
// that are not captured (a stream of its own, Numba's legacy default stream, the plugin's segment
// stream) and frees a block recorded on the captured stream before the capture began. None of it
// may touch the capture: it ends, and its graph replays. The recorded block's free waits for the
// capture to end (a wait on the captured stream would cross the capture's boundary).
void calls_on_other_streams_leave_the_capture_intact()
{
  rmm_next::test::stream_guard own;
  rmm_next::test::stream_guard captured;
  void* target = rmm_next_torch_alloc(4096, 0, captured);  // what the graph writes
  ASSERT_NE(target, nullptr) << rmm_next_last_error();
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    constexpr std::size_t recorded_bytes = std::size_t{1} << 20;
    void* recorded                       = rmm_next_torch_alloc(recorded_bytes, 0, own);
    ASSERT_NE(recorded, nullptr) << rmm_next_last_error();
    ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(recorded, 1, recorded_bytes, captured), cudaSuccess);
    rmm_next_torch_record_stream(recorded, captured);  // used on the captured stream before
    std::uint64_t deferred_during = 0;
    capture_result const r        = capture_on_another_thread(
      captured,
      mode,
      [&] { (void)cudaMemsetAsync(target, 2, 4096, captured); },
      [&] {
        torch_and_cupy_round_trip(own);
        void* n = rmm_next_numba_alloc(4096, 0);  // the legacy default stream
        EXPECT_NE(n, nullptr) << rmm_next_last_error();
        rmm_next_numba_free(n, 4096, 0);
        void* o = rmm_next_allocate(4096, 0, own);
        EXPECT_NE(o, nullptr) << rmm_next_last_error();
        rmm_next_deallocate(o, 4096, 0, own);
        void* seg = rmm_next_torch_segment_alloc(std::size_t{2} << 20, 0, own);
        EXPECT_NE(seg, nullptr) << rmm_next_last_error();
        rmm_next_torch_free(seg, std::size_t{2} << 20, 0, own);
        rmm_next_torch_free(recorded, recorded_bytes, 0, own);
        deferred_during = statistics().deferred_frees;
      });
    EXPECT_EQ(r.ended, cudaSuccess) << cudaGetErrorName(r.ended) << ": the capture was broken";
    EXPECT_EQ(r.replayed, cudaSuccess) << cudaGetErrorName(r.replayed);
    EXPECT_EQ(deferred_during, 1U);  // the recorded block, until the capture ended
    rmm_next_statistics const after = statistics();
    EXPECT_EQ(after.deferred_frees, 0U);
    EXPECT_EQ(after.allocated_bytes, 4096U);  // only the target is live
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  rmm_next_torch_free(target, 4096, 0, captured);
  EXPECT_EQ(cudaStreamSynchronize(captured), cudaSuccess);
}

TEST_F(AllocatorPlugin, CallsOnOtherStreamsLeaveAnotherThreadsCaptureIntactInEveryMode)
{
  calls_on_other_streams_leave_the_capture_intact();
}

rmm_next_segment_cache_statistics segment_statistics()
{
  rmm_next_segment_cache_statistics s{};
  EXPECT_EQ(rmm_next_get_segment_cache_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

/**
 * @brief In each mode, another thread captures while this one allocates, writes and frees blocks
 * of 64 MiB (past what the segment cache keeps idle: a new segment each round) and of 64 KiB on
 * each of `streams`, then runs `after`: the capture must end intact and replay, and the segment
 * cache must have missed. Returns the segment cache's statistics at the end.
 */
template <class After>
rmm_next_segment_cache_statistics cache_calls_leave_captures_intact(
  std::initializer_list<cudaStream_t> streams, After after)
{
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    rmm_next::test::stream_guard captured;
    rmm_next_segment_cache_statistics const at_start = segment_statistics();
    capture_result const r                           = capture_on_another_thread(
      captured,
      mode,
      [] {},
      [&] {
        for (cudaStream_t const on : streams) {
          for (std::size_t const bytes : {std::size_t{64} << 20, std::size_t{1} << 16}) {
            for (int i = 0; i < 3; ++i) {
              void* p = rmm_next_torch_alloc(static_cast<ssize_t>(bytes), 0, on);
              EXPECT_NE(p, nullptr) << rmm_next_last_error();
              EXPECT_EQ(cudaMemsetAsync(p, i, bytes, on), cudaSuccess);
              rmm_next_torch_free(p, static_cast<ssize_t>(bytes), 0, on);
            }
          }
        }
        after();
      });
    EXPECT_EQ(r.ended, cudaSuccess) << cudaGetErrorName(r.ended) << ": the capture was broken";
    EXPECT_EQ(r.replayed, cudaSuccess) << cudaGetErrorName(r.replayed);
    EXPECT_GT(segment_statistics().misses, at_start.misses);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return segment_statistics();
}

// The same with the segment cache as the device's resource. The plugin then leaves this thread in
// its own (global) mode: the cache makes its upstream calls in relaxed mode itself. Its hits, its
// misses (a new segment each round: 64 MiB, past what it keeps idle) and its frees, on a stream of
// this thread's own and on the legacy default stream, must leave the capture intact all the same.
TEST_F(AllocatorPlugin, WithTheSegmentCacheCallsOnOtherStreamsLeaveAnotherThreadsCaptureIntact)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  rmm_next_segment_cache_statistics const before = segment_statistics();
  calls_on_other_streams_leave_the_capture_intact();
  rmm_next::test::stream_guard own;
  rmm_next_segment_cache_statistics const after =
    cache_calls_leave_captures_intact({own, cudaStreamLegacy}, [] {});
  EXPECT_GT(after.hits, before.hits);
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

// The same with the thread cache in front of the segment cache, which the plugin also calls
// without relaxing this thread's mode: the thread cache's hits, misses and frees (64 KiB), the
// segment cache's misses under it (64 MiB, past the thread cache's blocks), and the thread cache
// taken out (its blocks flushed into the segment cache) and put back must leave the capture
// intact.
TEST_F(AllocatorPlugin, WithBothCachesCallsOnOtherStreamsLeaveAnotherThreadsCaptureIntact)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0) << rmm_next_last_error();
  rmm_next::test::stream_guard own;
  (void)cache_calls_leave_captures_intact({own, cudaStreamLegacy}, [] {
    EXPECT_EQ(rmm_next_disable_thread_cache(0), 0) << rmm_next_last_error();
    EXPECT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0) << rmm_next_last_error();
  });
  EXPECT_EQ(rmm_next_disable_thread_cache(0), 0) << rmm_next_last_error();
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

// The capturing thread itself calls the plugin on the captured stream, in each mode: allocations
// become graph memory nodes and their frees free nodes; a segment is ordinary memory, never a
// node; a free of memory from before the capture waits for its end (docs/python.md, Streams).
TEST_F(AllocatorPlugin, CallsOnTheCapturedStreamBecomeNodesOrWaitInEveryMode)
{
  rmm_next::test::stream_guard captured;
  constexpr std::size_t segment_bytes = std::size_t{2} << 20;
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    void* before = rmm_next_torch_alloc(1 << 20, 0, captured);
    ASSERT_NE(before, nullptr) << rmm_next_last_error();
    ASSERT_EQ(cudaStreamSynchronize(captured), cudaSuccess);
    void* segment          = nullptr;
    capture_result const r = capture_on_another_thread(
      captured,
      mode,
      [&] {
        torch_and_cupy_round_trip(captured);  // two allocation nodes, two free nodes
        segment = rmm_next_torch_segment_alloc(segment_bytes, 0, captured);
        EXPECT_NE(segment, nullptr) << rmm_next_last_error();
        rmm_next_torch_free(before, 1 << 20, 0, captured);  // not the capture's: held back
      },
      [] {});
    EXPECT_EQ(r.ended, cudaSuccess) << cudaGetErrorName(r.ended) << ": the capture was broken";
    EXPECT_EQ(r.replayed, cudaSuccess) << cudaGetErrorName(r.replayed);
    EXPECT_EQ(r.alloc_nodes, 2U);
    EXPECT_EQ(r.free_nodes, 2U);
    rmm_next_statistics const after = statistics();  // frees what waited for the capture
    EXPECT_EQ(after.deferred_frees, 0U);
    EXPECT_EQ(after.allocated_bytes, segment_bytes);
    ASSERT_NE(segment, nullptr);
    EXPECT_EQ(cudaMemset(segment, 1, segment_bytes), cudaSuccess);  // ready, on any stream
    rmm_next_torch_free(segment, segment_bytes, 0, captured);
    EXPECT_EQ(cudaStreamSynchronize(captured), cudaSuccess);
  }
}

// With the segment cache in place and a free block of the captured stream in it, the capturing
// thread allocates and frees that size on the captured stream, in each mode. The plugin asks the
// stream's capture state and vouches only for eager streams to the resources below (so that they
// need not ask again): here the cache must ask, find the capture and bypass, so the allocation and
// its free are the graph's nodes and the cached block stays; an eager call after the capture is
// served that block again.
TEST_F(AllocatorPlugin, WithTheSegmentCacheCallsOnTheCapturedStreamAreTheGraphsInEveryMode)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  rmm_next::test::stream_guard captured;
  constexpr std::size_t bytes = std::size_t{1} << 16;
  void* const cached          = rmm_next_torch_alloc(bytes, 0, captured);
  ASSERT_NE(cached, nullptr) << rmm_next_last_error();
  rmm_next_torch_free(cached, bytes, 0, captured);  // a free block of the captured stream's own
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    rmm_next_segment_cache_statistics const before = segment_statistics();
    void* in_graph                                 = nullptr;
    capture_result const r                         = capture_on_another_thread(
      captured,
      mode,
      [&] {
        in_graph = rmm_next_torch_alloc(bytes, 0, captured);
        EXPECT_NE(in_graph, nullptr) << rmm_next_last_error();
        EXPECT_EQ(cudaMemsetAsync(in_graph, 0, bytes, captured), cudaSuccess);
        rmm_next_torch_free(in_graph, bytes, 0, captured);
      },
      [] {});
    EXPECT_EQ(r.ended, cudaSuccess) << cudaGetErrorName(r.ended) << ": the capture was broken";
    EXPECT_EQ(r.replayed, cudaSuccess) << cudaGetErrorName(r.replayed);
    EXPECT_EQ(r.alloc_nodes, 1U);
    EXPECT_EQ(r.free_nodes, 1U);
    EXPECT_NE(in_graph, cached);
    rmm_next_segment_cache_statistics const after = segment_statistics();
    EXPECT_EQ(after.bypasses, before.bypasses + 1);
    EXPECT_EQ(after.hits, before.hits);
    void* const again = rmm_next_torch_alloc(bytes, 0, captured);
    EXPECT_EQ(again, cached) << "the block cached before the capture is served after it";
    rmm_next_torch_free(again, bytes, 0, captured);
  }
  EXPECT_EQ(cudaStreamSynchronize(captured), cudaSuccess);
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

// ---- The vmm_resource's blocks beside captures and after fork ---------------------------------
// After VmmBlocksLieInSegmentsAndOtherOptionsAreRefusedAfterwards, which configures the resource.

// The capturing thread frees a vmm_resource block on the captured stream, in each mode (the plugin
// refused this, "free it outside the capture"): the capture ends intact, the block stays out of use
// until the graph has run past the free, and is handed out again after that, holding what the
// graph wrote before the free.
TEST_F(AllocatorPlugin, AVmmFreeOnTheCapturedStreamIsTheGraphsInEveryMode)
{
  rmm_next::test::stream_guard stream;
  constexpr std::size_t bytes = std::size_t{1} << 20;
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    void* const block = rmm_next_vmm_alloc(bytes, 0, stream);
    ASSERT_NE(block, nullptr) << rmm_next_last_error();
    rmm_next_vmm_statistics const before = vmm_statistics();
    cudaGraph_t graph{};
    ASSERT_EQ(cudaStreamBeginCapture(stream, mode), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(block, 0x3c, bytes, stream), cudaSuccess);  // its last use
    rmm_next_vmm_free(block, bytes, 0, stream);
    cudaError_t const ended = cudaStreamEndCapture(stream, &graph);
    ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended) << ": " << rmm_next_last_error();
    rmm_next_vmm_statistics const during = vmm_statistics();
    EXPECT_EQ(during.deallocations, before.deallocations + 1) << rmm_next_last_error();
    EXPECT_EQ(during.allocated_bytes, before.allocated_bytes - bytes);
    void* const other = rmm_next_vmm_alloc(bytes, 0, stream);  // the graph has not run yet
    ASSERT_NE(other, nullptr) << rmm_next_last_error();
    EXPECT_NE(other, block);
    cudaGraphExec_t exec{};
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    void* const again = rmm_next_vmm_alloc(bytes, 0, stream);  // past the free: the block
    EXPECT_EQ(again, block);
    std::vector<unsigned char> host(bytes);
    ASSERT_EQ(cudaMemcpy(host.data(), again, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(std::count(host.begin(), host.end(), 0x3c), static_cast<std::ptrdiff_t>(bytes));
    rmm_next_vmm_free(again, bytes, 0, stream);
    rmm_next_vmm_free(other, bytes, 0, stream);
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(vmm_statistics().allocated_bytes, before.allocated_bytes - bytes);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Another thread captures, in each mode, while this one frees vmm_resource blocks (on a stream of
// its own and on the legacy default stream), makes a new segment and takes a freed block again
// (its fence waited for on the host). None of it touches the capture: it ends, and its graph runs.
TEST_F(AllocatorPlugin, VmmCallsLeaveAnotherThreadsCaptureIntactInEveryMode)
{
  rmm_next::test::stream_guard own;
  constexpr std::size_t bytes = std::size_t{1} << 20;
  constexpr std::size_t large = std::size_t{80} << 20;  // larger than any segment: a new one
  for (cudaStreamCaptureMode const mode : every_mode) {
    SCOPED_TRACE(name_of(mode));
    void* const first  = rmm_next_vmm_alloc(bytes, 0, own);
    void* const second = rmm_next_vmm_alloc(bytes, 0, own);
    ASSERT_NE(first, nullptr) << rmm_next_last_error();
    ASSERT_NE(second, nullptr) << rmm_next_last_error();
    ASSERT_EQ(cudaMemsetAsync(first, 1, bytes, own), cudaSuccess);
    rmm_next_vmm_statistics const before = vmm_statistics();
    rmm_next::test::capture_elsewhere capture{mode};
    rmm_next_vmm_free(first, bytes, 0, own);                // a fence on an eager stream
    rmm_next_vmm_free(second, bytes, 0, nullptr);           // the legacy default stream of device 0
    void* const fresh = rmm_next_vmm_alloc(large, 0, own);  // cuMemCreate and map beside it
    EXPECT_NE(fresh, nullptr) << rmm_next_last_error();
    void* const reused = rmm_next_vmm_alloc(bytes, 0, own);  // waits for a fence on the host
    EXPECT_NE(reused, nullptr) << rmm_next_last_error();
    rmm_next_vmm_free(reused, bytes, 0, own);
    rmm_next_vmm_free(fresh, large, 0, own);
    rmm_next_vmm_statistics const during = vmm_statistics();
    EXPECT_GE(rmm_next_vmm_segments(0, nullptr, nullptr, 0), 2);
    EXPECT_EQ(capture.end(), "");
    EXPECT_EQ(during.allocations, before.allocations + 2);
    EXPECT_EQ(during.deallocations, before.deallocations + 4);
    EXPECT_EQ(during.failed_allocations, before.failed_allocations);
    EXPECT_EQ(during.allocated_bytes, before.allocated_bytes - 2 * bytes);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A child forked after the parent used the plugin is refused every call that needs its state, the
// frees of the parent's blocks included ("forked"), and touches nothing of the parent's: the
// parent then frees both blocks once, and a vmm_resource block freed in the parent comes back.
TEST_F(AllocatorPlugin, AForkedChildIsRefusedThePluginAndTheParentGoesOn)
{
  constexpr std::size_t bytes = std::size_t{1} << 20;
  void* const p               = rmm_next_torch_alloc(4096, 0, nullptr);
  void* const v               = rmm_next_vmm_alloc(bytes, 0, nullptr);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  ASSERT_NE(v, nullptr) << rmm_next_last_error();
  rmm_next_statistics const before         = statistics();
  rmm_next_vmm_statistics const vmm_before = vmm_statistics();
  std::fflush(nullptr);
  pid_t const pid = ::fork();
  if (pid == 0) {
    auto const refused = [] {
      return std::string{rmm_next_last_error()}.find("forked") != std::string::npos;
    };
    int failed = 0;
    if (rmm_next_vmm_alloc(bytes, 0, nullptr) != nullptr || !refused()) { failed |= 1; }
    rmm_next_vmm_free(v, bytes, 0, nullptr);
    if (!refused()) { failed |= 2; }
    rmm_next_torch_free(p, 4096, 0, nullptr);
    if (!refused()) { failed |= 4; }
    if (rmm_next_torch_alloc(4096, 0, nullptr) != nullptr || !refused()) { failed |= 8; }
    ::_exit(failed);  // no exit handlers: the parent's CUDA state is not the child's to tear down
  }
  ASSERT_GT(pid, 0);
  int status{};
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
    << "child's failures (bits): " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  rmm_next_torch_free(p, 4096, 0, nullptr);
  rmm_next_vmm_free(v, bytes, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(statistics().deallocations, before.deallocations + 1);
  rmm_next_vmm_statistics const vmm_after = vmm_statistics();
  EXPECT_EQ(vmm_after.deallocations, vmm_before.deallocations + 1);
  EXPECT_EQ(vmm_after.allocated_bytes, vmm_before.allocated_bytes - bytes);
  void* const again = rmm_next_vmm_alloc(bytes, 0, nullptr);
  EXPECT_NE(again, nullptr) << rmm_next_last_error();
  EXPECT_EQ(cudaMemset(again, 0, bytes), cudaSuccess);
  rmm_next_vmm_free(again, bytes, 0, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A fresh std::thread has no current context: PyTorch's free from a Python thread that drops the
// last reference to a tensor. Its frees and allocations on the legacy stream are done at once and
// served by the segment cache (not held back as if a capture might hold the stream, not sent past
// the cache), and the thread is left without a context.
TEST_F(AllocatorPlugin, AThreadWithoutAContextFreesAndAllocatesAtOnce)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  cudaStream_t const legacy                   = cudaStreamLegacy;
  rmm_next_segment_cache_statistics const st0 = segment_statistics();
  void* const p                               = rmm_next_torch_alloc(4096, 0, legacy);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  rmm_next_statistics seen{};
  std::vector<void*> handed;
  bool had_context  = true;
  bool left_context = true;
  std::thread{[&] {
    had_context = rmm_next::detail::current_context_or_null() != nullptr;
    rmm_next_torch_free(p, 4096, 0, legacy);
    for (int i = 0; i < 3; ++i) {
      void* const q = rmm_next_torch_alloc(4096, 0, legacy);
      handed.push_back(q);
      rmm_next_torch_free(q, 4096, 0, legacy);
    }
    EXPECT_EQ(rmm_next_get_statistics(0, &seen), 0) << rmm_next_last_error();
    left_context = rmm_next::detail::current_context_or_null() != nullptr;
  }}.join();
  EXPECT_FALSE(had_context) << "the thread had a context: the test proves nothing";
  EXPECT_FALSE(left_context);
  EXPECT_EQ(seen.deferred_frees, 0U);
  EXPECT_EQ(seen.allocated_bytes, 0U);
  EXPECT_EQ(handed, (std::vector<void*>{p, p, p}));
  rmm_next_segment_cache_statistics const st = segment_statistics();
  EXPECT_EQ(st.bypasses - st0.bypasses, 0U);
  EXPECT_EQ(st.lost_bytes, 0U);
  EXPECT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
