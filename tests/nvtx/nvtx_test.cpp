/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU test of rmm-next's NVTX annotations, through the suite's own injection library (NVTX loads
// it from NVTX_INJECTION64_PATH): the "rmm_next" domain, the registered range names, balanced
// ranges (also when the upstream throws, and per thread), the region-naming helper and the names
// the async resources give their allocations, and a translation unit compiled with NVTX off that
// emits nothing. The async resources' own annotations need a device: nvtx_gpu_test.cu.

#include "nvtx_off_tu.hpp"
#include "recorder.hpp"
#include "trace.hpp"

#include "support/fake_resource.hpp"

#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <gtest/gtest.h>

#include <nvtx3/nvToolsExtMem.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace rmm_next_test::nvtx {
namespace {

using rmm_next::host_device_async_resource_ref;
using rmm_next::statistics_adaptor;
using rmm_next::test::fake_resource;
using adaptor = statistics_adaptor<fake_resource>;

static_assert(rmm_next::detail::nvtx_enabled, "the NVTX tests need NVTX compiled in");

cuda::stream_ref no_stream() { return cuda::stream_ref{cudaStream_t{}}; }

/** @brief Throws out_of_memory from every allocation. */
class failing_resource {
 public:
  [[nodiscard]] void* allocate_sync(std::size_t, std::size_t)
  {
    throw rmm_next::out_of_memory{"rmm_next::out_of_memory: failing_resource"};
  }
  void deallocate_sync(void*, std::size_t, std::size_t) noexcept {}
  friend bool operator==(failing_resource const&, failing_resource const&) noexcept { return true; }
  friend constexpr void get_property(failing_resource const&, cuda::mr::host_accessible) noexcept {}
};

class nvtx_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_TRUE(injection_path_set);
    // The first annotated call initializes NVTX, which loads the injection library.
    adaptor warm_up{fake_resource{}};
    warm_up.deallocate_sync(warm_up.allocate_sync(1), 1);
    ASSERT_TRUE(core_attached()) << "NVTX did not load the injection library; "
                                    "NVTX_INJECTION64_PATH="
                                 << (std::getenv("NVTX_INJECTION64_PATH") != nullptr
                                       ? std::getenv("NVTX_INJECTION64_PATH")
                                       : "(unset)");
    clear();
  }
};

TEST_F(nvtx_test, DomainAndRangeNamesAreRegisteredOnce)
{
  adaptor a{fake_resource{}};
  for (int i = 0; i < 100; ++i) {
    a.deallocate(no_stream(), a.allocate(no_stream(), 8), 8);
  }
  std::vector<event> const all = all_events();
  EXPECT_EQ(count(all, call::domain_create, "rmm_next"), 1);
  EXPECT_EQ(count(all, call::domain_create), 1) << "no domain but rmm_next";
  for (char const* name : {"statistics_adaptor::allocate",
                           "statistics_adaptor::deallocate",
                           "statistics_adaptor::allocate_sync"}) {
    EXPECT_EQ(count(all, call::register_string, name), 1) << name;
  }
  for (event const& e : all) {
    if (e.kind == call::register_string) { EXPECT_EQ(e.domain, "rmm_next") << e.text; }
  }
}

TEST_F(nvtx_test, AdaptorCallsAreNamedRanges)
{
  adaptor a{fake_resource{}};
  void* p = a.allocate_sync(100);
  a.deallocate_sync(p, 100);
  void* q = a.allocate(no_stream(), 10);
  a.deallocate(no_stream(), q, 10);
  host_device_async_resource_ref ref{a};  // through a ref: the same
  ref.deallocate(no_stream(), ref.allocate(no_stream(), 4, 4), 4, 4);

  std::vector<std::string> const expected{
    "push statistics_adaptor::allocate",
    "pop",
    "push statistics_adaptor::deallocate",
    "pop",
    "push statistics_adaptor::allocate",
    "pop",
    "push statistics_adaptor::deallocate",
    "pop",
    "push statistics_adaptor::allocate",
    "pop",
    "push statistics_adaptor::deallocate",
    "pop",
  };
  // Adaptors annotate ranges only: the memory is the upstream's to describe.
  EXPECT_EQ(trace(events()), expected);
}

TEST_F(nvtx_test, NestedAdaptorsNestRanges)
{
  adaptor inner{fake_resource{}};
  statistics_adaptor<host_device_async_resource_ref> outer{host_device_async_resource_ref{inner}};
  void* p = outer.allocate(no_stream(), 64);
  outer.deallocate(no_stream(), p, 64);
  std::vector<std::string> const expected{
    "push statistics_adaptor::allocate",
    "push statistics_adaptor::allocate",
    "pop",
    "pop",
    "push statistics_adaptor::deallocate",
    "push statistics_adaptor::deallocate",
    "pop",
    "pop",
  };
  EXPECT_EQ(trace(events()), expected);
}

TEST_F(nvtx_test, RangeIsPoppedWhenTheUpstreamThrows)
{
  statistics_adaptor<failing_resource> a{failing_resource{}};
  EXPECT_THROW((void)a.allocate_sync(16), rmm_next::out_of_memory);
  std::vector<std::string> const expected{"push statistics_adaptor::allocate", "pop"};
  EXPECT_EQ(trace(events()), expected);
  EXPECT_EQ(a.statistics().allocations.total, 0);
}

TEST_F(nvtx_test, RegionHelperNamesTheMemory)
{
  std::array<std::byte, 4096> buffer{};
  rmm_next::detail::nvtx_name_region(buffer.data(), "async_device_resource dev 0");
  rmm_next::detail::nvtx_name_region(nullptr, "nothing");  // nothing
  EXPECT_TRUE(memory_attached()) << "NVTX did not attach the memory extension";

  std::vector<event> const recorded = events();
  std::vector<std::string> const expected{"name buffer async_device_resource dev 0"};
  EXPECT_EQ(trace(recorded, {{buffer.data(), "buffer"}}), expected);
  ASSERT_EQ(recorded.size(), 1U);
  // By pointer, in ASCII: what compute-sanitizer accepts. Nothing is registered: pool
  // allocations are allocations to the tools already.
  EXPECT_EQ(recorded[0].type, std::uint32_t{NVTX_MEM_REGION_REF_TYPE_POINTER});
  EXPECT_EQ(recorded[0].name_type, std::uint32_t{NVTX_MESSAGE_TYPE_ASCII});
}

TEST(nvtx_names, AllocationNamesAreShortPrintableAscii)
{
  // compute-sanitizer takes names matching ^[[:print:]]{1,49}$.
  using rmm_next::detail::memory_kind;
  auto* const pool = reinterpret_cast<cudaMemPool_t>(std::uintptr_t{0x7fffffffeff0});
  for (memory_kind kind : {memory_kind::device, memory_kind::managed, memory_kind::pinned}) {
    for (int device : {0, 7, 15, 1023}) {
      std::string const name = rmm_next::detail::allocation_name({kind, device}, pool).data();
      EXPECT_GE(name.size(), 1U);
      EXPECT_LE(name.size(), 49U) << name;
      for (char c : name) {
        EXPECT_TRUE(c >= 0x20 && c < 0x7f) << name;
      }
      EXPECT_EQ(name.rfind(rmm_next::detail::resource_name(kind), 0), 0U) << name;
      EXPECT_NE(name.find("dev " + std::to_string(device)), std::string::npos) << name;
    }
  }
  EXPECT_EQ(std::string{rmm_next::detail::allocation_name({memory_kind::device, 3}, pool).data()},
            "async_device_resource dev 3 pool 0x7fffffffeff0");
}

TEST_F(nvtx_test, RangesBalancePerThread)
{
  constexpr int threads = 8;
  constexpr int pairs   = 200;
  adaptor a{fake_resource{}};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([a, t]() mutable {
      for (int i = 0; i < pairs; ++i) {
        void* p = a.allocate(no_stream(), static_cast<std::size_t>(t + 1));
        a.deallocate(no_stream(), p, static_cast<std::size_t>(t + 1));
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  std::vector<event> const recorded = events();
  EXPECT_EQ(count(recorded, call::range_push, "statistics_adaptor::allocate"), threads * pairs);
  EXPECT_EQ(count(recorded, call::range_push, "statistics_adaptor::deallocate"), threads * pairs);
  EXPECT_EQ(count(recorded, call::range_pop), 2 * threads * pairs);
  expect_balanced(recorded);
  EXPECT_EQ(a.statistics().allocations.total, threads * pairs);
}

TEST_F(nvtx_test, TranslationUnitWithNvtxOffEmitsNothing)
{
  fake_resource const upstream;
  EXPECT_EQ(allocate_with_nvtx_off(upstream, 10), 10 * (64 + 32));
  EXPECT_EQ(trace(events()), std::vector<std::string>{});
  EXPECT_EQ(upstream.allocations(), 20);

  // This translation unit's adaptor of the same type still annotates.
  adaptor a{upstream};
  a.deallocate_sync(a.allocate_sync(8), 8);
  std::vector<std::string> const expected{
    "push statistics_adaptor::allocate", "pop", "push statistics_adaptor::deallocate", "pop"};
  EXPECT_EQ(trace(events()), expected);
}

}  // namespace
}  // namespace rmm_next_test::nvtx
