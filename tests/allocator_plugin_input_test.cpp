/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so given what it must refuse, over the fake CUDA runtime (linked into this
// program, it takes the place of libcudart's functions for the plugin too): unknown devices,
// sizes PyTorch never passes, segments the device cannot hold. Each refusal is a NULL or -1 with
// a message naming the call and the value, changes no count, and leaves the plugin working.

#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/allocator_plugin.h>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace {

namespace fake = rmm_next::test::fake_cuda;

constexpr std::size_t segment_bytes = std::size_t{2} << 20;

rmm_next_statistics statistics(int device = 0)
{
  rmm_next_statistics s{};
  EXPECT_EQ(rmm_next_get_statistics(device, &s), 0) << rmm_next_last_error();
  return s;
}

std::string last_error() { return rmm_next_last_error(); }

rmm_next_vmm_statistics vmm_statistics(int device = 0)
{
  rmm_next_vmm_statistics s{};
  EXPECT_EQ(rmm_next_vmm_get_statistics(device, &s), 0) << rmm_next_last_error();
  return s;
}

/** @brief What a free of a pointer the plugin did not hand out leaves in rmm_next_last_error. */
std::string not_handed_out(char const* call)
{
  return std::string{"rmm_next::allocator_plugin: "} + call +
         " was given a pointer this allocator did not hand out (or freed already); it is not freed";
}

/** @brief Leaves a message on this thread, so that a call that sets none is caught. */
void leave_a_stale_message() { (void)rmm_next_mem_get_info(0, nullptr, nullptr); }

/** @brief The fake has two devices from the start, before the plugin asks for the count. */
[[maybe_unused]] bool const two_devices = [] {
  fake::reset(2);
  return true;
}();

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(statistics().allocated_bytes, 0U) << "a test leaked"; }

  /** @brief An allocation and a segment, each freed: the plugin still works. */
  static void expect_working()
  {
    rmm_next_statistics const before = statistics();
    void* p                          = rmm_next_torch_alloc(1000, 0, nullptr);
    void* s                          = rmm_next_torch_segment_alloc(segment_bytes, 0, nullptr);
    ASSERT_NE(p, nullptr) << last_error();
    ASSERT_NE(s, nullptr) << last_error();
    EXPECT_EQ(statistics().allocated_bytes, before.allocated_bytes + 1000 + segment_bytes);
    rmm_next_torch_free(p, 1000, 0, nullptr);
    rmm_next_torch_free(s, segment_bytes, 0, nullptr);
    rmm_next_statistics const after = statistics();
    EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
    EXPECT_EQ(after.torch_allocations, before.torch_allocations + 2);
    EXPECT_EQ(after.failed_allocations, before.failed_allocations);
  }
};

TEST_F(BadInput, ResettingThePeakOfAnUnknownDeviceFailsAndChangesNothing)
{
  ASSERT_EQ(rmm_next_reset_peak_statistics(0), 0) << last_error();
  void* p = rmm_next_allocate(3000, 0, nullptr);
  ASSERT_NE(p, nullptr) << last_error();
  rmm_next_deallocate(p, 3000, 0, nullptr);
  for (int device : {2, 7, -2}) {
    SCOPED_TRACE(device);
    EXPECT_EQ(rmm_next_reset_peak_statistics(device), -1);
    EXPECT_EQ(last_error(),
              "rmm_next::allocator_plugin: device id " + std::to_string(device) +
                " is out of range [0, 2): 2 device(s) are visible");
  }
  EXPECT_EQ(statistics().allocated_bytes_high, 3000U);  // not reset by the failed calls
  EXPECT_EQ(rmm_next_reset_peak_statistics(-1), 0) << last_error();  // -1: the current device
  EXPECT_EQ(statistics().allocated_bytes_high, 0U);
  expect_working();
}

TEST_F(BadInput, ANegativeVmmSizeIsRefusedWithAMessageAsTorchsIs)
{
  leave_a_stale_message();
  EXPECT_EQ(rmm_next_vmm_alloc(-1, 0, nullptr), nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: rmm_next_vmm_alloc was given a negative size (-1 "
            "bytes); pass the number of bytes");
  leave_a_stale_message();
  int block{};  // refused before the pointer is looked at
  rmm_next_vmm_free(&block, -4096, 0, nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: rmm_next_vmm_free was given a negative size (-4096 "
            "bytes); pass the number of bytes");
  expect_working();
}

TEST_F(BadInput, ANegativeTorchSizeIsRefusedWithAMessage)
{
  rmm_next_statistics const before = statistics();
  leave_a_stale_message();
  EXPECT_EQ(rmm_next_torch_alloc(-1, 0, nullptr), nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: rmm_next_torch_alloc was given a negative size (-1 "
            "bytes); pass the number of bytes");
  EXPECT_EQ(rmm_next_torch_alloc(0, 0, nullptr), nullptr);  // 0 bytes: NULL, not a failure
  void* p = rmm_next_torch_alloc(4096, 0, nullptr);
  ASSERT_NE(p, nullptr) << last_error();
  // A free with a negative size is refused: the counts stay exact and the memory stays live.
  rmm_next_torch_free(p, -4096, 0, nullptr);
  EXPECT_NE(last_error().find("rmm_next_torch_free was given a negative size (-4096 bytes)"),
            std::string::npos)
    << last_error();
  rmm_next_statistics const during = statistics();
  EXPECT_EQ(during.allocated_bytes, 4096U);
  EXPECT_EQ(during.deallocations, before.deallocations);
  rmm_next_torch_free(p, 4096, 0, nullptr);
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.allocated_bytes, 0U);
  EXPECT_EQ(after.torch_allocations, before.torch_allocations + 1);
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 1);  // the negative size
  expect_working();
}

TEST_F(BadInput, ASegmentOfNoPositiveSizeOrOfAnUnknownDeviceIsRefusedWithAMessage)
{
  rmm_next_statistics const before = statistics();
  leave_a_stale_message();
  EXPECT_EQ(rmm_next_torch_segment_alloc(0, 0, nullptr), nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: rmm_next_torch_segment_alloc was given a size of 0 "
            "bytes; a segment needs a positive size");
  EXPECT_EQ(rmm_next_torch_segment_alloc(-4096, 0, nullptr), nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: rmm_next_torch_segment_alloc was given a negative size "
            "(-4096 bytes); pass the number of bytes");
  EXPECT_EQ(rmm_next_torch_segment_alloc(segment_bytes, 2, nullptr), nullptr);
  EXPECT_EQ(last_error(),
            "rmm_next::allocator_plugin: device id 2 is out of range [0, 2): 2 device(s) are "
            "visible");
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.allocations, before.allocations);
  // The sizes 0 and -4096 failed on device 0; device 2 does not exist, so nothing counts it.
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 2);
  expect_working();
}

// The device cannot hold the segment (the fake's allocation fails as a real device's would).
TEST_F(BadInput, ASegmentLargerThanTheDeviceIsOutOfMemoryAndTheNextOneWorks)
{
  constexpr std::int64_t huge                       = std::int64_t{1} << 50;
  rmm_next_statistics const before                  = statistics();
  fake::fake().fail_next["cudaMallocFromPoolAsync"] = cudaErrorMemoryAllocation;
  EXPECT_EQ(rmm_next_torch_segment_alloc(huge, 0, nullptr), nullptr);
  std::string const message = last_error();
  EXPECT_NE(message.find("out_of_memory"), std::string::npos) << message;
  EXPECT_NE(message.find("failed to allocate " + std::to_string(huge) + " bytes on device 0"),
            std::string::npos)
    << message;
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 1);
  EXPECT_EQ(after.allocated_bytes, 0U);
  expect_working();
}

// The segment was allocated but its stream could not be synchronized: it is freed again, and the
// call fails naming the synchronization.
TEST_F(BadInput, ASegmentWhoseStreamCannotBeSynchronizedIsFreedAgain)
{
  rmm_next_statistics const before                = statistics();
  fake::fake().fail_next["cudaStreamSynchronize"] = cudaErrorInvalidResourceHandle;
  EXPECT_EQ(rmm_next_torch_segment_alloc(segment_bytes, 0, nullptr), nullptr);
  EXPECT_NE(last_error().find("cudaStreamSynchronize returned cudaErrorInvalidResourceHandle"),
            std::string::npos)
    << last_error();
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.allocated_bytes, 0U);
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
  expect_working();
}

// Every allocation call that returns NULL with a message counts one failed allocation of its
// device: bad sizes as well as out of memory. One on a device that does not exist is counted
// nowhere (no statistics describe it).
TEST_F(BadInput, EveryFailedAllocationIsCountedOnItsDevice)
{
  rmm_next_statistics const before         = statistics();
  rmm_next_statistics const before_1       = statistics(1);
  rmm_next_vmm_statistics const vmm_before = vmm_statistics();
  EXPECT_EQ(rmm_next_torch_alloc(-1, 0, nullptr), nullptr);
  EXPECT_EQ(rmm_next_torch_alloc(-1, -1, nullptr), nullptr);  // the current device: 0
  EXPECT_EQ(rmm_next_torch_segment_alloc(-1, 0, nullptr), nullptr);
  EXPECT_EQ(rmm_next_torch_alloc(1000, 2, nullptr), nullptr);  // no device 2
  fake::fake().fail_next["cudaMallocFromPoolAsync"] = cudaErrorMemoryAllocation;
  EXPECT_EQ(rmm_next_cupy_malloc(nullptr, 4096, 0), nullptr);
  fake::fake().fail_next["cudaMallocFromPoolAsync"] = cudaErrorMemoryAllocation;
  EXPECT_EQ(rmm_next_allocate(4096, 1, fake::make_stream(1)), nullptr);
  EXPECT_NE(last_error().find("out_of_memory"), std::string::npos) << last_error();
  EXPECT_EQ(rmm_next_vmm_alloc(-1, 0, nullptr), nullptr);
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.failed_allocations, before.failed_allocations + 4);
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(statistics(1).failed_allocations, before_1.failed_allocations + 1);
  EXPECT_EQ(vmm_statistics().failed_allocations, vmm_before.failed_allocations + 1);
  EXPECT_EQ(vmm_statistics().allocations, vmm_before.allocations);
  expect_working();
}

// A free of a host address or of a pointer into a block was counted, and passed to cudaFreeAsync,
// whose error the resource's noexcept deallocate swallowed: allocated_bytes went below zero (as an
// unsigned number, 2^64 - 8192) and every later resource choice was refused ("device 0 still has
// -8192 bytes allocated"), with no message. Such frees are refused, named, and change no count.
TEST_F(BadInput, AFreeOfAPointerTheAllocatorDidNotHandOutIsRefusedAndCountsNothing)
{
  rmm_next_statistics const before = statistics();
  void* const p                    = rmm_next_torch_alloc(4096, 0, nullptr);
  ASSERT_NE(p, nullptr) << last_error();
  int host{};
  for (void* const wrong :
       {static_cast<void*>(&host), static_cast<void*>(static_cast<char*>(p) + 256)}) {
    leave_a_stale_message();
    rmm_next_torch_free(wrong, 4096, 0, nullptr);
    EXPECT_EQ(last_error(), not_handed_out("rmm_next_torch_free"));
  }
  rmm_next_statistics const during = statistics();
  EXPECT_EQ(during.deallocations, before.deallocations);
  EXPECT_EQ(during.allocated_bytes, 4096U);
  rmm_next_torch_free(p, 4096, 0, nullptr);
  leave_a_stale_message();
  rmm_next_torch_free(p, 4096, 0, nullptr);  // a second free of the same block
  EXPECT_EQ(last_error(), not_handed_out("rmm_next_torch_free"));
  rmm_next_statistics const after = statistics();
  EXPECT_EQ(after.deallocations, before.deallocations + 1);
  EXPECT_EQ(after.allocated_bytes, 0U);
  EXPECT_EQ(rmm_next_use_owned_pool(0, nullptr), 0) << last_error();
  EXPECT_EQ(rmm_next_use_current_pool(0), 0) << last_error();
  expect_working();
}

/** @brief One framework's allocation and free functions, for blocks of 4096 bytes on device 0. */
struct entry_pair {
  char const* free_name;
  std::function<void*()> allocate;
  std::function<void(void*)> free;
};

entry_pair const every_pair[] = {
  {"rmm_next_torch_free",
   [] { return rmm_next_torch_alloc(4096, 0, nullptr); },
   [](void* p) { rmm_next_torch_free(p, 4096, 0, nullptr); }},
  {"rmm_next_cupy_free",
   [] { return rmm_next_cupy_malloc(nullptr, 4096, 0); },
   [](void* p) { rmm_next_cupy_free(nullptr, p, 0); }},
  {"rmm_next_numba_free",
   [] { return rmm_next_numba_alloc(4096, 0); },
   [](void* p) { rmm_next_numba_free(p, 4096, 0); }},
  {"rmm_next_deallocate",
   [] { return rmm_next_allocate(4096, 0, nullptr); },
   [](void* p) { rmm_next_deallocate(p, 4096, 0, nullptr); }},
  {"rmm_next_vmm_free",
   [] { return rmm_next_vmm_alloc(4096, 0, nullptr); },
   [](void* p) { rmm_next_vmm_free(p, 4096, 0, nullptr); }},
};

// Each free function refuses what its allocation functions did not hand out: a host address, an
// interior pointer, a block freed already, and a live block of the other kind (a vmm_resource
// block given to a pool free, a pool block given to rmm_next_vmm_free).
TEST_F(BadInput, EveryFreeRefusesWhatItsAllocatorDidNotHandOut)
{
  void* const pool_block = rmm_next_allocate(4096, 0, nullptr);
  void* const vmm_block  = rmm_next_vmm_alloc(4096, 0, nullptr);
  ASSERT_NE(pool_block, nullptr) << last_error();
  ASSERT_NE(vmm_block, nullptr) << last_error();
  for (entry_pair const& e : every_pair) {
    SCOPED_TRACE(e.free_name);
    bool const vmm                           = std::string{e.free_name} == "rmm_next_vmm_free";
    rmm_next_statistics const before         = statistics();
    rmm_next_vmm_statistics const vmm_before = vmm_statistics();
    void* const p                            = e.allocate();
    ASSERT_NE(p, nullptr) << last_error();
    int host{};
    for (void* const wrong : {static_cast<void*>(&host),
                              static_cast<void*>(static_cast<char*>(p) + 256),
                              vmm ? pool_block : vmm_block}) {
      leave_a_stale_message();
      e.free(wrong);
      EXPECT_EQ(last_error(), not_handed_out(e.free_name));
    }
    e.free(p);
    leave_a_stale_message();
    e.free(p);
    EXPECT_EQ(last_error(), not_handed_out(e.free_name));
    rmm_next_statistics const after         = statistics();
    rmm_next_vmm_statistics const vmm_after = vmm_statistics();
    EXPECT_EQ(after.deallocations, before.deallocations + (vmm ? 0 : 1));
    EXPECT_EQ(after.allocated_bytes, 4096U);  // pool_block
    EXPECT_EQ(vmm_after.deallocations, vmm_before.deallocations + (vmm ? 1 : 0));
    EXPECT_EQ(vmm_after.allocated_bytes, 4096U);  // vmm_block
  }
  rmm_next_deallocate(pool_block, 4096, 0, nullptr);
  rmm_next_vmm_free(vmm_block, 4096, 0, nullptr);
  EXPECT_EQ(vmm_statistics().allocated_bytes, 0U);
  expect_working();
}

}  // namespace
