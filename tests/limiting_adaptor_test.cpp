/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of limiting_adaptor over resources that need no GPU: what it counts (each allocation
// rounded to a multiple of the larger of its alignment and 256, or of the granularity given to the
// constructor as RMM's alignment argument, and its check), limits at the boundary, the text
// of its out_of_memory, a limit changed while allocations are live, an upstream that throws,
// copies, refs, threads racing to the limit that never pass it, and stacks with aligned_adaptor
// and thread_cache_adaptor.

#include "support/fake_resource.hpp"
#include "support/recording_resource.hpp"
#include "support/without_a_driver.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rmm_next::test {
namespace {

using adaptor = limiting_adaptor<recording_resource>;

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

cuda::stream_ref no_stream() { return cuda::stream_ref{cudaStream_t{}}; }

/** The message of the out_of_memory `allocate` throws, or "" if it throws none. */
template <class Allocate>
std::string refusal(Allocate&& allocate)
{
  try {
    allocate();
  } catch (out_of_memory const& e) {
    return e.what();
  }
  return {};
}

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(
  rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<async_device_resource>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<limiting_adaptor<async_device_resource>,
                                                          cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<async_pinned_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<device_async_resource_ref>,
                                                 cuda::mr::device_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<limiting_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<limiting_adaptor<device_resource_ref>>);
static_assert(rmm_next::detail::stream_ordered_resource_with<
              limiting_adaptor<thread_cache_adaptor<async_device_resource>>,
              cuda::mr::device_accessible>);
static_assert(cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(
  !cuda::has_property<limiting_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<host_resource_ref, adaptor&>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, limiting_adaptor<async_device_resource>&>);
static_assert(!std::is_constructible_v<host_device_async_resource_ref,
                                       limiting_adaptor<async_device_resource>&>);
static_assert(std::is_constructible_v<device_resource_ref, limiting_adaptor<device_resource_ref>&>);
static_assert(
  !std::is_constructible_v<device_async_resource_ref, limiting_adaptor<device_resource_ref>&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);
static_assert(std::is_nothrow_move_constructible_v<adaptor>);
static_assert(!std::is_constructible_v<adaptor, recording_resource>);  // the limit is needed

// ---- Counting -----------------------------------------------------------------------------------

TEST(limiting_adaptor, CountsEachAllocationRoundedToItsGranularity)
{
  recording_resource upstream;
  adaptor a{upstream, MiB};
  EXPECT_EQ(a.limit(), MiB);
  EXPECT_EQ(a.bytes_in_use(), 0U);

  void* p = a.allocate(no_stream(), 1000);  // 1024: a multiple of 256
  EXPECT_EQ(a.bytes_in_use(), 1024U);
  void* q = a.allocate_sync(256, 8);  // exactly 256
  EXPECT_EQ(a.bytes_in_use(), 1280U);
  void* r = a.allocate(no_stream(), 1, 4096);  // a multiple of the larger alignment
  EXPECT_EQ(a.bytes_in_use(), 1280U + 4096U);
  void* z = a.allocate(no_stream(), 0);  // nothing
  EXPECT_EQ(z, nullptr);
  EXPECT_EQ(a.bytes_in_use(), 1280U + 4096U);
  // The upstream gets the request as it was made.
  std::vector<recorded_request> const asked = upstream.requests();
  ASSERT_EQ(asked.size(), 4U);
  EXPECT_EQ(asked[0], (recorded_request{1000, 256}));
  EXPECT_EQ(asked[1], (recorded_request{256, 8}));
  EXPECT_EQ(asked[2], (recorded_request{1, 4096}));

  a.deallocate(no_stream(), r, 1, 4096);
  EXPECT_EQ(a.bytes_in_use(), 1280U);
  a.deallocate_sync(q, 256, 8);
  a.deallocate(no_stream(), p, 1000);
  a.deallocate(no_stream(), nullptr, 1000);
  EXPECT_EQ(a.bytes_in_use(), 0U);
  EXPECT_EQ(upstream.frees(), 3U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(limiting_adaptor, CountsInTheGranularityItIsGivenAsRmmDoes)
{
  // RMM's limiting_resource_adaptor(upstream, limit, alignment): sizes rounded to `alignment`.
  recording_resource upstream;
  adaptor exact{upstream, 8 * KiB, 1};  // the sizes asked for
  EXPECT_EQ(exact.alignment(), 1U);
  void* p = exact.allocate(no_stream(), 1000);
  EXPECT_EQ(exact.bytes_in_use(), 1000U);
  void* q = exact.allocate_sync(24, 8);
  EXPECT_EQ(exact.bytes_in_use(), 1024U);
  void* r = exact.allocate(no_stream(), 1, 4096);  // an alignment above 256 still counts
  EXPECT_EQ(exact.bytes_in_use(), 1024U + 4096U);
  exact.deallocate(no_stream(), r, 1, 4096);
  void* s = exact.allocate(no_stream(), 7168);  // 1024 + 7168: exactly the limit
  EXPECT_EQ(exact.bytes_in_use(), 8 * KiB);
  EXPECT_EQ(refusal([&] { (void)exact.allocate(no_stream(), 1); }),
            "rmm_next::limiting_adaptor: out_of_memory: allocating 1 bytes would pass the limit "
            "of 8192 bytes, with 8192 bytes in use; free memory or raise the limit (set_limit)");
  exact.deallocate(no_stream(), s, 7168);
  exact.deallocate_sync(q, 24, 8);
  exact.deallocate(no_stream(), p, 1000);
  EXPECT_EQ(exact.bytes_in_use(), 0U);

  adaptor pages{upstream, MiB, 64 * KiB};  // coarser than the resources: 64 KiB pages
  EXPECT_EQ(pages.alignment(), 64 * KiB);
  void* t = pages.allocate(no_stream(), 1000);
  EXPECT_EQ(pages.bytes_in_use(), 64 * KiB);
  void* u = pages.allocate(no_stream(), 1, 128 * KiB);  // the larger of the two
  EXPECT_EQ(pages.bytes_in_use(), 64 * KiB + 128 * KiB);
  adaptor copy = pages;  // copies count alike
  EXPECT_EQ(copy.alignment(), 64 * KiB);
  copy.deallocate(no_stream(), u, 1, 128 * KiB);
  copy.deallocate(no_stream(), t, 1000);
  EXPECT_EQ(pages.bytes_in_use(), 0U);
  // The upstream gets every request as it was made.
  EXPECT_EQ(upstream.requests().back(), (recorded_request{1, 128 * KiB}));
  EXPECT_EQ(upstream.live_blocks(), 0U);

  limiting_adaptor deduced{upstream, MiB, 512};
  static_assert(std::is_same_v<decltype(deduced), adaptor>);
  EXPECT_EQ(deduced.alignment(), 512U);
  EXPECT_EQ(adaptor(upstream, MiB).alignment(), default_alignment);
}

TEST(limiting_adaptor, AGranularityThatIsNotAPowerOfTwoIsRefused)
{
  recording_resource upstream;
  for (std::size_t const bad : {std::size_t{0}, std::size_t{3}, std::size_t{1000}}) {
    try {
      adaptor const a{upstream, MiB, bad};
      ADD_FAILURE() << "alignment " << bad << " accepted";
    } catch (std::invalid_argument const& e) {
      EXPECT_EQ(std::string{e.what()},
                "rmm_next::limiting_adaptor: alignment " + std::to_string(bad) +
                  " is not a power of two; pass 256 (the default), 1, 4096, ...");
    }
  }
  EXPECT_TRUE(upstream.requests().empty());
}

TEST(limiting_adaptor, RefusesPastTheLimitAndAcceptsUpToIt)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
  void* whole = a.allocate(no_stream(), 4 * KiB);  // exactly the limit
  EXPECT_EQ(a.bytes_in_use(), 4 * KiB);
  EXPECT_THROW((void)a.allocate(no_stream(), 1), out_of_memory);
  EXPECT_THROW((void)a.allocate_sync(1, 1), out_of_memory);
  EXPECT_EQ(upstream.requests().size(), 1U);  // refusals never reach the upstream
  a.deallocate(no_stream(), whole, 4 * KiB);

  std::vector<void*> quarters;
  for (int i = 0; i < 4; ++i) {
    quarters.push_back(a.allocate_sync(1000));  // 1024 each
  }
  EXPECT_EQ(a.bytes_in_use(), 4 * KiB);
  EXPECT_THROW((void)a.allocate_sync(1), out_of_memory);
  a.deallocate_sync(quarters.back(), 1000);
  quarters.pop_back();
  void* last = a.allocate(no_stream(), 1024);  // fits again, exactly
  EXPECT_THROW((void)a.allocate(no_stream(), 1), out_of_memory);
  a.deallocate(no_stream(), last, 1024);
  for (void* p : quarters) {
    a.deallocate_sync(p, 1000);
  }
  EXPECT_EQ(a.bytes_in_use(), 0U);
  EXPECT_EQ(upstream.live_blocks(), 0U);
  EXPECT_EQ(upstream.requests().size(), 6U);

  adaptor zero{upstream, 0};  // nothing but 0 bytes
  EXPECT_THROW((void)zero.allocate(no_stream(), 1), out_of_memory);
  EXPECT_EQ(zero.allocate(no_stream(), 0), nullptr);
}

TEST(limiting_adaptor, ItsOutOfMemoryNamesTheLimitTheBytesInUseAndTheRequest)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
  void* p = a.allocate(no_stream(), 3500);  // 3584 counted
  EXPECT_EQ(refusal([&] { (void)a.allocate(no_stream(), 1000); }),
            "rmm_next::limiting_adaptor: out_of_memory: allocating 1000 bytes (1024 counted) "
            "would pass the limit of 4096 bytes, with 3584 bytes in use; free memory or raise "
            "the limit (set_limit)");
  EXPECT_EQ(refusal([&] { (void)a.allocate_sync(768, 256); }),
            "rmm_next::limiting_adaptor: out_of_memory: allocating 768 bytes would pass the "
            "limit of 4096 bytes, with 3584 bytes in use; free memory or raise the limit "
            "(set_limit)");
  // A size that cannot be rounded counts as the largest std::size_t.
  std::size_t const huge = std::numeric_limits<std::size_t>::max() - 10;
  EXPECT_EQ(refusal([&] { (void)a.allocate(no_stream(), huge); }),
            "rmm_next::limiting_adaptor: out_of_memory: allocating " + std::to_string(huge) +
              " bytes (" + std::to_string(std::numeric_limits<std::size_t>::max()) +
              " counted) would pass the limit of 4096 bytes, with 3584 bytes in use; free memory "
              "or raise the limit (set_limit)");
  // It is a bad_alloc, as every rmm-next allocation failure.
  EXPECT_THROW((void)a.allocate(no_stream(), 4 * KiB), std::bad_alloc);
  EXPECT_EQ(a.bytes_in_use(), 3584U);
  a.deallocate(no_stream(), p, 3500);
  EXPECT_EQ(a.bytes_in_use(), 0U);
  void* q = a.allocate(no_stream(), 4 * KiB);  // everything keeps working
  a.deallocate(no_stream(), q, 4 * KiB);
}

TEST(limiting_adaptor, ABadAlignmentThrowsBadAllocAndCountsNothing)
{
  recording_resource upstream;
  adaptor a{upstream, MiB};
  try {
    [[maybe_unused]] void* p = a.allocate(no_stream(), 100, 48);
    ADD_FAILURE() << "alignment 48 accepted";
  } catch (bad_alloc const& e) {
    EXPECT_EQ(std::string{e.what()},
              "rmm_next::limiting_adaptor: alignment 48 is not a power of two; pass 1, 2, 4, ... "
              "(256 by default)");
  }
  EXPECT_THROW((void)a.allocate_sync(100, 0), bad_alloc);
  EXPECT_EQ(a.bytes_in_use(), 0U);
  EXPECT_TRUE(upstream.requests().empty());
}

TEST(limiting_adaptor, TheLimitChangesWhileAllocationsAreLive)
{
  recording_resource upstream;
  adaptor a{upstream, 8 * KiB};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  void* p      = a.allocate(no_stream(), 2 * KiB);
  void* q      = a.allocate(no_stream(), 2 * KiB);

  EXPECT_EQ(a.set_limit(KiB), 8 * KiB);  // below the bytes in use: returns the previous limit
  EXPECT_EQ(copy.limit(), KiB);          // copies share it
  EXPECT_EQ(a.bytes_in_use(), 4 * KiB);  // nothing live is touched
  EXPECT_NE(refusal([&] {
              (void)copy.allocate(no_stream(), 256);
            }).find("the limit of 1024 bytes, with 4096 bytes in use"),
            std::string::npos);
  a.deallocate(no_stream(), p, 2 * KiB);  // still above the limit
  EXPECT_THROW((void)a.allocate(no_stream(), 256), out_of_memory);
  a.deallocate(no_stream(), q, 2 * KiB);
  void* r = a.allocate(no_stream(), KiB);  // fits the lowered limit exactly
  EXPECT_THROW((void)a.allocate(no_stream(), 1), out_of_memory);

  EXPECT_EQ(copy.set_limit(16 * KiB), KiB);  // raised: room again
  void* s = a.allocate_sync(15 * KiB);
  EXPECT_EQ(a.bytes_in_use(), 16 * KiB);
  a.deallocate(no_stream(), r, KiB);
  a.deallocate_sync(s, 15 * KiB);
  EXPECT_EQ(a.bytes_in_use(), 0U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(limiting_adaptor, AnUpstreamThatThrowsLeavesTheCountUnchanged)
{
  recording_resource upstream;
  adaptor a{upstream, 8 * KiB};
  void* p = a.allocate(no_stream(), KiB);
  upstream.throw_on_allocate(true);
  EXPECT_EQ(refusal([&] { (void)a.allocate(no_stream(), 4 * KiB); }),
            "rmm_next::recording_resource: out_of_memory");  // the upstream's own error
  EXPECT_THROW((void)a.allocate_sync(7 * KiB), out_of_memory);
  EXPECT_EQ(a.bytes_in_use(), KiB);
  upstream.throw_on_allocate(false);
  void* q = a.allocate_sync(7 * KiB);  // the whole remaining room is still there
  EXPECT_EQ(a.bytes_in_use(), 8 * KiB);
  a.deallocate_sync(q, 7 * KiB);
  a.deallocate(no_stream(), p, KiB);
  EXPECT_EQ(a.bytes_in_use(), 0U);
}

// ---- Copies, refs, spellings --------------------------------------------------------------------

TEST(limiting_adaptor, CopiesShareTheCountSeparateAdaptorsDoNot)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
  adaptor copy = a;  // NOLINT(performance-unnecessary-copy-initialization)
  adaptor other{upstream, 4 * KiB};
  EXPECT_TRUE(a == copy);
  EXPECT_FALSE(a == other);
  EXPECT_TRUE(a.upstream_resource() == upstream);

  void* p = a.allocate(no_stream(), 3 * KiB);
  EXPECT_EQ(copy.bytes_in_use(), 3 * KiB);
  EXPECT_THROW((void)copy.allocate(no_stream(), 2 * KiB), out_of_memory);
  void* q = other.allocate(no_stream(), 4 * KiB);  // its own limit, over the same upstream
  copy.deallocate(no_stream(), p, 3 * KiB);
  EXPECT_EQ(a.bytes_in_use(), 0U);
  other.deallocate(no_stream(), q, 4 * KiB);
  other = a;
  EXPECT_TRUE(other == a);
}

TEST(limiting_adaptor, ThroughRefsAndOverARef)
{
  recording_resource upstream;
  adaptor a{upstream, 64 * KiB};
  device_async_resource_ref ref{a};
  host_resource_ref sync_ref{a};
  void* p = ref.allocate(no_stream(), 40 * KiB, 256);
  EXPECT_THROW((void)sync_ref.allocate_sync(30 * KiB, 256), out_of_memory);
  void* q = sync_ref.allocate_sync(24 * KiB, 256);
  EXPECT_EQ(a.bytes_in_use(), 64 * KiB);
  ref.deallocate(no_stream(), p, 40 * KiB, 256);
  sync_ref.deallocate_sync(q, 24 * KiB, 256);
  EXPECT_EQ(a.bytes_in_use(), 0U);

  limiting_adaptor<device_async_resource_ref> over_ref{device_async_resource_ref{upstream}, KiB};
  void* r = over_ref.allocate(no_stream(), KiB);
  EXPECT_THROW((void)over_ref.allocate(no_stream(), 1), out_of_memory);
  over_ref.deallocate(no_stream(), r, KiB);
  limiting_adaptor over_sync_ref{device_resource_ref{upstream}, KiB};  // deduced
  static_assert(std::is_same_v<decltype(over_sync_ref), limiting_adaptor<device_resource_ref>>);
  void* s = over_sync_ref.allocate_sync(KiB);
  over_sync_ref.deallocate_sync(s, KiB);
  EXPECT_EQ(over_sync_ref.bytes_in_use(), 0U);
  EXPECT_EQ(upstream.frees(), 4U);
}

TEST(limiting_adaptor, EveryMemberSpelling)
{
  recording_resource upstream;
  adaptor a{upstream, 4 * KiB};
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  void* p = a.allocate(std::size_t{1000}, 8);         // CCCL 3.0 synchronous
  void* q = a.allocate_async(2000, 16, no_stream());  // CCCL 3.0 stream-ordered
  EXPECT_EQ(a.bytes_in_use(), 1024U + 2048U);
  EXPECT_THROW((void)a.allocate_async(2000, 16, no_stream()), out_of_memory);
  a.deallocate(p, 1000, 8);
  a.deallocate_async(q, 2000, 16, no_stream());
#endif
  void* r = a.allocate(no_stream(), 4 * KiB);
  a.deallocate(no_stream(), r, 4 * KiB);
  EXPECT_EQ(a.bytes_in_use(), 0U);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(limiting_adaptor, ThreadsRacingToTheLimitNeverPassIt)
{
  constexpr int threads       = 16;
  constexpr std::size_t block = KiB;
  constexpr std::size_t limit = 256 * block;  // fewer blocks than the threads want in all
  constexpr int churn         = 1500;
  unsigned const seed         = std::random_device{}();
  std::printf("seed %u\n", seed);
  SCOPED_TRACE("seed " + std::to_string(seed));

  recording_resource upstream;
  adaptor a{upstream, limit};
  std::barrier sync{threads + 1};
  std::vector<std::size_t> grabbed(threads, 0);
  std::atomic<int> over_limit{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      adaptor mine = a;
      std::vector<void*> held;
      // 1: grab blocks until refused; nobody frees meanwhile, so the count ends at the limit.
      for (;;) {
        try {
          held.push_back(mine.allocate(no_stream(), block));
        } catch (out_of_memory const&) {
          break;
        }
        if (mine.bytes_in_use() > limit) { over_limit.fetch_add(1); }
      }
      grabbed[t] = held.size();
      sync.arrive_and_wait();  // a: everything grabbed
      sync.arrive_and_wait();  // b: the main thread has looked
      for (void* p : held) {
        mine.deallocate(no_stream(), p, block);
      }
      held.clear();
      // 2: random sizes, allocations and frees racing, refusals expected.
      std::mt19937 rng{seed + static_cast<unsigned>(t)};
      std::uniform_int_distribution<std::size_t> size{1, 48 * KiB};
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < churn; ++i) {
        if (live.empty() || rng() % 3 != 0) {
          std::size_t const bytes = size(rng);
          try {
            void* p = (i % 2 == 0) ? mine.allocate(no_stream(), bytes) : mine.allocate_sync(bytes);
            live.emplace_back(p, bytes);
          } catch (out_of_memory const&) {
          }
        } else {
          auto const [p, bytes] = live.back();
          live.pop_back();
          mine.deallocate(no_stream(), p, bytes);
        }
        if (mine.bytes_in_use() > limit) { over_limit.fetch_add(1); }
      }
      for (auto const& [p, bytes] : live) {
        mine.deallocate_sync(p, bytes);
      }
    });
  }
  sync.arrive_and_wait();  // a
  std::size_t total = 0;
  for (std::size_t n : grabbed) {
    total += n;
  }
  EXPECT_EQ(total * block, limit);
  EXPECT_EQ(a.bytes_in_use(), limit);
  sync.arrive_and_wait();  // b
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_EQ(over_limit.load(), 0);
  EXPECT_LE(upstream.peak_bytes(), limit);  // what the upstream held at once, never more
  EXPECT_EQ(a.bytes_in_use(), 0U);
  EXPECT_EQ(upstream.live_blocks(), 0U);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

// ---- Stacks -------------------------------------------------------------------------------------

TEST(limiting_adaptor, OverAnAlignedAdaptorItCountsTheCallersBytes)
{
  recording_resource upstream;
  limiting_adaptor<aligned_adaptor<recording_resource>> a{
    aligned_adaptor<recording_resource>{upstream, 2 * MiB}, 4 * MiB};
  void* p = a.allocate(no_stream(), MiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (2 * MiB), 0U);
  EXPECT_EQ(a.bytes_in_use(), MiB);  // the caller's megabyte, not the padding
  EXPECT_EQ(upstream.last_request(), (recorded_request{3 * MiB - 256, 256}));
  a.deallocate(no_stream(), p, MiB);
  EXPECT_EQ(upstream.bad_frees(), 0U);
}

TEST(limiting_adaptor, BelowAnAlignedAdaptorItCountsThePadding)
{
  recording_resource upstream;
  aligned_adaptor<limiting_adaptor<recording_resource>> a{
    limiting_adaptor<recording_resource>{upstream, 4 * MiB}, 2 * MiB};
  void* p = a.allocate(no_stream(), MiB);
  EXPECT_EQ(a.upstream_resource().bytes_in_use(), 3 * MiB - 256);
  EXPECT_THROW((void)a.allocate(no_stream(), MiB), out_of_memory);  // another 3 MiB: too much
  void* q = a.allocate(no_stream(), 64 * KiB - 1);                  // below the threshold: 64 KiB
  EXPECT_EQ(a.upstream_resource().bytes_in_use(), 3 * MiB - 256 + 64 * KiB);
  a.deallocate(no_stream(), p, MiB);
  a.deallocate(no_stream(), q, 64 * KiB - 1);
  EXPECT_EQ(a.upstream_resource().bytes_in_use(), 0U);
}

TEST(limiting_adaptor, LimitingOverAlignedOverTheThreadCache)
{
  if (rmm_next::test::has_usable_device()) {
    // The streams below are made-up handles, which only a process without a driver may use.
    GTEST_SKIP() << "a CUDA device is usable: limiting_adaptor_gpu_test covers the stack";
  }
  cuda::stream_ref const stream{reinterpret_cast<cudaStream_t>(std::uintptr_t{0x100})};
  fake_resource upstream;
  using cache   = thread_cache_adaptor<fake_resource>;
  using aligned = aligned_adaptor<cache>;
  limiting_adaptor<aligned> stack{aligned{cache{upstream}, 4 * KiB, 0}, 64 * KiB};
  static_assert(rmm_next::detail::stream_ordered_resource_with<decltype(stack),
                                                               cuda::mr::device_accessible,
                                                               cuda::mr::host_accessible>);

  void* p = stack.allocate(stream, 1000);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (4 * KiB), 0U);
  EXPECT_EQ(stack.bytes_in_use(), 1024U);
  stack.deallocate(stream, p, 1000);  // into the thread's cache
  long const allocations = upstream.allocations();
  void* q                = stack.allocate(stream, 1000);  // the cached block, upstream untouched
  EXPECT_EQ(upstream.allocations(), allocations);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % (4 * KiB), 0U);

  std::vector<void*> held{q};
  std::string message;
  try {
    for (;;) {
      held.push_back(stack.allocate(stream, 8 * KiB, 4 * KiB));
    }
  } catch (out_of_memory const& e) {
    message = e.what();
  }
  EXPECT_EQ(held.size(), 8U);  // 1 KiB + 7 * 8 KiB, then 8 KiB more would pass 64 KiB
  EXPECT_NE(message.find("the limit of 65536 bytes, with 58368 bytes in use"), std::string::npos)
    << message;
  stack.deallocate(stream, q, 1000);
  held.erase(held.begin());
  for (void* h : held) {
    stack.deallocate(stream, h, 8 * KiB, 4 * KiB);
  }
  EXPECT_EQ(stack.bytes_in_use(), 0U);
}

}  // namespace
}  // namespace rmm_next::test
