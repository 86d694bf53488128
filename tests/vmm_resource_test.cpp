/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// vmm_resource over the fake runtime and its fake driver (support/fake_cuda_runtime.cpp): which
// segments are made and with what, where blocks land, the hooks, the FABRIC fallback, the
// granularity, the errors and their messages, the reuse rules across streams, and many threads.

#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda.h>  // types only

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace fc = rmm_next::test::fake_cuda;
using rmm_next::vmm_access;
using rmm_next::vmm_granularity;
using rmm_next::vmm_handle_types;
using rmm_next::vmm_options;
using rmm_next::vmm_resource;

constexpr std::size_t MiB = std::size_t{1} << 20;

std::uintptr_t address(void const* p) { return reinterpret_cast<std::uintptr_t>(p); }

/** @brief The hook calls a test saw: (base, bytes) in order, and the driver calls made before. */
struct hook_log {
  std::vector<std::pair<void*, std::size_t>> mapped;
  std::vector<std::pair<void*, std::size_t>> unmapped;
  std::vector<std::size_t> unmaps_before_unmap_hook;  ///< fake cuMemUnmap count at each call
};

vmm_options with_hooks(hook_log& log, vmm_options options = {})
{
  options.on_segment_map = [&log](void* base, std::size_t bytes) {
    log.mapped.emplace_back(base, bytes);
  };
  options.on_segment_unmap = [&log](void* base, std::size_t bytes) {
    log.unmapped.emplace_back(base, bytes);
    log.unmaps_before_unmap_hook.push_back(static_cast<std::size_t>(fc::fake().vmm.unmaps));
  };
  return options;
}

template <class Exception, class F>
std::string message_of(F&& f)
{
  try {
    f();
  } catch (Exception const& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return {};
}

class VmmResource : public ::testing::Test {
 protected:
  void SetUp() override
  {
    fc::reset(2);
    s1_ = fc::make_stream(0);
    s2_ = fc::make_stream(0);
  }
  cudaStream_t s1_{};
  cudaStream_t s2_{};
};

TEST_F(VmmResource, DefaultsAskForWhatNcclMemAllocAsksFor)
{
  vmm_resource const mr;
  EXPECT_EQ(mr.device(), 0);
  EXPECT_EQ(mr.handle_types(), vmm_handle_types::posix_fd | vmm_handle_types::fabric);
  EXPECT_TRUE(mr.gpu_direct_rdma());
  EXPECT_EQ(mr.granularity(), 4 * MiB);  // recommended
  EXPECT_EQ(mr.segment_size(), 64 * MiB);
  EXPECT_EQ(mr.access_devices(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(mr.segments().empty());  // nothing is made before the first allocation
  EXPECT_TRUE(fc::fake().vmm.allocations.empty());
}

TEST_F(VmmResource, BlocksAreCarvedFromOneSegmentAndTheHookRunsOncePerSegment)
{
  hook_log log;
  {
    vmm_resource mr{with_hooks(log)};
    void* a = mr.allocate(s1_, 100);
    void* b = mr.allocate(s1_, 1000);
    void* c = mr.allocate(s1_, 256);
    ASSERT_EQ(mr.segments().size(), 1U);
    auto const seg = mr.segments().front();
    EXPECT_EQ(seg.bytes, 64 * MiB);
    EXPECT_EQ(a, seg.base);
    EXPECT_EQ(address(b), address(a) + 256);   // 100 rounds up to 256
    EXPECT_EQ(address(c), address(a) + 1280);  // 1000 rounds up to 1024
    EXPECT_EQ(mr.allocated_bytes(), 256U + 1024U + 256U);
    ASSERT_EQ(log.mapped.size(), 1U);
    EXPECT_EQ(log.mapped[0], std::make_pair(seg.base, seg.bytes));

    // The segment is full after 63 MiB more: the next block needs a second segment.
    void* big = mr.allocate(s1_, 63 * MiB);
    EXPECT_EQ(mr.segments().size(), 1U);
    void* next = mr.allocate(s1_, 2 * MiB);
    ASSERT_EQ(mr.segments().size(), 2U);
    EXPECT_EQ(next, mr.segments()[1].base);
    EXPECT_EQ(log.mapped.size(), 2U);

    auto const& rec = *fc::fake().vmm.allocations.front();
    EXPECT_EQ(rec.handle_types,
              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC);
    EXPECT_TRUE(rec.gpu_direct_rdma);
    EXPECT_EQ(rec.access, (std::vector<int>{0, 1}));
    EXPECT_EQ(rec.mapped_at, address(seg.base));
    EXPECT_EQ(address(seg.base) % mr.granularity(), 0U);

    for (void* p : {a, b, c, big, next}) {
      mr.deallocate(s1_, p, 1);
    }
    EXPECT_EQ(mr.allocated_bytes(), 0U);
    EXPECT_TRUE(log.unmapped.empty());  // segments stay until the last copy goes
  }
  ASSERT_EQ(log.unmapped.size(), 2U);
  EXPECT_EQ(log.unmapped, log.mapped);
  EXPECT_EQ(log.unmaps_before_unmap_hook, (std::vector<std::size_t>{0, 1}));  // hook first
  EXPECT_EQ(fc::fake().vmm.unmaps, 2);
  EXPECT_TRUE(fc::fake().vmm.reserved.empty());
  for (auto const& a : fc::fake().vmm.allocations) {
    EXPECT_TRUE(a->released);
  }
}

TEST_F(VmmResource, WorksThroughTheLibrarysRefs)
{
  vmm_resource mr;
  rmm_next::device_async_resource_ref ref{mr};
  // The alignment is explicit: CCCL 3.5's refs deprecate the default.
  void* p = ref.allocate(s1_, 1000, 256);
  EXPECT_EQ(p, mr.segments().front().base);
  ref.deallocate(s1_, p, 1000, 256);
  rmm_next::device_resource_ref sync{mr};
  void* q = sync.allocate_sync(1000, 256);
  EXPECT_EQ(q, p);
  sync.deallocate_sync(q, 1000, 256);
}

TEST_F(VmmResource, ZeroBytesIsNullAndNullFreesNothing)
{
  vmm_resource mr;
  EXPECT_EQ(mr.allocate(s1_, 0), nullptr);
  EXPECT_EQ(mr.allocate_sync(0), nullptr);
  mr.deallocate(s1_, nullptr, 0);
  mr.deallocate_sync(nullptr, 0);
  EXPECT_TRUE(mr.segments().empty());
}

TEST_F(VmmResource, FabricRefusedByCuMemCreateIsDroppedAndTheRetryUsesPosixFd)
{
  fc::fake().vmm.refuse_fabric = true;
  vmm_resource mr{vmm_options{.segment_size = 4 * MiB}};
  void* a             = mr.allocate(s1_, 4 * MiB);
  void* b             = mr.allocate(s1_, 4 * MiB);
  unsigned const both = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
  EXPECT_EQ(
    fc::fake().vmm.create_attempts,
    (std::vector<unsigned>{
      both, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}));
  EXPECT_EQ(mr.handle_types(), vmm_handle_types::posix_fd);
  EXPECT_EQ(mr.segments().size(), 2U);
  mr.deallocate(s1_, a, 4 * MiB);
  mr.deallocate(s1_, b, 4 * MiB);
}

TEST_F(VmmResource, FabricUnsupportedByTheDeviceIsNotAskedFor)
{
  fc::fake().vmm.attributes[CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED] = 0;
  vmm_resource mr;
  EXPECT_EQ(mr.handle_types(), vmm_handle_types::posix_fd);
  void* a = mr.allocate(s1_, 1);
  EXPECT_EQ(fc::fake().vmm.create_attempts,
            (std::vector<unsigned>{CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR}));
  mr.deallocate(s1_, a, 1);

  std::string const msg = message_of<rmm_next::not_supported>(
    [] { vmm_resource r{vmm_options{.handle_types = vmm_handle_types::fabric}}; });
  EXPECT_NE(msg.find("rmm_next::vmm_resource: fabric handles are not supported (device 0)"),
            std::string::npos)
    << msg;
}

TEST_F(VmmResource, FabricAloneRefusedByCuMemCreateIsAnError)
{
  fc::fake().vmm.refuse_fabric = true;
  vmm_resource mr{vmm_options{.handle_types = vmm_handle_types::fabric}};
  std::string const msg = message_of<rmm_next::cuda_error>([&] { (void)mr.allocate(s1_, 1); });
  EXPECT_NE(msg.find("cuMemCreate returned CUDA_ERROR_NOT_PERMITTED"), std::string::npos) << msg;
  EXPECT_EQ(fc::fake().vmm.create_attempts.size(), 1U);
}

TEST_F(VmmResource, RdmaFlagOnlyWhereTheDeviceHasIt)
{
  fc::fake().vmm.attributes[CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED] = 0;
  vmm_resource mr;
  EXPECT_FALSE(mr.gpu_direct_rdma());
  void* a = mr.allocate(s1_, 1);
  EXPECT_FALSE(fc::fake().vmm.allocations.front()->gpu_direct_rdma);
  mr.deallocate(s1_, a, 1);
  vmm_resource const off{vmm_options{.gpu_direct_rdma = false}};
  EXPECT_FALSE(off.gpu_direct_rdma());
}

TEST_F(VmmResource, SegmentSizesRoundToTheGranularityChosen)
{
  EXPECT_EQ(vmm_resource{vmm_options{.segment_size = 5 * MiB}}.segment_size(), 8 * MiB);
  EXPECT_EQ(
    (vmm_resource{vmm_options{.granularity = vmm_granularity::minimum, .segment_size = 5 * MiB}}
       .segment_size()),
    6 * MiB);
  vmm_resource const mc{
    vmm_options{.granularity = vmm_granularity::multicast, .segment_size = 5 * MiB}};
  EXPECT_EQ(mc.granularity(), 32 * MiB);
  EXPECT_EQ(mc.segment_size(), 32 * MiB);
  EXPECT_EQ(vmm_resource{vmm_options{.segment_size = 0}}.segment_size(), 4 * MiB);

  // A request above the segment size gets a segment of its own, rounded to the granularity.
  vmm_resource mr{vmm_options{.segment_size = 64 * MiB}};
  void* a = mr.allocate(s1_, 70 * MiB + 1);
  ASSERT_EQ(mr.segments().size(), 1U);
  EXPECT_EQ(mr.segments()[0].bytes, 72 * MiB);
  EXPECT_EQ(fc::fake().vmm.allocations.front()->bytes % (4 * MiB), 0U);
  mr.deallocate(s1_, a, 70 * MiB + 1);
}

TEST_F(VmmResource, EqualRequestsGiveEqualSegmentsOnEveryRank)
{
  std::vector<std::size_t> const requests{MiB, 70 * MiB, 3 * MiB, 40 * MiB, 30 * MiB, 200 * MiB};
  auto run = [&](int device) {
    vmm_resource mr{vmm_options{.segment_size = 64 * MiB}, device};
    std::vector<void*> ptrs;
    for (std::size_t r : requests) {
      ptrs.push_back(mr.allocate(s1_, r));
    }
    std::vector<std::size_t> sizes;
    std::vector<std::size_t> offsets;
    for (auto const& s : mr.segments()) {
      sizes.push_back(s.bytes);
    }
    for (void* p : ptrs) {
      auto const s = mr.segment_of(p);
      offsets.push_back(address(p) - address(s->base));
    }
    for (std::size_t i = 0; i < ptrs.size(); ++i) {
      mr.deallocate(s1_, ptrs[i], requests[i]);
    }
    return std::make_pair(sizes, offsets);
  };
  auto const rank0 = run(0);
  auto const rank1 = run(1);
  EXPECT_EQ(rank0, rank1);
  EXPECT_EQ(rank0.first, (std::vector<std::size_t>{64 * MiB, 72 * MiB, 64 * MiB, 200 * MiB}));
}

TEST_F(VmmResource, AccessForThisDeviceOnlyOrEveryPeerThatCan)
{
  {
    vmm_resource mine{vmm_options{.access = vmm_access::this_device}};
    EXPECT_EQ(mine.access_devices(), (std::vector<int>{0}));
    void* a = mine.allocate(s1_, 1);
    EXPECT_EQ(fc::fake().vmm.allocations.front()->access, (std::vector<int>{0}));
    mine.deallocate(s1_, a, 1);
  }

  fc::reset(3);
  fc::fake().vmm.no_peer_access = {2};
  EXPECT_EQ(vmm_resource{}.access_devices(), (std::vector<int>{0, 1}));
  EXPECT_EQ((vmm_resource{vmm_options{}, 1}.access_devices()), (std::vector<int>{1, 0}));
}

TEST_F(VmmResource, UnsupportedDevicesAndUnknownDevicesAreTypedErrors)
{
  fc::fake().vmm.attributes[CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED] = 0;
  std::string msg = message_of<rmm_next::not_supported>([] { vmm_resource r; });
  EXPECT_NE(msg.find("rmm_next::vmm_resource: the device does not support virtual memory "
                     "management (device 0)"),
            std::string::npos)
    << msg;

  fc::reset(2);
  fc::fake().vmm.attributes[CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED] = 0;
  msg = message_of<rmm_next::not_supported>([] { vmm_resource r; });
  EXPECT_NE(msg.find("POSIX file descriptor handles are not supported (device 0)"),
            std::string::npos)
    << msg;
  // Without handle types the device's lack of them does not matter.
  EXPECT_NO_THROW(vmm_resource{vmm_options{.handle_types = vmm_handle_types::none}});

  fc::reset(2);
  fc::fake().vmm.attributes[CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED] = 0;
  msg = message_of<rmm_next::not_supported>(
    [] { vmm_resource r{vmm_options{.granularity = vmm_granularity::multicast}}; });
  EXPECT_NE(msg.find("multicast granularity needs a device with multicast support"),
            std::string::npos)
    << msg;

  msg = message_of<std::out_of_range>([] { vmm_resource r{vmm_options{}, 5}; });
  EXPECT_NE(
    msg.find("rmm_next::vmm_resource: device id 5 is out of range [0, 2): 2 device(s) are visible"),
    std::string::npos)
    << msg;
}

TEST_F(VmmResource, AlignmentAboveTheGranularityOrNotAPowerOfTwoIsRefused)
{
  vmm_resource mr;
  std::string msg = message_of<rmm_next::bad_alloc>([&] { (void)mr.allocate(s1_, 1, 8 * MiB); });
  EXPECT_NE(msg.find("rmm_next::vmm_resource::allocate: alignment 8388608 exceeds the segment "
                     "granularity 4194304"),
            std::string::npos)
    << msg;
  msg = message_of<rmm_next::bad_alloc>([&] { (void)mr.allocate_sync(1, 48); });
  EXPECT_NE(msg.find("alignment 48 is not a power of two"), std::string::npos) << msg;
  EXPECT_TRUE(mr.segments().empty());

  // Up to the granularity, any power of two.
  void* a = mr.allocate(s1_, 100);
  void* b = mr.allocate(s1_, 100, MiB);
  void* c = mr.allocate(s1_, 100, 4 * MiB);
  EXPECT_EQ(address(b) % MiB, 0U);
  EXPECT_EQ(address(c) % (4 * MiB), 0U);
  EXPECT_NE(address(b), address(a));
  // The gap before `b` stays free: a small block goes there.
  void* d = mr.allocate(s1_, 256);
  EXPECT_EQ(address(d), address(a) + 256);
  for (void* p : {a, b, c, d}) {
    mr.deallocate(s1_, p, 100);
  }
}

TEST_F(VmmResource, OutOfMemoryNamesTheSizesAndTheResourceKeepsWorking)
{
  fc::fake().vmm.memory = 100 * MiB;
  vmm_resource mr{vmm_options{.segment_size = 64 * MiB}};
  std::string const msg =
    message_of<rmm_next::out_of_memory>([&] { (void)mr.allocate(s1_, 200 * MiB); });
  EXPECT_NE(msg.find("rmm_next::vmm_resource: out_of_memory: failed to create a segment of "
                     "209715200 bytes for a request of 209715200 bytes on device 0"),
            std::string::npos)
    << msg;
  EXPECT_NE(msg.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << msg;
  EXPECT_TRUE(mr.segments().empty());
  void* a = mr.allocate(s1_, MiB);
  EXPECT_NE(a, nullptr);
  mr.deallocate(s1_, a, MiB);
}

TEST_F(VmmResource, AFailedMapOrAccessGrantLeavesNothingBehind)
{
  vmm_resource mr;
  fc::fake().fail_next["cuMemMap"] = static_cast<cudaError_t>(CUDA_ERROR_INVALID_VALUE);
  EXPECT_THROW((void)mr.allocate(s1_, 1), rmm_next::cuda_error);
  fc::fake().fail_next["cuMemSetAccess"] = static_cast<cudaError_t>(CUDA_ERROR_INVALID_VALUE);
  std::string const msg = message_of<rmm_next::cuda_error>([&] { (void)mr.allocate(s1_, 1); });
  EXPECT_NE(msg.find("cuMemSetAccess returned CUDA_ERROR_INVALID_VALUE"), std::string::npos) << msg;
  EXPECT_TRUE(mr.segments().empty());
  EXPECT_TRUE(fc::fake().vmm.reserved.empty());
  for (auto const& a : fc::fake().vmm.allocations) {
    EXPECT_TRUE(a->released);
  }
}

TEST_F(VmmResource, AThrowingMapHookUndoesTheSegment)
{
  int calls = 0;
  vmm_resource mr{vmm_options{.on_segment_map = [&](void*, std::size_t) {
    if (++calls == 1) { throw std::runtime_error{"register failed"}; }
  }}};
  EXPECT_THROW((void)mr.allocate(s1_, 1), std::runtime_error);
  EXPECT_TRUE(mr.segments().empty());
  EXPECT_TRUE(fc::fake().vmm.reserved.empty());
  void* a = mr.allocate(s1_, 1);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(mr.segments().size(), 1U);
  mr.deallocate(s1_, a, 1);
}

TEST_F(VmmResource, ABlockFreedOnAStreamIsReusedThereAtOnceAndElsewhereAfterAWait)
{
  {
    vmm_resource mr;
    void* a = mr.allocate(s1_, 1000);
    mr.deallocate(s1_, a, 1000);
    ASSERT_EQ(fc::fake().events.recorded.size(), 1U);
    EXPECT_EQ(fc::fake().events.recorded[0].second, s1_);  // recorded at the free, on its stream

    void* b = mr.allocate(s1_, 1000);
    EXPECT_EQ(b, a);
    EXPECT_TRUE(fc::fake().events.waits.empty());  // same stream: ordered already
    mr.deallocate(s1_, b, 1000);

    void* c = mr.allocate(s2_, 1000);
    EXPECT_EQ(c, a);
    ASSERT_EQ(fc::fake().events.waits.size(), 1U);
    EXPECT_EQ(fc::fake().events.waits[0].first, s2_);
    EXPECT_EQ(fc::fake().events.waits[0].second, fc::fake().events.recorded[1].first);

    // Freed synchronously: no new fence. (The rest of the segment, which the freed block merged
    // with, still carries s1's last fence, which s1 does not wait on.)
    mr.deallocate_sync(c, 1000);
    EXPECT_EQ(fc::fake().events.recorded.size(), 2U);
    void* d = mr.allocate(s1_, 1000);
    EXPECT_EQ(d, a);
    EXPECT_EQ(fc::fake().events.waits.size(), 1U);

    // allocate_sync waits on the host for every fence of the block: s2's free and s1's.
    mr.deallocate(s2_, d, 1000);
    int const synchronized = fc::fake().events.synchronized;
    void* e                = mr.allocate_sync(1000);
    EXPECT_EQ(e, a);
    EXPECT_EQ(fc::fake().events.synchronized, synchronized + 2);
    EXPECT_EQ(fc::fake().events.waits.size(), 1U);  // no stream waits
    mr.deallocate_sync(e, 1000);
  }
  EXPECT_EQ(fc::fake().events.created, 3);
  EXPECT_EQ(fc::fake().events.destroyed, 3);  // every event goes, at the latest with the resource
}

TEST_F(VmmResource, HostWaitsRunInRelaxedCaptureModeSoNoCaptureElsewhereIsInvalidated)
{
  {
    vmm_resource mr;
    void* a = mr.allocate(s1_, 1000);
    mr.deallocate(s1_, a, 1000);
    fc::fake().query_modes.clear();
    void* b = mr.allocate_sync(1000);  // waits on the host for s1's free
    EXPECT_EQ(b, a);
    mr.deallocate_sync(b, 1000);
    void* c = mr.allocate(s2_, 1000);
    mr.deallocate(s2_, c, 1000);  // pending when the resource goes: its destructor waits
  }
  // allocate_sync's wait, then the destructor's for the fences still in the free list.
  auto const& waits = fc::fake().query_modes;
  EXPECT_GE(waits.size(), 2U);
  for (auto const& [call, mode] : waits) {
    EXPECT_EQ(call, "cuEventSynchronize");
    EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed) << call;
  }
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);  // the thread's own mode is given back
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
}

TEST_F(VmmResource, AFailedHostWaitThrowsAndKeepsTheBlockForTheNextCall)
{
  vmm_resource mr;
  void* a = mr.allocate(s1_, 1000);
  mr.deallocate(s1_, a, 1000);
  fc::fake().fail_next["cuEventSynchronize"] = cudaErrorNotReady;
  std::string const message =
    message_of<rmm_next::cuda_error>([&] { (void)mr.allocate_sync(1000); });
  EXPECT_NE(message.find("vmm_resource::allocate_sync"), std::string::npos) << message;
  EXPECT_NE(message.find("cuEventSynchronize failed"), std::string::npos) << message;
  EXPECT_EQ(mr.allocated_bytes(), 0U);  // nothing handed out
  int const synchronized = fc::fake().events.synchronized;
  void* b                = mr.allocate_sync(1000);  // the block, still waited for this time
  EXPECT_EQ(b, a);
  EXPECT_EQ(fc::fake().events.synchronized, synchronized + 1);
  mr.deallocate_sync(b, 1000);
}

TEST_F(VmmResource, CoalescedBlocksCarryTheFencesOfEveryStreamThatFreedThem)
{
  vmm_resource mr;
  void* a = mr.allocate(s1_, 256);
  void* b = mr.allocate(s1_, 256);
  void* c = mr.allocate(s1_, 256);
  mr.deallocate(s1_, a, 256);
  mr.deallocate(s2_, b, 256);
  mr.deallocate(s1_, c, 256);
  // One free block: the whole segment again.
  void* all = mr.allocate(s1_, 64 * MiB);
  EXPECT_EQ(all, a);
  EXPECT_EQ(mr.segments().size(), 1U);
  // s1 waits only on s2's free, never on its own.
  ASSERT_EQ(fc::fake().events.waits.size(), 1U);
  EXPECT_EQ(fc::fake().events.waits[0].first, s1_);
  EXPECT_EQ(fc::fake().events.waits[0].second, fc::fake().events.recorded[1].first);
  mr.deallocate(s1_, all, 64 * MiB);
}

TEST_F(VmmResource, PerThreadStreamsAreOneStreamPerThread)
{
  vmm_resource mr;
  void* a = mr.allocate(cudaStreamPerThread, 256);
  mr.deallocate(cudaStreamPerThread, a, 256);
  void* b = mr.allocate(cudaStreamPerThread, 256);  // this thread's stream: no wait
  EXPECT_EQ(b, a);
  EXPECT_TRUE(fc::fake().events.waits.empty());
  mr.deallocate(cudaStreamPerThread, b, 256);
  std::thread{[&] {
    void* c = mr.allocate(cudaStreamPerThread, 256);  // another thread's stream: a wait
    EXPECT_EQ(c, a);
    mr.deallocate(cudaStreamPerThread, c, 256);
  }}.join();
  EXPECT_EQ(fc::fake().events.waits.size(), 1U);

  // Many frees on one lane keep one fence of it: an allocation elsewhere waits once per lane.
  for (int i = 0; i < 100; ++i) {
    mr.deallocate(cudaStream_t{}, mr.allocate(cudaStream_t{}, 256), 256);
  }
  std::size_t const before = fc::fake().events.waits.size();
  void* d                  = mr.allocate(s1_, 256);
  // 0 from this thread, and the two per-thread streams: three lanes.
  EXPECT_EQ(fc::fake().events.waits.size(), before + 3);
  mr.deallocate(s1_, d, 256);
}

TEST_F(VmmResource, CopiesShareTheSegmentsAndTheLastOneUnmapsThem)
{
  hook_log log;
  auto* mr = new vmm_resource{with_hooks(log)};
  vmm_resource copy{*mr};
  EXPECT_TRUE(copy == *mr);
  EXPECT_FALSE(copy == vmm_resource{});
  void* a = copy.allocate(s1_, 1);
  EXPECT_EQ(mr->segments().size(), 1U);
  delete mr;
  EXPECT_TRUE(log.unmapped.empty());
  copy.deallocate(s1_, a, 1);
  copy = vmm_resource{};
  EXPECT_EQ(log.unmapped.size(), 1U);
}

TEST_F(VmmResource, ASegmentExportsAsAPosixFileDescriptor)
{
  vmm_resource mr;
  void* a = mr.allocate(s1_, 1000);
  EXPECT_EQ(mr.export_segment_fd(static_cast<char*>(a) + 300), 101);  // the fake's fd of handle 1
  std::string msg = message_of<rmm_next::logic_error>([&] { (void)mr.export_segment_fd(&msg); });
  EXPECT_NE(msg.find("vmm_resource::export_segment_fd: the pointer is in no segment"),
            std::string::npos);
  mr.deallocate(s1_, a, 1000);

  vmm_resource none{vmm_options{.handle_types = vmm_handle_types::none}};
  void* b = none.allocate(s1_, 1);
  msg     = message_of<rmm_next::not_supported>([&] { (void)none.export_segment_fd(b); });
  EXPECT_NE(msg.find("made without POSIX_FD handles"), std::string::npos) << msg;
  none.deallocate(s1_, b, 1);
}

TEST_F(VmmResource, ADeviceOtherThanTheCurrentOneGetsTheSegments)
{
  vmm_resource mr{vmm_options{}, 1};
  void* a = mr.allocate(s1_, 1);
  EXPECT_EQ(fc::fake().vmm.allocations.front()->device, 1);
  EXPECT_EQ(fc::fake().current_device, 0);  // given back
  mr.deallocate(s1_, a, 1);
}

TEST_F(VmmResource, ManyThreadsNeverShareABlock)
{
  std::random_device rd;
  unsigned const seed = rd();
  std::printf("vmm_resource thread test seed: %u\n", seed);
  fc::fake().vmm.memory = std::size_t{64} << 30;  // the fake hands out addresses, not memory
  hook_log log;
  std::mutex hook_mutex;
  vmm_options options{.segment_size = 8 * MiB};
  options.on_segment_map = [&](void* base, std::size_t bytes) {
    std::lock_guard const lock{hook_mutex};
    log.mapped.emplace_back(base, bytes);
  };
  vmm_resource mr{options};
  std::mutex live_mutex;
  std::map<std::uintptr_t, std::uintptr_t> live;  // start -> end, over every thread
  bool overlap = false;
  std::vector<cudaStream_t> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(fc::make_stream(0));
  }
  auto worker = [&](unsigned thread_seed) {
    std::mt19937 rng{thread_seed};
    std::vector<std::pair<void*, std::size_t>> mine;
    for (int op = 0; op < 2000; ++op) {
      cudaStream_t const stream = streams[rng() % streams.size()];
      if (mine.empty() || (mine.size() < 64 && rng() % 2 == 0)) {
        std::size_t const bytes = 1 + rng() % (rng() % 8 == 0 ? 3 * MiB : 64 * 1024);
        vmm_resource copy{mr};  // copies share state
        void* p = rng() % 2 == 0 ? copy.allocate(stream, bytes) : copy.allocate_sync(bytes);
        {
          std::lock_guard const lock{live_mutex};
          auto const start = address(p);
          auto const end   = start + bytes;
          auto const next  = live.lower_bound(start);
          if (next != live.end() && next->first < end) { overlap = true; }
          if (next != live.begin() && std::prev(next)->second > start) { overlap = true; }
          live.emplace(start, end);
        }
        mine.emplace_back(p, bytes);
      } else {
        std::size_t const i   = rng() % mine.size();
        auto const [p, bytes] = mine[i];
        mine[i]               = mine.back();
        mine.pop_back();
        {
          std::lock_guard const lock{live_mutex};
          live.erase(address(p));
        }
        if (rng() % 2 == 0) {
          mr.deallocate(stream, p, bytes);
        } else {
          mr.deallocate_sync(p, bytes);
        }
      }
    }
    for (auto const& [p, bytes] : mine) {
      {
        std::lock_guard const lock{live_mutex};
        live.erase(address(p));
      }
      mr.deallocate(streams[0], p, bytes);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 8; ++t) {
    threads.emplace_back(worker, seed + t);
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_FALSE(overlap) << "seed " << seed;
  EXPECT_EQ(mr.allocated_bytes(), 0U) << "seed " << seed;
  EXPECT_EQ(log.mapped.size(), mr.segments().size()) << "seed " << seed;
  for (auto const& s : mr.segments()) {
    EXPECT_EQ(s.bytes % mr.granularity(), 0U);
  }
}

}  // namespace

// ---- Sizes near SIZE_MAX, frees on captured streams, destroyed contexts, fork ------------------

TEST_F(VmmResource, SizesNearSizeMaxAreOutOfMemoryNamingTheSizeAndNothingIsHandedOut)
{
  vmm_resource mr;
  std::size_t const max = std::numeric_limits<std::size_t>::max();
  // Each one used to wrap: to a 0-byte block (past 2^64 when rounded to 256) or to a 0-byte
  // segment (when rounded to the granularity).
  for (std::size_t const bytes : {max, max - 200, max - 255, max - 4095, max - 4 * MiB + 1}) {
    std::string const msg =
      message_of<rmm_next::out_of_memory>([&] { (void)mr.allocate(s1_, bytes); });
    EXPECT_NE(msg.find("out_of_memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(bytes)), std::string::npos) << msg;
    std::string const sync =
      message_of<rmm_next::out_of_memory>([&] { (void)mr.allocate_sync(bytes); });
    EXPECT_NE(sync.find(std::to_string(bytes)), std::string::npos) << sync;
  }
  EXPECT_EQ(mr.allocated_bytes(), 0U);
  EXPECT_TRUE(mr.segments().empty());
  // The resource keeps working, and two blocks are two addresses.
  void* a = mr.allocate(s1_, 256);
  void* b = mr.allocate(s1_, 256);
  EXPECT_NE(a, b);
  EXPECT_EQ(mr.allocated_bytes(), 512U);
  mr.deallocate(s1_, a, 256);
  mr.deallocate(s1_, b, 256);
}

TEST_F(VmmResource, ASegmentSizeThatCannotBeRoundedIsRefusedAtConstruction)
{
  std::string const msg = message_of<rmm_next::bad_alloc>([&] {
    vmm_resource mr{vmm_options{.segment_size = std::numeric_limits<std::size_t>::max() - 1}};
  });
  EXPECT_NE(msg.find("segment_size 18446744073709551614 cannot be rounded up to the granularity"),
            std::string::npos)
    << msg;
}

/** The fake's record of `stream`, whose `capture_id` says whether it is captured. */
fc::stream_record& captured(cudaStream_t stream)
{
  return *reinterpret_cast<fc::stream_record*>(stream);
}

/** The calling thread's capture mode, `mode`, for the scope. */
class thread_mode {
 public:
  explicit thread_mode(cudaStreamCaptureMode mode) : saved_{mode}
  {
    EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(&saved_), cudaSuccess);
  }
  thread_mode(thread_mode const&)            = delete;
  thread_mode& operator=(thread_mode const&) = delete;
  ~thread_mode() { (void)cudaThreadExchangeStreamCaptureMode(&saved_); }

 private:
  cudaStreamCaptureMode saved_;
};

class VmmFreeInACapture : public VmmResource,
                          public ::testing::WithParamInterface<cudaStreamCaptureMode> {};

TEST_P(VmmFreeInACapture, LeavesTheCaptureIntactAndTheGraphFreesTheBlockWhenItRuns)
{
  vmm_resource mr;
  void* p                              = mr.allocate(s1_, 4096);
  void* q                              = mr.allocate(s1_, 4096);  // a neighbour, live throughout
  constexpr unsigned long long capture = 9;
  captured(s1_).capture_id             = capture;  // s1 is captured from here on
  {
    thread_mode const mode{GetParam()};
    mr.deallocate(s1_, p, 4096);
  }
  EXPECT_FALSE(captured(s1_).capture_invalidated);
  EXPECT_EQ(mr.allocated_bytes(), 4096U);  // freed, from the caller's view
  // Until the graph runs past the free, nobody else gets the block: during the capture, nor
  // after it ends.
  void* elsewhere = mr.allocate(s2_, 4096);
  EXPECT_NE(elsewhere, p);
  captured(s1_).capture_id = 0;  // the capture ends
  void* after              = mr.allocate(s2_, 4096);
  EXPECT_NE(after, p);
  EXPECT_FALSE(captured(s1_).capture_invalidated);
  fc::run_graph(capture);  // launched: its host node runs once the work before the free is done
  void* reused = mr.allocate(s2_, 4096);
  EXPECT_EQ(reused, p);
  // No wait on an event of the capture (that would invalidate it, or fail outside it).
  for (auto const& [waiter, event] : fc::fake().events.waits) {
    EXPECT_NE(waiter, s2_);
  }
  fc::run_graph(capture);  // a second launch frees nothing twice
  EXPECT_EQ(mr.allocated_bytes(), 4 * 4096U);
  fc::destroy_graph(capture);
  EXPECT_EQ(fc::fake().user_objects_live, 0);
  for (void* b : {q, elsewhere, after, reused}) {
    mr.deallocate(s2_, b, 4096);
  }
  EXPECT_EQ(mr.allocated_bytes(), 0U);
}

INSTANTIATE_TEST_SUITE_P(EveryModeOfTheFreeingThread,
                         VmmFreeInACapture,
                         ::testing::Values(cudaStreamCaptureModeGlobal,
                                           cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed));

TEST_F(VmmResource, AGraphDestroyedWithoutRunningOrAnInvalidatedCaptureKeepsItsBlockOut)
{
  vmm_resource mr;
  void* p                  = mr.allocate(s1_, 4096);
  void* r                  = mr.allocate(s2_, 4096);
  captured(s1_).capture_id = 3;
  mr.deallocate(s1_, p, 4096);
  captured(s1_).capture_id = 0;
  fc::destroy_graph(3);  // never launched: the block's last use is unknown
  EXPECT_EQ(fc::fake().user_objects_live, 0);
  captured(s2_).capture_id          = 4;
  captured(s2_).capture_invalidated = true;  // a capture that has failed, not yet ended
  mr.deallocate(s2_, r, 4096);
  captured(s2_).capture_id = 0;
  EXPECT_EQ(mr.allocated_bytes(), 0U);
  EXPECT_EQ(mr.graph_pending_bytes(), 2 * 4096U);
  for (int i = 0; i < 8; ++i) {
    void* b = mr.allocate(s1_, 4096);
    EXPECT_NE(b, p);
    EXPECT_NE(b, r);
    mr.deallocate(s1_, b, 4096);
  }
}

TEST_F(VmmResource, AFailedHostNodeKeepsTheBlockOutAndTheCaptureIntact)
{
  vmm_resource mr;
  void* p                                  = mr.allocate(s1_, 4096);
  captured(s1_).capture_id                 = 5;
  fc::fake().fail_next["cuLaunchHostFunc"] = static_cast<cudaError_t>(CUDA_ERROR_INVALID_VALUE);
  mr.deallocate(s1_, p, 4096);
  captured(s1_).capture_id = 0;
  EXPECT_FALSE(captured(s1_).capture_invalidated);
  EXPECT_EQ(mr.graph_pending_bytes(), 4096U);
  fc::run_graph(5);
  EXPECT_NE(mr.allocate(s2_, 4096), p);
  fc::destroy_graph(5);
  EXPECT_EQ(fc::fake().user_objects_live, 0);  // the host node's data went with the graph
}

TEST_F(VmmResource, AFreeFromADestroyedSecondContextLeavesTheSegmentUsable)
{
  vmm_resource mr{vmm_options{.segment_size = 4 * MiB}};
  void* p                   = mr.allocate(s1_, MiB);
  void* neighbour           = mr.allocate(s1_, MiB);
  fc::fake().second_context = true;  // a thread of a second context of device 0
  cudaStream_t s3{};
  ASSERT_EQ(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking), cudaSuccess);
  mr.deallocate(s3, p, MiB);
  fc::fake().second_context = false;
  fc::destroy_second_context(0);  // after its streams were synchronized, as its owner does
  // The block, its merged neighbourhood and the other sizes of the segment all work.
  void* again = mr.allocate(s1_, MiB);
  EXPECT_EQ(again, p);
  mr.deallocate(s1_, again, MiB);
  void* sync = mr.allocate_sync(MiB);
  EXPECT_EQ(sync, p);
  mr.deallocate_sync(sync, MiB);
  mr.deallocate(s2_, neighbour, MiB);
  void* whole = mr.allocate(s2_, 4 * MiB);
  EXPECT_EQ(whole, p);
  mr.deallocate(s2_, whole, 4 * MiB);
  EXPECT_EQ(fc::fake().events.refused_waits, 0);
  EXPECT_EQ(mr.segments().size(), 1U);
}

TEST_F(VmmResource, AForkedChildRefusesEveryAllocationWithATypedError)
{
  vmm_resource mr;
  void* fenced = mr.allocate(s1_, 4096);
  void* plain  = mr.allocate(s1_, 8192);
  mr.deallocate(s1_, fenced, 4096);
  mr.deallocate_sync(plain, 8192);  // a free block with nothing to wait for
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t const pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code     = 0;
    auto refused = [](auto&& f) {
      try {
        (void)f();
      } catch (rmm_next::cuda_error const& e) {
        return std::string{e.what()}.find("forked") != std::string::npos;
      } catch (...) {
        return false;
      }
      return false;
    };
    if (!refused([&] { return mr.allocate_sync(8192); })) { code |= 1; }
    if (!refused([&] { return mr.allocate(s2_, 4096); })) { code |= 2; }
    if (!refused([&] { return mr.allocate(s1_, 4096); })) { code |= 4; }
    ::_exit(code);
  }
  int status{};
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 allocate_sync, 2 and 4 allocate handed out a block";
  void* again = mr.allocate_sync(8192);  // the parent's resource is untouched
  EXPECT_EQ(mr.allocated_bytes(), 8192U);
  EXPECT_TRUE(again == fenced || again == plain);
  mr.deallocate_sync(again, 8192);
}

TEST_F(VmmResource, ADefaultStreamOfAnotherContextIsAnotherLane)
{
  vmm_resource mr;
  for (cudaStream_t const handle : {cudaStreamPerThread, cudaStream_t{}}) {
    void* a = mr.allocate(handle, 4096);
    mr.deallocate(handle, a, 4096);  // device 0's default stream of this thread
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    std::size_t waits = fc::fake().events.waits.size();
    void* b           = mr.allocate(handle, 4096);  // device 1's: the same handle, another stream
    EXPECT_EQ(b, a);
    EXPECT_GT(fc::fake().events.waits.size(), waits);  // it waited for device 0's free
    mr.deallocate(handle, b, 4096);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    fc::fake().second_context = true;  // a second context of device 0: another stream again
    waits                     = fc::fake().events.waits.size();
    void* c                   = mr.allocate(handle, 4096);
    EXPECT_EQ(c, a);
    EXPECT_GT(fc::fake().events.waits.size(), waits);
    mr.deallocate(handle, c, 4096);
    fc::fake().second_context = false;
  }
}
