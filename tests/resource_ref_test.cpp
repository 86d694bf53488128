/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The ref aliases route each call to the right member of the resource, with one spelling on
// every CCCL. Runs without a GPU: the resource below records calls and hands out host memory.
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <type_traits>
#include <vector>

namespace {

struct call {
  bool stream_ordered;
  cudaStream_t stream;
  std::size_t bytes;
  std::size_t alignment;
  void* ptr;
  bool is_free;
  bool operator==(call const&) const = default;
};

/// Records every call; host memory, claimed device-accessible and, if `HostAccessible`,
/// host-accessible.
template <bool HostAccessible>
class basic_recording_resource {
 public:
  std::vector<call>* log;

  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    void* p = std::aligned_alloc(alignment, bytes);
    log->push_back({false, nullptr, bytes, alignment, p, false});
    return p;
  }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    log->push_back({false, nullptr, bytes, alignment, p, true});
    std::free(p);
  }
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    void* p = std::aligned_alloc(alignment, bytes);
    log->push_back({true, stream.get(), bytes, alignment, p, false});
    return p;
  }
  void deallocate(cuda::stream_ref stream,
                  void* p,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    log->push_back({true, stream.get(), bytes, alignment, p, true});
    std::free(p);
  }
  // CCCL 3.0 names
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_sync(p, bytes, alignment);
  }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream)
  {
    return allocate(stream, bytes, alignment);
  }
  void deallocate_async(void* p,
                        std::size_t bytes,
                        std::size_t alignment,
                        cuda::stream_ref s) noexcept
  {
    deallocate(s, p, bytes, alignment);
  }

  bool operator==(basic_recording_resource const& other) const noexcept { return log == other.log; }
  friend void get_property(basic_recording_resource const&, cuda::mr::device_accessible) noexcept {}
  friend void get_property(basic_recording_resource const&, cuda::mr::host_accessible) noexcept
    requires HostAccessible
  {
  }
};

using recording_resource   = basic_recording_resource<true>;
using device_only_resource = basic_recording_resource<false>;

static_assert(
  std::is_constructible_v<rmm_next::host_device_async_resource_ref, recording_resource&>);
static_assert(std::is_constructible_v<rmm_next::host_resource_ref, recording_resource&>);

// One spelling on every CCCL: the refs offer none of CCCL 3.0's names, which CCCL 3.1 and later
// do not have (code that compiled against them would break when CCCL is upgraded).
template <class Ref>
concept has_cccl30_sync_names = requires(Ref& r, void* p, std::size_t n) { r.allocate(n, n); } ||
                                requires(Ref& r, void* p, std::size_t n) { r.deallocate(p, n, n); };
template <class Ref>
concept has_cccl30_async_names =
  requires(Ref& r, void* p, std::size_t n, cuda::stream_ref s) { r.allocate_async(n, n, s); } ||
  requires(Ref& r, void* p, std::size_t n, cuda::stream_ref s) { r.allocate_async(n, s); } ||
  requires(Ref& r, void* p, std::size_t n, cuda::stream_ref s) {
    r.deallocate_async(p, n, n, s);
  } ||
  requires(Ref& r, void* p, std::size_t n, cuda::stream_ref s) { r.deallocate_async(p, n, s); };
template <class Ref>
constexpr bool has_cccl30_names = has_cccl30_sync_names<Ref> || has_cccl30_async_names<Ref>;
static_assert(!has_cccl30_names<rmm_next::device_async_resource_ref>);
static_assert(!has_cccl30_names<rmm_next::host_device_async_resource_ref>);
static_assert(!has_cccl30_names<rmm_next::host_async_resource_ref>);
static_assert(!has_cccl30_names<rmm_next::device_resource_ref>);
static_assert(!has_cccl30_names<rmm_next::host_device_resource_ref>);
static_assert(!has_cccl30_names<rmm_next::host_resource_ref>);

cudaStream_t fake_stream(std::uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

template <class Ref>
class StreamOrderedRef : public ::testing::Test {};
using stream_ordered_refs = ::testing::Types<rmm_next::device_async_resource_ref,
                                             rmm_next::host_device_async_resource_ref,
                                             rmm_next::host_async_resource_ref>;
TYPED_TEST_SUITE(StreamOrderedRef, stream_ordered_refs);

TYPED_TEST(StreamOrderedRef, AllocateTakesTheStreamToTheResource)
{
  std::vector<call> log;
  recording_resource r{&log};
  TypeParam ref{r};
  void* p = ref.allocate(fake_stream(0x10), 128, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0U);
  ref.deallocate(fake_stream(0x20), p, 128, 64);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0], (call{true, fake_stream(0x10), 128, 64, p, false}));
  EXPECT_EQ(log[1], (call{true, fake_stream(0x20), 128, 64, p, true}));
}

TYPED_TEST(StreamOrderedRef, AllocateSyncIsSynchronous)
{
  std::vector<call> log;
  recording_resource r{&log};
  TypeParam ref{r};
  void* p = ref.allocate_sync(256, 256);
  ref.deallocate_sync(p, 256, 256);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0], (call{false, nullptr, 256, 256, p, false}));
  EXPECT_EQ(log[1], (call{false, nullptr, 256, 256, p, true}));
}

template <class Ref>
class SynchronousRef : public ::testing::Test {};
using synchronous_refs = ::testing::Types<rmm_next::device_resource_ref,
                                          rmm_next::host_device_resource_ref,
                                          rmm_next::host_resource_ref>;
TYPED_TEST_SUITE(SynchronousRef, synchronous_refs);

TYPED_TEST(SynchronousRef, AllocateSyncIsSynchronous)
{
  std::vector<call> log;
  recording_resource r{&log};
  TypeParam ref{r};
  void* p = ref.allocate_sync(512, 16);
  ref.deallocate_sync(p, 512, 16);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0], (call{false, nullptr, 512, 16, p, false}));
  EXPECT_EQ(log[1], (call{false, nullptr, 512, 16, p, true}));
}

TEST(RefConversion, NarrowingKeepsTheResourceAndEquality)
{
  std::vector<call> log;
  recording_resource r{&log};
  rmm_next::host_device_async_resource_ref wide{r};
  rmm_next::device_async_resource_ref narrow = wide;
  rmm_next::device_async_resource_ref direct{r};
  EXPECT_TRUE(narrow == direct);
  void* p = narrow.allocate(fake_stream(0x30), 64, 8);
  narrow.deallocate(fake_stream(0x30), p, 64, 8);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_TRUE(log[0].stream_ordered);
}

TEST(RefConversion, StreamOrderedRefsBecomeSynchronousRefs)
{
  std::vector<call> log;
  recording_resource r{&log};
  rmm_next::device_async_resource_ref async_ref{r};
  rmm_next::device_resource_ref sync_ref = async_ref;
  void* p                                = sync_ref.allocate_sync(32, 8);
  sync_ref.deallocate_sync(p, 32, 8);
  ASSERT_EQ(log.size(), 2U);
  EXPECT_FALSE(log[0].stream_ordered);
}

TEST(RefEquality, RefsToEqualResourcesCompareEqual)
{
  std::vector<call> log_a;
  std::vector<call> log_b;
  recording_resource a{&log_a};
  recording_resource a_copy{&log_a};
  recording_resource b{&log_b};
  EXPECT_TRUE(rmm_next::device_async_resource_ref{a} ==
              rmm_next::device_async_resource_ref{a_copy});
  EXPECT_FALSE(rmm_next::device_async_resource_ref{a} == rmm_next::device_async_resource_ref{b});
}

TEST(RefBinding, PropertiesDecideWhatBinds)
{
  static_assert(
    std::is_constructible_v<rmm_next::device_async_resource_ref, device_only_resource&>);
  static_assert(!std::is_constructible_v<rmm_next::host_async_resource_ref, device_only_resource&>);
  static_assert(
    !std::is_constructible_v<rmm_next::host_device_resource_ref, device_only_resource&>);
  std::vector<call> log;
  device_only_resource d{&log};
  rmm_next::device_async_resource_ref ref{d};
  ref.deallocate(fake_stream(1), ref.allocate(fake_stream(1), 8, 8), 8, 8);
  EXPECT_EQ(log.size(), 2U);
}

}  // namespace
