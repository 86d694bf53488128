/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of aligned_adaptor over resources that need no GPU: the alignment of the pointers for
// many alignments and sizes, below and above the threshold and for requests that ask for more
// than 256 bytes; the exact sizes the upstream is asked for; frees that reach the upstream with
// its own pointer and size; errors (construction, bad alignments, overflow, a throwing upstream)
// that leave the adaptor working; copies; refs; and many threads at once.

#include "support/fake_resource.hpp"
#include "support/recording_resource.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

using adaptor = aligned_adaptor<recording_resource>;

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

cuda::stream_ref no_stream() { return cuda::stream_ref{cudaStream_t{}}; }

bool aligned_to(void const* p, std::size_t alignment)
{
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<async_device_resource>,
                                                             cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<aligned_adaptor<async_device_resource>,
                                                          cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<async_pinned_resource>,
                                                             cuda::mr::device_accessible,
                                                             cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<device_async_resource_ref>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<aligned_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<aligned_adaptor<device_resource_ref>>);
static_assert(cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(
  !cuda::has_property<aligned_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<host_resource_ref, adaptor&>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, aligned_adaptor<async_device_resource>&>);
static_assert(!std::is_constructible_v<host_device_async_resource_ref,
                                       aligned_adaptor<async_device_resource>&>);
static_assert(std::is_constructible_v<device_resource_ref, aligned_adaptor<device_resource_ref>&>);
static_assert(
  !std::is_constructible_v<device_async_resource_ref, aligned_adaptor<device_resource_ref>&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);
static_assert(std::is_nothrow_move_constructible_v<adaptor>);
static_assert(!std::is_constructible_v<adaptor, recording_resource>);  // the alignment is needed
static_assert(adaptor::default_threshold == 64 * KiB);

// ---- Construction -------------------------------------------------------------------------------

TEST(aligned_adaptor, RejectsAnAlignmentThatIsNotAPowerOfTwo)
{
  for (std::size_t const bad : {std::size_t{0}, std::size_t{3}, std::size_t{4097}, 3 * MiB}) {
    try {
      adaptor const a{recording_resource{}, bad};
      ADD_FAILURE() << "alignment " << bad << " accepted";
    } catch (std::invalid_argument const& e) {
      EXPECT_EQ(std::string{e.what()},
                "rmm_next::aligned_adaptor: alignment " + std::to_string(bad) +
                  " is not a power of two; pass 4096, 65536, 2097152, ...");
    }
  }
  for (std::size_t const good : {std::size_t{1}, std::size_t{256}, 4 * KiB, 2 * MiB, 1024 * MiB}) {
    adaptor const a{recording_resource{}, good, 0};
    EXPECT_EQ(a.alignment(), good);
    EXPECT_EQ(a.threshold(), 0U);
  }
  adaptor const deduced_threshold{recording_resource{}, 4 * KiB};
  EXPECT_EQ(deduced_threshold.threshold(), 64 * KiB);
  aligned_adaptor deduced{fake_resource{}, 4 * KiB, 1};  // deduces the upstream type
  static_assert(std::is_same_v<decltype(deduced), aligned_adaptor<fake_resource>>);
}

// ---- Alignment and the sizes asked of the upstream ----------------------------------------------

/** Allocates `bytes` with `request` through `a` and checks everything the class promises. */
void check_allocation(adaptor& a,
                      recording_resource const& upstream,
                      std::size_t bytes,
                      std::size_t request,
                      std::size_t expected_alignment,
                      bool sync)
{
  SCOPED_TRACE("bytes " + std::to_string(bytes) + ", request alignment " + std::to_string(request) +
               ", adaptor alignment " + std::to_string(a.alignment()) + ", threshold " +
               std::to_string(a.threshold()) + (sync ? ", sync" : ", stream"));
  bool const padded          = expected_alignment > default_alignment;
  std::size_t const expected = padded ? bytes + expected_alignment - 256 : bytes;
  EXPECT_EQ(a.upstream_bytes(bytes, request), expected);

  std::size_t const frees_before = upstream.frees();
  void* p = sync ? a.allocate_sync(bytes, request) : a.allocate(no_stream(), bytes, request);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned_to(p, expected_alignment)) << p;
  recorded_request const asked = upstream.last_request();
  EXPECT_EQ(asked.bytes, expected);
  EXPECT_EQ(asked.alignment, padded ? default_alignment : expected_alignment);

  // The whole block lies inside what the upstream gave.
  void* const original = upstream.block_of(p);
  ASSERT_NE(original, nullptr);
  EXPECT_EQ(upstream.block_of(static_cast<char*>(p) + bytes - 1), original);
  EXPECT_LE(static_cast<char*>(p) + bytes,
            static_cast<char*>(original) + upstream.block_bytes(original));
  std::memset(p, 0xab, bytes);

  if (sync) {
    a.deallocate_sync(p, bytes, request);
  } else {
    a.deallocate(no_stream(), p, bytes, request);
  }
  EXPECT_EQ(upstream.frees(), frees_before + 1);  // with the upstream's pointer and size
  EXPECT_EQ(upstream.bad_frees(), 0U);
  EXPECT_EQ(upstream.block_of(p), nullptr);
}

TEST(aligned_adaptor, ManyAlignmentsAndSizesAroundTheThreshold)
{
  // Offset 256: the upstream's pointers are as far from every alignment as they can be, so the
  // padding is used in full. Offset 0: they are already aligned.
  for (std::size_t const offset : {std::size_t{256}, std::size_t{0}}) {
    recording_resource upstream{offset};
    for (std::size_t const alignment : {512UL, 4 * KiB, 64 * KiB, 2 * MiB, 4 * MiB}) {
      adaptor a{upstream, alignment};
      std::size_t const t = a.threshold();
      for (std::size_t const bytes :
           {1UL, 255UL, 256UL, 257UL, 4095UL, t - 1, t, t + 1, MiB + 3, 3 * MiB}) {
        std::size_t const expected = bytes >= t ? alignment : default_alignment;
        check_allocation(a, upstream, bytes, default_alignment, expected, false);
        check_allocation(a, upstream, bytes, default_alignment, expected, true);
      }
    }
    EXPECT_EQ(upstream.live_blocks(), 0U);
  }
}

TEST(aligned_adaptor, RequestsAboveTwoHundredFiftySixBytesAreHonouredWhateverTheirSize)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, MiB};
  // Below the threshold: the request's own alignment, padded when above 256.
  check_allocation(a, upstream, 100, 4 * KiB, 4 * KiB, false);
  check_allocation(a, upstream, 100, 512, 512, true);
  check_allocation(a, upstream, 100, 1024 * KiB, 1024 * KiB, false);
  // At most 256: passed on as asked.
  check_allocation(a, upstream, 100, 128, 128, false);
  check_allocation(a, upstream, 100, 256, 256, true);
  check_allocation(a, upstream, 100, 1, 1, false);
  // Above the threshold: the larger of the two.
  check_allocation(a, upstream, 2 * MiB, 64, 4 * KiB, false);
  check_allocation(a, upstream, 2 * MiB, 64 * KiB, 64 * KiB, true);
  EXPECT_EQ(upstream.live_blocks(), 0U);
}

TEST(aligned_adaptor, ThresholdZeroAlignsEveryAllocation)
{
  recording_resource upstream;
  adaptor a{upstream, 64 * KiB, 0};
  check_allocation(a, upstream, 1, default_alignment, 64 * KiB, false);
  check_allocation(a, upstream, 1, default_alignment, 64 * KiB, true);
  check_allocation(a, upstream, 300 * KiB, 8, 64 * KiB, false);
}

TEST(aligned_adaptor, AnAlignmentUpToTwoHundredFiftySixChangesNothing)
{
  recording_resource upstream;
  adaptor a{upstream, 128, 0};
  void* p = a.allocate(no_stream(), 5 * MiB);
  EXPECT_EQ(upstream.last_request(), (recorded_request{5 * MiB, 256}));
  a.deallocate(no_stream(), p, 5 * MiB);
  void* q = a.allocate_sync(1000, 64);
  EXPECT_EQ(upstream.last_request(), (recorded_request{1000, 128}));
  a.deallocate_sync(q, 1000, 64);
  EXPECT_EQ(upstream.frees(), 2U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(aligned_adaptor, ZeroBytesIsNullptrWithoutTheUpstream)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, 0};
  EXPECT_EQ(a.allocate(no_stream(), 0), nullptr);
  EXPECT_EQ(a.allocate_sync(0, 8 * KiB), nullptr);
  EXPECT_EQ(a.upstream_bytes(0, 8 * KiB), 0U);
  a.deallocate(no_stream(), nullptr, 0);
  a.deallocate_sync(nullptr, 64 * KiB, 8 * KiB);
  EXPECT_TRUE(upstream.requests().empty());
  EXPECT_EQ(upstream.frees() + upstream.bad_frees(), 0U);
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(aligned_adaptor, ABadRequestAlignmentThrowsBadAllocAndAsksNothing)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
  for (std::size_t const bad : {std::size_t{0}, std::size_t{3}, std::size_t{4097}}) {
    try {
      [[maybe_unused]] void* p = a.allocate(no_stream(), 100 * KiB, bad);
      ADD_FAILURE() << "alignment " << bad << " accepted";
    } catch (bad_alloc const& e) {
      EXPECT_EQ(std::string{e.what()},
                "rmm_next::aligned_adaptor: alignment " + std::to_string(bad) +
                  " is not a power of two; pass 1, 2, 4, ... (256 by default)");
    }
    EXPECT_THROW((void)a.allocate_sync(10, bad), bad_alloc);
  }
  EXPECT_TRUE(upstream.requests().empty());
  check_allocation(a, upstream, 100 * KiB, 256, 4 * KiB, false);  // still works
}

TEST(aligned_adaptor, APaddedSizeThatOverflowsThrowsOutOfMemory)
{
  recording_resource upstream;
  adaptor a{upstream, 2 * MiB, 0};
  std::size_t const huge = std::numeric_limits<std::size_t>::max() - 1000;
  try {
    [[maybe_unused]] void* p = a.allocate(no_stream(), huge);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(std::string{e.what()},
              "rmm_next::aligned_adaptor: out_of_memory: " + std::to_string(huge) +
                " bytes aligned to 2097152 need 2096896 bytes of padding, more than a "
                "std::size_t can count; allocate fewer bytes");
  }
  EXPECT_THROW((void)a.allocate_sync(huge, 4 * KiB), out_of_memory);  // the request's alignment
  EXPECT_THROW((void)a.upstream_bytes(huge), out_of_memory);
  EXPECT_TRUE(upstream.requests().empty());
  // The largest size that fits is computed exactly (the upstream may refuse it, this one would).
  std::size_t const largest = std::numeric_limits<std::size_t>::max() - (2 * MiB - 256);
  EXPECT_EQ(a.upstream_bytes(largest), std::numeric_limits<std::size_t>::max());
  check_allocation(a, upstream, 1000, 256, 2 * MiB, true);  // still works
}

TEST(aligned_adaptor, AnUpstreamThatThrowsLeavesItWorking)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, 0};
  upstream.throw_on_allocate(true);
  EXPECT_THROW((void)a.allocate(no_stream(), 10), out_of_memory);
  EXPECT_THROW((void)a.allocate_sync(10, 64), out_of_memory);
  EXPECT_EQ(upstream.requests().size(), 2U);
  upstream.throw_on_allocate(false);
  check_allocation(a, upstream, 10, 256, 4 * KiB, false);
  EXPECT_EQ(upstream.live_blocks(), 0U);
}

// ---- Copies, refs, spellings --------------------------------------------------------------------

TEST(aligned_adaptor, CopiesShareTheRecordSeparateAdaptorsDoNot)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, 0};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  adaptor other{upstream, 4 * KiB, 0};
  EXPECT_TRUE(a == copy);
  EXPECT_FALSE(a == other);
  EXPECT_TRUE(a.upstream_resource() == upstream);

  void* p = a.allocate(no_stream(), 1000);
  copy.deallocate(no_stream(), p, 1000);  // freed through a copy: the upstream's own pointer
  EXPECT_EQ(upstream.frees(), 1U);
  other = a;
  EXPECT_TRUE(other == a);
  void* q = other.allocate_sync(1000);
  a.deallocate_sync(q, 1000);
  EXPECT_EQ(upstream.frees(), 2U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(aligned_adaptor, ThroughRefsAndOverARef)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
  device_async_resource_ref ref{a};
  void* p = ref.allocate(no_stream(), 100, 4096);  // GPUDirect Storage's 4 KiB through a ref
  EXPECT_TRUE(aligned_to(p, 4096));
  EXPECT_EQ(upstream.last_request(), (recorded_request{100 + 4096 - 256, 256}));
  ref.deallocate(no_stream(), p, 100, 4096);
  host_resource_ref sync_ref{a};
  void* q = sync_ref.allocate_sync(128 * KiB, 8);
  EXPECT_TRUE(aligned_to(q, 4 * KiB));
  sync_ref.deallocate_sync(q, 128 * KiB, 8);

  aligned_adaptor<device_async_resource_ref> over_ref{device_async_resource_ref{upstream},
                                                      64 * KiB};
  void* r = over_ref.allocate(no_stream(), MiB);
  EXPECT_TRUE(aligned_to(r, 64 * KiB));
  over_ref.deallocate(no_stream(), r, MiB);
  aligned_adaptor<device_resource_ref> over_sync_ref{device_resource_ref{upstream}, 8 * KiB, 0};
  void* s = over_sync_ref.allocate_sync(10);
  EXPECT_TRUE(aligned_to(s, 8 * KiB));
  over_sync_ref.deallocate_sync(s, 10);
  EXPECT_EQ(upstream.frees(), 4U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(aligned_adaptor, EveryMemberSpelling)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, 0};
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  void* p = a.allocate(std::size_t{10}, 8);         // CCCL 3.0 synchronous
  void* q = a.allocate_async(20, 16, no_stream());  // CCCL 3.0 stream-ordered
  EXPECT_TRUE(aligned_to(p, 4 * KiB));
  EXPECT_TRUE(aligned_to(q, 4 * KiB));
  a.deallocate(p, 10, 8);
  a.deallocate_async(q, 20, 16, no_stream());
  EXPECT_EQ(upstream.frees(), 2U);
#endif
  void* r = a.allocate(no_stream(), 30);
  a.deallocate(no_stream(), r, 30);
  EXPECT_EQ(upstream.bad_frees(), 0U);
  EXPECT_EQ(upstream.live_blocks(), 0U);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(aligned_adaptor, SixteenThreadsGetAlignedBlocksAndFreeThemExactly)
{
  constexpr int threads = 16;
  constexpr int rounds  = 400;
  constexpr int held    = 6;
  unsigned const seed   = std::random_device{}();
  std::printf("seed %u\n", seed);
  SCOPED_TRACE("seed " + std::to_string(seed));

  recording_resource upstream;
  adaptor a{upstream, 4 * KiB, 16 * KiB};
  std::vector<std::thread> pool;
  std::vector<int> misaligned(threads, 0);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      adaptor mine = a;  // copies share the record
      std::mt19937 rng{seed + static_cast<unsigned>(t)};
      std::uniform_int_distribution<std::size_t> size{1, 64 * KiB};
      std::uniform_int_distribution<int> shift{0, 16};  // request alignments 1 ... 64 KiB
      struct block {
        void* ptr;
        std::size_t bytes;
        std::size_t alignment;
      };
      std::vector<block> live;
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes     = size(rng);
        std::size_t const alignment = std::size_t{1} << shift(rng);
        void* p                     = (i % 2 == 0) ? mine.allocate(no_stream(), bytes, alignment)
                                                   : mine.allocate_sync(bytes, alignment);
        std::size_t const expected =
          std::max(alignment, bytes >= 16 * KiB ? 4 * KiB : std::size_t{1});
        if (!aligned_to(p, expected)) { ++misaligned[t]; }
        static_cast<char*>(p)[0]         = 1;
        static_cast<char*>(p)[bytes - 1] = 2;
        live.push_back({p, bytes, alignment});
        if (live.size() > held) {
          block const b = live.front();
          live.erase(live.begin());
          mine.deallocate(no_stream(), b.ptr, b.bytes, b.alignment);
        }
      }
      for (block const& b : live) {
        mine.deallocate_sync(b.ptr, b.bytes, b.alignment);
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(misaligned[t], 0) << "thread " << t;
  }
  EXPECT_EQ(upstream.requests().size(), std::size_t{threads * rounds});
  EXPECT_EQ(upstream.frees(), std::size_t{threads * rounds});
  EXPECT_EQ(upstream.bad_frees(), 0U);
  EXPECT_EQ(upstream.live_blocks(), 0U);
}

}  // namespace
}  // namespace rmm_next::test
