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
  EXPECT_EQ(after.failed_allocations, before.failed_allocations);
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
  EXPECT_EQ(after.failed_allocations, before.failed_allocations);
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

}  // namespace
