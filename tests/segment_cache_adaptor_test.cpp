/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// segment_cache_adaptor without a GPU: over host memory posing as device memory, with stream
// handles that are plain numbers (a process without a driver has no real streams; a handle's
// value is its lane). What is checked: which addresses come back, what the upstream is asked for
// and given back, the statistics, out of memory, and threads.

#include "support/fake_resource.hpp"
#include "support/forked_child.hpp"
#include "support/without_a_driver.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using rmm_next::test::fake_resource;

constexpr std::size_t MiB = std::size_t{1} << 20;
/** Requests above 1 MiB up to 10 MiB share segments of this size. */
constexpr std::size_t medium_segment = rmm_next::detail::medium_segment_bytes;

/** @brief Host memory with a capacity, recording each request's size; copies share all. */
class counted_upstream {
 public:
  struct state {
    std::mutex mutex;
    std::map<void*, std::size_t> live;
    std::vector<std::size_t> requests;
    std::size_t capacity{std::size_t{1} << 40};
    std::size_t in_use{};
    long frees{};
  };

  counted_upstream() : s_{std::make_shared<state>()} {}

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    std::lock_guard lock{s_->mutex};
    if (bytes > s_->capacity - s_->in_use) {
      throw rmm_next::out_of_memory{"rmm_next::out_of_memory: test upstream: " +
                                    std::to_string(bytes)};
    }
    void* p     = host_.allocate(stream, bytes, alignment);
    s_->live[p] = bytes;
    s_->requests.push_back(bytes);
    s_->in_use += bytes;
    return p;
  }
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t a) noexcept
  {
    std::lock_guard lock{s_->mutex};
    auto const it = s_->live.find(p);
    if (it == s_->live.end() || it->second != bytes) {
      ADD_FAILURE() << "the upstream was given back memory it did not hand out, or another size";
      return;
    }
    s_->live.erase(it);
    s_->in_use -= bytes;
    ++s_->frees;
    host_.deallocate(stream, p, bytes, a);
  }
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t a)
  {
    return allocate(cuda::stream_ref{cudaStream_t{}}, bytes, a);
  }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t a) noexcept
  {
    deallocate(cuda::stream_ref{cudaStream_t{}}, p, bytes, a);
  }
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t a) { return allocate_sync(bytes, a); }
  void deallocate(void* p, std::size_t bytes, std::size_t a) noexcept
  {
    deallocate_sync(p, bytes, a);
  }
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t a, cuda::stream_ref s)
  {
    return allocate(s, bytes, a);
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t a, cuda::stream_ref s) noexcept
  {
    deallocate(s, p, bytes, a);
  }

  friend bool operator==(counted_upstream const& a, counted_upstream const& b) noexcept
  {
    return a.s_ == b.s_;
  }
  friend constexpr void get_property(counted_upstream const&, cuda::mr::device_accessible) noexcept
  {
  }

  [[nodiscard]] state& get() const noexcept { return *s_; }

 private:
  std::shared_ptr<state> s_;
  fake_resource host_;
};

using cache_t = rmm_next::segment_cache_adaptor<counted_upstream>;

cuda::stream_ref stream_of(std::uintptr_t n)
{
  return cuda::stream_ref{reinterpret_cast<cudaStream_t>(n)};
}

[[maybe_unused]] ::testing::Environment* const no_driver_check =
  rmm_next::test::skip_where_a_device_is_usable("segment_cache_adaptor_gpu_test");

/** @brief Options of `max_idle_bytes` `bytes` and `max_idle_fraction` `fraction`. */
rmm_next::segment_cache_options idle_bounds(std::size_t bytes, double fraction)
{
  rmm_next::segment_cache_options o;
  o.max_idle_bytes    = bytes;
  o.max_idle_fraction = fraction;
  return o;
}

rmm_next::segment_cache_options keep_everything()
{
  rmm_next::segment_cache_options o;
  o.max_idle_bytes = std::size_t{1} << 40;
  return o;
}

TEST(SegmentCacheAdaptor, SmallRequestsShareOneSegmentAndAFreedBlockComesBackOnItsStream)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  void* a      = cache.allocate(s, 1000);
  void* b      = cache.allocate(s, 3000);
  ASSERT_EQ(up.get().requests, std::vector<std::size_t>{2 * MiB});
  // 1000 bytes take 1024 (two granules of 512); b follows a in the same segment.
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), 1024);
  cache.deallocate(s, a, 1000);
  void* again = cache.allocate(s, 900);
  EXPECT_EQ(again, a);
  rmm_next::segment_cache_statistics const st = cache.statistics();
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.segments, 1u);
  EXPECT_EQ(st.segment_bytes, 2 * MiB);
  EXPECT_EQ(st.live_bytes, 1024u + 3072u);
  cache.deallocate(s, again, 900);
  cache.deallocate(s, b, 3000);
  EXPECT_EQ(cache.statistics().idle_bytes, 2 * MiB);
  EXPECT_EQ(cache.statistics().live_bytes, 0u);
}

TEST(SegmentCacheAdaptor, FreedNeighboursMergeIntoOneBlock)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  void* a      = cache.allocate(s, 512 << 10);
  void* b      = cache.allocate(s, 512 << 10);
  void* c      = cache.allocate(s, MiB);
  ASSERT_EQ(up.get().requests.size(), 1u);  // the three fill one 2 MiB segment
  cache.deallocate(s, b, 512 << 10);
  cache.deallocate(s, a, 512 << 10);
  void* whole = cache.allocate(s, MiB);  // only a and b merged can hold it
  EXPECT_EQ(whole, a);
  EXPECT_EQ(up.get().requests.size(), 1u);
  cache.deallocate(s, whole, MiB);
  cache.deallocate(s, c, MiB);
}

TEST(SegmentCacheAdaptor, SegmentSizesFollowTheRequest)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  void* medium = cache.allocate(s, 3 * MiB);
  void* large  = cache.allocate(s, 30 * MiB + 1);
  EXPECT_EQ(up.get().requests, (std::vector<std::size_t>{medium_segment, 32 * MiB}));
  // The rest of the medium segment serves the next medium request.
  void* second = cache.allocate(s, 5 * MiB);
  EXPECT_EQ(static_cast<char*>(second) - static_cast<char*>(medium), std::ptrdiff_t(3 * MiB));
  EXPECT_EQ(up.get().requests.size(), 2u);
  cache.deallocate(s, second, 5 * MiB);
  cache.deallocate(s, large, 30 * MiB + 1);
  cache.deallocate(s, medium, 3 * MiB);
}

TEST(SegmentCacheAdaptor, AnotherStreamGetsItsOwnSegmentAndAFreeThereJoinsTheOwnersLane)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s1 = stream_of(0x10);
  auto const s2 = stream_of(0x20);
  void* a       = cache.allocate(s1, 4096);
  cache.deallocate(s2, a, 4096);  // freed on another stream: it stays s1's
  void* b = cache.allocate(s2, 4096);
  EXPECT_NE(b, a);
  EXPECT_EQ(up.get().requests.size(), 2u);
  void* c = cache.allocate(s1, 4096);
  EXPECT_EQ(c, a);
  cache.deallocate(s2, b, 4096);
  cache.deallocate(s1, c, 4096);
}

TEST(SegmentCacheAdaptor, IdleSegmentsBeyondTheBoundGoBackOldestFirst)
{
  counted_upstream up;
  rmm_next::segment_cache_options o;
  o.max_idle_bytes = 2 * MiB;
  cache_t cache{up, 0, o};
  auto const s = stream_of(0x10);
  void* a      = cache.allocate(s, MiB + 1);  // a medium segment
  void* b      = cache.allocate(s, 1000);     // a small one, 2 MiB
  cache.deallocate(s, b, 1000);
  EXPECT_EQ(cache.statistics().idle_bytes, 2 * MiB);  // within the bound: kept
  EXPECT_EQ(up.get().frees, 0);
  cache.deallocate(s, a, MiB + 1);  // past the bound: the oldest (the small one) goes, then a
  EXPECT_EQ(up.get().frees, 2);
  rmm_next::segment_cache_statistics const st = cache.statistics();
  EXPECT_EQ(st.idle_bytes, 0u);
  EXPECT_EQ(st.segment_bytes, 0u);
  EXPECT_EQ(st.released_segments, 2u);
  EXPECT_EQ(up.get().in_use, 0u);
}

TEST(SegmentCacheAdaptor, ABoundOfZeroGivesEachSegmentBackWhenItIsIdle)
{
  counted_upstream up;
  cache_t cache{up, 0, idle_bounds(0, 0)};
  auto const s = stream_of(0x10);
  void* a      = cache.allocate(s, 100);
  void* b      = cache.allocate(s, 100);
  cache.deallocate(s, a, 100);
  EXPECT_EQ(up.get().frees, 0);  // b still lives in the segment
  cache.deallocate(s, b, 100);
  EXPECT_EQ(up.get().frees, 1);
  EXPECT_EQ(up.get().in_use, 0u);
}

TEST(SegmentCacheAdaptor, TheIdleBoundFollowsThePeakLiveBytesUntilTrim)
{
  counted_upstream up;
  rmm_next::segment_cache_options o;
  o.max_idle_bytes    = 0;
  o.max_idle_fraction = 0.5;
  cache_t cache{up, 0, o};
  auto const s = stream_of(0x10);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(cache.allocate(s, 12 * MiB));  // large: a 12 MiB segment each
  }
  EXPECT_EQ(cache.statistics().peak_live_bytes, 48 * MiB);
  EXPECT_EQ(cache.statistics().idle_bound, 0u);  // at the peak: max_idle_bytes alone
  for (void* b : blocks) {
    cache.deallocate(s, b, 12 * MiB);
  }
  EXPECT_EQ(cache.statistics().idle_bound, 24 * MiB);  // half the peak, which is all below it
  // Half the peak stays idle, for the next peak; the two oldest segments went back.
  rmm_next::segment_cache_statistics st = cache.statistics();
  EXPECT_EQ(st.idle_bytes, 24 * MiB);
  EXPECT_EQ(st.released_segments, 2u);
  EXPECT_EQ(up.get().frees, 2);
  void* again = cache.allocate(s, 12 * MiB);  // the next peak takes them again: a hit
  EXPECT_TRUE(again == blocks[2] || again == blocks[3]);
  EXPECT_EQ(up.get().requests.size(), 4u);
  cache.deallocate(s, again, 12 * MiB);
  // trim() starts again: everything goes back, and the bound follows what is live from now on.
  EXPECT_EQ(cache.trim(s), 24 * MiB);
  st = cache.statistics();
  EXPECT_EQ(st.peak_live_bytes, 0u);
  EXPECT_EQ(st.idle_bound, 0u);
  void* c = cache.allocate(s, 12 * MiB);
  cache.deallocate(s, c, 12 * MiB);  // 12 MiB idle, over half of the 12 MiB peak: it goes back
  EXPECT_EQ(cache.statistics().idle_bytes, 0u);
  EXPECT_EQ(up.get().in_use, 0u);
}

TEST(SegmentCacheAdaptor, AMissNoIdleSegmentFitsTakesThePlaceOfIdleBytesPastTheByteBound)
{
  counted_upstream up;
  rmm_next::segment_cache_options o;
  o.max_idle_bytes    = 12 * MiB;
  o.max_idle_fraction = 1;
  cache_t cache{up, 0, o};
  auto const s = stream_of(0x10);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(cache.allocate(s, 12 * MiB));  // a 12 MiB segment each
  }
  for (void* b : blocks) {
    cache.deallocate(s, b, 12 * MiB);
  }
  EXPECT_EQ(cache.statistics().idle_bytes, 48 * MiB);  // the whole peak stays for the next one
  // A peak of a new size that no idle segment fits: each new segment takes the place of idle
  // bytes past max_idle_bytes, oldest first, instead of adding to them.
  void* big                             = cache.allocate(s, 30 * MiB);
  rmm_next::segment_cache_statistics st = cache.statistics();
  EXPECT_EQ(st.misses, 5u);
  EXPECT_EQ(st.released_segments, 3u);  // 36 MiB past the 12 MiB bound: three segments, 30 MiB
  EXPECT_EQ(st.idle_bytes, 12 * MiB);
  EXPECT_EQ(st.segment_bytes, 42 * MiB);
  EXPECT_EQ(up.get().in_use, 42 * MiB);       // not 78 MiB
  void* again = cache.allocate(s, 12 * MiB);  // what max_idle_bytes kept is still a hit
  EXPECT_EQ(again, blocks[3]);
  EXPECT_EQ(cache.statistics().misses, 5u);
  void* more = cache.allocate(s, 30 * MiB);  // nothing idle: a miss that gives nothing back
  EXPECT_EQ(cache.statistics().released_segments, 3u);
  EXPECT_EQ(up.get().in_use, 72 * MiB);
  cache.deallocate(s, more, 30 * MiB);
  cache.deallocate(s, again, 12 * MiB);
  cache.deallocate(s, big, 30 * MiB);
  EXPECT_EQ(cache.trim(s), 72 * MiB);
  EXPECT_EQ(up.get().in_use, 0u);
}

TEST(SegmentCacheAdaptor, ANegativeOrNanIdleFractionIsRefused)
{
  counted_upstream up;
  for (double f : {-0.5, std::numeric_limits<double>::quiet_NaN()}) {
    rmm_next::segment_cache_options o;
    o.max_idle_fraction = f;
    try {
      cache_t cache{up, 0, o};
      ADD_FAILURE() << "max_idle_fraction " << f << " was accepted";
    } catch (std::invalid_argument const& e) {
      EXPECT_NE(std::string{e.what()}.find("max_idle_fraction"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(up.get().requests.empty());
}

TEST(SegmentCacheAdaptor, AnUnboundedIdleFractionKeepsWhatTheLiveBytesAreBelowTheirPeak)
{
  counted_upstream up;
  cache_t cache{up, 0, idle_bounds(0, std::numeric_limits<double>::infinity())};
  auto const s = stream_of(0x10);
  EXPECT_EQ(cache.statistics().idle_bound, 0u);  // no peak yet: no infinity times zero
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(cache.allocate(s, 12 * MiB));
  }
  for (void* b : blocks) {
    cache.deallocate(s, b, 12 * MiB);
  }
  EXPECT_EQ(cache.statistics().idle_bound, 48 * MiB);
  EXPECT_EQ(cache.statistics().idle_bytes, 48 * MiB);  // the whole peak stays for the next one
  EXPECT_EQ(up.get().frees, 0);
  void* again = cache.allocate(s, 12 * MiB);  // a hit
  EXPECT_EQ(up.get().requests.size(), 4u);
  cache.deallocate(s, again, 12 * MiB);
  EXPECT_EQ(up.get().frees, 0);
  EXPECT_EQ(cache.trim(s), 48 * MiB);
}

// At a peak the fraction keeps nothing: the cache holds idle segments for the next peak only while
// the live bytes are below the last one by at least as much. Here the live bytes rise again
// through a hit in a live segment's free tail, not through the idle segment, so that segment can
// no longer serve this peak without the cache holding more than at the last.
TEST(SegmentCacheAdaptor, IdleSegmentsGoBackWhenTheLiveBytesRiseBackTowardsThePeakWithoutThem)
{
  counted_upstream up;
  cache_t cache{up, 0, idle_bounds(0, 1)};
  auto const s              = stream_of(0x10);
  std::size_t const z_bytes = medium_segment - 10 * MiB;    // y and z leave an 8 MiB tail
  void* x                   = cache.allocate(s, 12 * MiB);  // a 12 MiB segment of its own
  void* y                   = cache.allocate(s, 2 * MiB);   // a medium segment
  void* z                   = cache.allocate(s, z_bytes);   // the same medium segment, after y
  EXPECT_EQ(static_cast<char*>(z), static_cast<char*>(y) + 2 * MiB);
  EXPECT_EQ(cache.statistics().misses, 2u);  // x and y; z is a hit in y's segment
  EXPECT_EQ(cache.statistics().peak_live_bytes, 14 * MiB + z_bytes);
  cache.deallocate(s, x, 12 * MiB);  // 12 MiB below the peak: x's segment stays idle
  EXPECT_EQ(cache.statistics().idle_bytes, 12 * MiB);
  EXPECT_EQ(cache.statistics().idle_bound, 12 * MiB);
  EXPECT_EQ(up.get().frees, 0);
  void* u = cache.allocate(s, 6 * MiB);  // best fit: the medium segment's 8 MiB tail, a hit
  EXPECT_EQ(static_cast<char*>(u), static_cast<char*>(z) + z_bytes);
  EXPECT_EQ(cache.statistics().hits, 2u);
  EXPECT_EQ(cache.statistics().misses, 2u);
  cache.deallocate(s, y, 2 * MiB);  // 8 MiB below the peak: the 12 MiB idle segment goes
  rmm_next::segment_cache_statistics const st = cache.statistics();
  EXPECT_EQ(st.idle_bound, 8 * MiB);
  EXPECT_EQ(st.idle_bytes, 0u);
  EXPECT_EQ(st.released_segments, 1u);
  EXPECT_EQ(up.get().frees, 1);
  EXPECT_EQ(up.get().in_use, medium_segment);  // the medium segment alone: no more than the peak's
  cache.deallocate(s, z, z_bytes);
  cache.deallocate(s, u, 6 * MiB);
  EXPECT_EQ(cache.trim(s), medium_segment);
  EXPECT_EQ(up.get().in_use, 0u);
}

// A forked child holds its parent's cache, whose blocks the child must never hand out again (their
// stream work is the parent's), and whose frees must not touch the parent's streams: in the child
// allocations go to the upstream (which refuses, in a real process: the driver is unusable there)
// and frees do nothing. The same flag stops the cache at exit, once the runtime unloads.
TEST(SegmentCacheAdaptor, AForkedChildNeverReusesTheParentsBlocksAndItsFreesDoNothing)
{
  rmm_next::detail::watch_runtime_teardown();  // as the first CUDA call of a resource does
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  void* cached = cache.allocate(s, 4096);
  void* live   = cache.allocate(s, 8192);
  cache.deallocate(s, cached, 4096);
  cache.deallocate(s, cache.allocate(s, 12 * MiB), 12 * MiB);  // an idle segment of its own
  std::string const child = rmm_next::test::run_in_forked_child([&] {
    int code                = 0;
    std::size_t const asked = up.get().requests.size();
    auto const before       = cache.statistics();
    void* p                 = cache.allocate(s, 4096);
    if (p == cached) { code |= 1; }                             // a parent's block again
    if (up.get().requests.size() != asked + 1) { code |= 2; }   // not the upstream's
    if (cache.statistics().hits != before.hits) { code |= 4; }  // served from the cache
    cache.deallocate(s, live, 8192);                            // does nothing
    if (cache.statistics().live_bytes != before.live_bytes) { code |= 8; }
    if (cache.trim(s) != 0 || up.get().frees != 0) { code |= 16; }  // nothing goes back
    return code;
  });
  EXPECT_EQ(child, "") << "bits: 1 reused the parent's block, 2 no upstream call, 4 a hit, 8 a "
                          "free counted, 16 a release";
  EXPECT_FALSE(rmm_next::detail::runtime_unloading().load());  // the parent goes on
  EXPECT_EQ(cache.allocate(s, 4096), cached);                  // its cache untouched
  cache.deallocate(s, cached, 4096);
  cache.deallocate(s, live, 8192);
}

TEST(SegmentCacheAdaptor, TrimGivesBackEveryIdleSegmentAndKeepsTheLiveOnes)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  auto const s1 = stream_of(0x10);
  auto const s2 = stream_of(0x20);
  std::vector<void*> on1;
  for (int i = 0; i < 5; ++i) {
    on1.push_back(cache.allocate(s1, 3 * MiB));  // 5 x 3 MiB in one medium segment
  }
  void* kept = cache.allocate(s2, 100);
  void* big  = cache.allocate(s2, 64 * MiB);
  for (void* p : on1) {
    cache.deallocate(s1, p, 3 * MiB);
  }
  cache.deallocate(s2, big, 64 * MiB);
  EXPECT_EQ(up.get().in_use, medium_segment + 2 * MiB + 64 * MiB);
  EXPECT_EQ(cache.trim(s1), medium_segment + 64 * MiB);
  EXPECT_EQ(up.get().in_use, 2 * MiB);  // the segment of the live block stays
  EXPECT_EQ(cache.statistics().live_bytes, 512u);
  cache.deallocate(s2, kept, 100);
  EXPECT_EQ(cache.trim(), 2 * MiB);
  EXPECT_EQ(up.get().in_use, 0u);
}

TEST(SegmentCacheAdaptor, OutOfMemoryGivesIdleSegmentsBackAndRetriesOnce)
{
  counted_upstream up;
  up.get().capacity = 40 * MiB;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  void* a      = cache.allocate(s, 30 * MiB);
  cache.deallocate(s, a, 30 * MiB);       // idle, kept: 30 MiB of the 40 held
  void* b = cache.allocate(s, 36 * MiB);  // needs the idle segment back
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(up.get().in_use, 36 * MiB);
  EXPECT_THROW((void)cache.allocate(s, 10 * MiB), rmm_next::out_of_memory);
  EXPECT_EQ(cache.statistics().live_bytes, 36 * MiB);  // and the cache goes on
  cache.deallocate(s, b, 36 * MiB);
  void* c = cache.allocate(s, 1000);
  cache.deallocate(s, c, 1000);
}

TEST(SegmentCacheAdaptor, SizesThatCannotBeRoundedAndBadAlignmentsAreTheUpstreamsToRefuse)
{
  counted_upstream up;
  up.get().capacity = 64 * MiB;
  cache_t cache{up, 0, keep_everything()};
  auto const s = stream_of(0x10);
  EXPECT_THROW((void)cache.allocate(s, SIZE_MAX), rmm_next::out_of_memory);
  EXPECT_THROW((void)cache.allocate(s, SIZE_MAX - 4095), rmm_next::out_of_memory);
  EXPECT_EQ(cache.statistics().bypasses, 2u);
  EXPECT_EQ(cache.allocate(s, 0), nullptr);
  cache.deallocate(s, nullptr, 0);
  void* p = cache.allocate(s, 1000);  // still working
  cache.deallocate(s, p, 1000);
  EXPECT_EQ(cache.statistics().hits + cache.statistics().misses, 1u);
}

TEST(SegmentCacheAdaptor, CopiesShareOneCacheAndBindToARef)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  cache_t copy = cache;
  EXPECT_EQ(copy, cache);
  EXPECT_NE(cache, (cache_t{up, 0, keep_everything()}));
  rmm_next::device_async_resource_ref ref{copy};
  auto const s = stream_of(0x10);
  void* a      = ref.allocate(s, 1000);
  cache.deallocate(s, a, 1000);
  EXPECT_EQ(copy.allocate(s, 1000), a);
  ref.deallocate(s, a, 1000);
  EXPECT_EQ(cache.statistics().hits, 1u);
}

TEST(SegmentCacheAdaptor, ThreadsOnTheirOwnStreamsAndFreesOnOthersLeaveNothingBehind)
{
  counted_upstream up;
  cache_t cache{up, 0, keep_everything()};
  constexpr int threads = 4;
  std::vector<std::vector<std::pair<void*, std::size_t>>> handed(threads);
  std::vector<std::thread> pool;
  std::atomic<bool> overlap{false};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto const s    = stream_of(0x100 * (t + 1));
      std::uint64_t x = 12345 + t;
      std::vector<std::pair<void*, std::size_t>> mine;
      for (int i = 0; i < 4000; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (mine.size() < 32 && (x % 3 != 0 || mine.empty())) {
          std::size_t const bytes          = 1 + x % (x % 7 == 0 ? 12 * MiB : 64 << 10);
          void* p                          = cache.allocate(s, bytes);
          static_cast<char*>(p)[0]         = static_cast<char>(t);
          static_cast<char*>(p)[bytes - 1] = static_cast<char>(t);
          mine.emplace_back(p, bytes);
        } else {
          auto const [p, bytes] = mine[x % mine.size()];
          if (static_cast<char*>(p)[0] != t || static_cast<char*>(p)[bytes - 1] != t) {
            overlap = true;
          }
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(x % mine.size()));
          // Every fourth free on another thread's stream.
          cache.deallocate(x % 4 == 0 ? stream_of(0x100 * ((t + 1) % threads + 1)) : s, p, bytes);
        }
      }
      handed[t] = std::move(mine);
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_FALSE(overlap) << "two live blocks shared memory";
  for (int t = 0; t < threads; ++t) {
    for (auto const& [p, bytes] : handed[t]) {
      cache.deallocate(stream_of(0x100 * (t + 1)), p, bytes);
    }
  }
  EXPECT_EQ(cache.statistics().live_bytes, 0u);
  (void)cache.trim();
  EXPECT_EQ(up.get().in_use, 0u);
  EXPECT_EQ(cache.statistics().segments, 0u);
}

}  // namespace
