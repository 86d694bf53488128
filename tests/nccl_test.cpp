/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// nccl_registered over the fake runtime and driver, with a fake NCCL defined here (the program
// exports its symbols, so nccl.hpp's run-time lookup finds these before any libnccl): each
// segment registered once, before the options' own hook, and deregistered before it is unmapped;
// window registration; failures.

#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/nccl.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fc = rmm_next::test::fake_cuda;

/** @brief What the fake NCCL saw, in order: "register <base>", "deregister <base>", ... */
struct nccl_log {
  std::vector<std::string> calls;
  std::vector<std::size_t> sizes;
  int window_flags{-1};
  ncclResult_t fail_register{ncclSuccess};
};

nccl_log& log() noexcept
{
  static nccl_log l;
  return l;
}

std::string hex(void const* p) { return std::to_string(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace

extern "C" {

ncclResult_t ncclCommRegister(ncclComm_t const, void* buff, size_t size, void** handle)
{
  if (log().fail_register != ncclSuccess) { return log().fail_register; }
  log().calls.push_back("register " + hex(buff));
  log().sizes.push_back(size);
  *handle = static_cast<char*>(buff) + 1;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(ncclComm_t const, void* handle)
{
  log().calls.push_back("deregister " + hex(static_cast<char*>(handle) - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(
  ncclComm_t, void* buff, size_t size, ncclWindow_t* win, int flags)
{
  log().calls.push_back("window " + hex(buff));
  log().sizes.push_back(size);
  log().window_flags = flags;
  *win               = reinterpret_cast<ncclWindow_t>(static_cast<char*>(buff) + 2);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t win)
{
  log().calls.push_back("window-deregister " + hex(reinterpret_cast<char*>(win) - 2));
  return ncclSuccess;
}

char const* ncclGetErrorString(ncclResult_t result)
{
  return result == ncclInternalError ? "internal error" : "some error";
}

}  // extern "C"

namespace {

using rmm_next::nccl_registered;
using rmm_next::nccl_registration;
using rmm_next::vmm_options;
using rmm_next::vmm_resource;

constexpr std::size_t MiB = std::size_t{1} << 20;

ncclComm_t const comm = reinterpret_cast<ncclComm_t>(std::uintptr_t{0x1234});

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override
  {
    fc::reset(1);
    log()   = nccl_log{};
    stream_ = fc::make_stream(0);
  }
  cudaStream_t stream_{};
};

TEST_F(Nccl, EachSegmentIsRegisteredOnceBeforeTheUsersHookAndDeregisteredBeforeTheUnmap)
{
  std::vector<std::string> order;
  std::vector<void*> bases;
  {
    vmm_options options{.segment_size = 4 * MiB};
    options.on_segment_map = [&](void* base, std::size_t) {
      order.push_back("user map, registered: " + std::to_string(log().calls.size()));
      bases.push_back(base);
    };
    options.on_segment_unmap = [&](void*, std::size_t) {
      order.push_back("user unmap, unmapped: " + std::to_string(fc::fake().vmm.unmaps));
    };
    vmm_resource mr{nccl_registered(comm, options)};
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) {
      blocks.push_back(mr.allocate(stream_, MiB));  // 4 per segment: two segments
    }
    for (void* p : blocks) {
      mr.deallocate(stream_, p, MiB);
    }
    ASSERT_EQ(mr.segments().size(), 2U);
    EXPECT_EQ(log().calls,
              (std::vector<std::string>{"register " + hex(bases[0]), "register " + hex(bases[1])}));
    EXPECT_EQ(log().sizes, (std::vector<std::size_t>{4 * MiB, 4 * MiB}));
  }
  EXPECT_EQ(log().calls,
            (std::vector<std::string>{"register " + hex(bases[0]),
                                      "register " + hex(bases[1]),
                                      "deregister " + hex(bases[0]),
                                      "deregister " + hex(bases[1])}));
  EXPECT_EQ(order,
            (std::vector<std::string>{"user map, registered: 1",
                                      "user map, registered: 2",
                                      "user unmap, unmapped: 0",
                                      "user unmap, unmapped: 1"}));
}

TEST_F(Nccl, WindowsAreSymmetric)
{
  void* base{};
  {
    vmm_resource mr{nccl_registered(comm, {}, nccl_registration::buffer_and_window)};
    void* p = mr.allocate(stream_, 1);
    base    = mr.segments().front().base;
    mr.deallocate(stream_, p, 1);
  }
  EXPECT_EQ(log().calls,
            (std::vector<std::string>{"register " + hex(base),
                                      "window " + hex(base),
                                      "window-deregister " + hex(base),
                                      "deregister " + hex(base)}));
  EXPECT_EQ(log().window_flags, NCCL_WIN_COLL_SYMMETRIC);
}

TEST_F(Nccl, ARefusedRegistrationFailsTheAllocationAndLeavesNoSegment)
{
  vmm_resource mr{nccl_registered(comm)};
  log().fail_register = ncclInternalError;
  try {
    (void)mr.allocate(stream_, 1);
    ADD_FAILURE() << "expected an exception";
  } catch (rmm_next::cuda_error const& e) {
    EXPECT_NE(std::string{e.what()}.find(
                "rmm_next::nccl_registered: ncclCommRegister returned 3 (internal error)"),
              std::string::npos)
      << e.what();
  }
  EXPECT_TRUE(mr.segments().empty());
  EXPECT_TRUE(fc::fake().vmm.reserved.empty());
  log().fail_register = ncclSuccess;
  void* p             = mr.allocate(stream_, 1);
  EXPECT_EQ(log().calls.size(), 1U);
  mr.deallocate(stream_, p, 1);
}

TEST_F(Nccl, AThrowingUserHookDeregistersTheSegment)
{
  vmm_options options;
  options.on_segment_map = [](void*, std::size_t) { throw std::runtime_error{"no"}; };
  vmm_resource mr{nccl_registered(comm, options)};
  EXPECT_THROW((void)mr.allocate(stream_, 1), std::runtime_error);
  ASSERT_EQ(log().calls.size(), 2U);
  EXPECT_EQ(log().calls[0].substr(0, 9), "register ");
  EXPECT_EQ(log().calls[1], "de" + log().calls[0]);
  EXPECT_TRUE(mr.segments().empty());
}

}  // namespace
