/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// thread_cache_adaptor without a GPU: over host memory posing as device memory, with stream
// handles that are plain numbers (a process without a driver has no real streams; a handle's
// value is then its id). Runs under ThreadSanitizer in CI.

#include "support/fake_resource.hpp"
#include "support/without_a_driver.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using rmm_next::thread_cache_adaptor;
using rmm_next::thread_cache_options;
using rmm_next::test::fake_resource;

// What the adaptor is in front of the device resource (its header asserts it over a ref).
using cached_device_resource = thread_cache_adaptor<rmm_next::async_device_resource>;
static_assert(rmm_next::detail::stream_ordered_resource_with<cached_device_resource,
                                                             cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::synchronous_resource_with<cached_device_resource, cuda::mr::device_accessible>);
static_assert(!cuda::has_property<cached_device_resource, cuda::mr::host_accessible>);

cuda::stream_ref fake_stream(std::uintptr_t n)
{
  return cuda::stream_ref{reinterpret_cast<cudaStream_t>(n)};
}

[[maybe_unused]] ::testing::Environment* const no_driver_check =
  rmm_next::test::skip_where_a_device_is_usable("thread_cache_adaptor_gpu_test");

cuda::stream_ref const s1 = fake_stream(0x100);
cuda::stream_ref const s2 = fake_stream(0x200);
cuda::stream_ref const s3 = fake_stream(0x300);

/** A fake resource that holds at most `capacity` bytes and then throws out_of_memory. */
class limited_resource : public fake_resource {
 public:
  explicit limited_resource(std::size_t capacity)
    : used_{std::make_shared<std::atomic<std::size_t>>(0)}, capacity_{capacity}
  {
  }

  [[nodiscard]] void* allocate(cuda::stream_ref s, std::size_t bytes, std::size_t alignment)
  {
    if (used_->fetch_add(bytes) + bytes > capacity_) {
      used_->fetch_sub(bytes);
      throw rmm_next::out_of_memory{
        "rmm_next::out_of_memory: limited_resource: " + std::to_string(bytes) + " bytes"};
    }
    return fake_resource::allocate(s, bytes, alignment);
  }
  void deallocate(cuda::stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept
  {
    used_->fetch_sub(bytes);
    fake_resource::deallocate(s, p, bytes, alignment);
  }
  [[nodiscard]] std::size_t used() const { return used_->load(); }

 private:
  std::shared_ptr<std::atomic<std::size_t>> used_;
  std::size_t capacity_;
};

TEST(ThreadCacheSizeClasses, RoundUpByAtMostAQuarter)
{
  std::size_t previous_class = 0;
  for (std::size_t bytes = 1; bytes <= (std::size_t{1} << 20); bytes += (bytes < 4096 ? 1 : 61)) {
    std::size_t const cls     = rmm_next::detail::size_class_of(bytes);
    std::size_t const rounded = rmm_next::detail::size_class_bytes(cls);
    ASSERT_GE(rounded, bytes) << bytes;
    ASSERT_EQ(rounded % 256, 0u) << bytes;
    if (bytes > 1024) { ASSERT_LE(rounded * 4, bytes * 5) << bytes; }
    ASSERT_GE(cls, previous_class) << bytes;
    previous_class = cls;
    // A class is the smallest that holds `bytes`.
    if (cls > 0) { ASSERT_LT(rmm_next::detail::size_class_bytes(cls - 1), bytes) << bytes; }
  }
}

TEST(ThreadCacheAdaptor, SatisfiesTheSameConceptsAsItsUpstream)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  rmm_next::device_async_resource_ref ref{cache};
  rmm_next::host_device_async_resource_ref hd_ref{cache};
  void* p = ref.allocate(s1, 100, 256);
  EXPECT_NE(p, nullptr);
  ref.deallocate(s1, p, 100, 256);
  EXPECT_EQ(hd_ref.allocate(s1, 100, 256), p);  // the same block, through the other ref
  hd_ref.deallocate(s1, p, 100, 256);
}

TEST(ThreadCacheAdaptor, SameStreamGetsTheBlockBackWithoutUpstream)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  void* p = cache.allocate(s1, 1000);
  EXPECT_EQ(upstream.allocations(), 1);
  cache.deallocate(s1, p, 1000);
  EXPECT_EQ(upstream.deallocations(), 0);
  void* q = cache.allocate(s1, 900);  // same size class (1 KiB)
  EXPECT_EQ(q, p);
  EXPECT_EQ(upstream.allocations(), 1);
  cache.deallocate(s1, q, 900);

  auto const st = cache.statistics();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.bypasses, 0u);
  EXPECT_EQ(st.cached_bytes, 1024u);
}

TEST(ThreadCacheAdaptor, UpstreamSeesTheSizeClass)
{
  limited_resource upstream{1 << 20};
  thread_cache_adaptor<limited_resource> cache{upstream};
  void* p = cache.allocate(s1, 1025);
  EXPECT_EQ(upstream.used(), 1280u);
  cache.deallocate(s1, p, 1025);
  EXPECT_EQ(cache.flush(), 1280u);
  EXPECT_EQ(upstream.used(), 0u);
}

TEST(ThreadCacheAdaptor, AnotherStreamNeverGetsTheBlock)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  void* p = cache.allocate(s1, 512);
  cache.deallocate(s1, p, 512);
  void* q = cache.allocate(s2, 512);
  EXPECT_NE(q, p);
  EXPECT_EQ(upstream.allocations(), 2);
  cache.deallocate(s2, q, 512);
  EXPECT_EQ(cache.allocate(s1, 512), p);
  EXPECT_EQ(cache.allocate(s2, 512), q);
  cache.deallocate(s1, p, 512);
  cache.deallocate(s2, q, 512);
}

TEST(ThreadCacheAdaptor, AnotherThreadNeverGetsTheBlock)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  void* p = cache.allocate(s1, 512);
  cache.deallocate(s1, p, 512);
  void* q = nullptr;
  std::thread{[&] {
    q = cache.allocate(s1, 512);
    cache.deallocate(s1, q, 512);
  }}.join();
  EXPECT_NE(q, p);
  // The other thread's cache went back upstream when it exited.
  EXPECT_EQ(upstream.deallocations(), 1);
  EXPECT_EQ(cache.statistics().cached_bytes, 512u);
  EXPECT_EQ(cache.allocate(s1, 512), p);
  cache.deallocate(s1, p, 512);
}

TEST(ThreadCacheAdaptor, ABlockFreedByAnotherThreadJoinsThatThreadsCache)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  void* p = cache.allocate(s1, 4096);
  void* reused{};
  std::thread{[&] {
    cache.deallocate(s2, p, 4096);  // another thread, another stream
    reused = cache.allocate(s2, 4096);
    cache.deallocate(s2, reused, 4096);
  }}.join();
  EXPECT_EQ(reused, p);
  EXPECT_EQ(upstream.allocations(), 1);
  EXPECT_EQ(upstream.deallocations(), 1);  // at that thread's exit
}

TEST(ThreadCacheAdaptor, CapSendsTheExcessStraightUpstream)
{
  fake_resource upstream;
  thread_cache_options options;
  options.max_cached_bytes_per_thread = 4096;
  thread_cache_adaptor<fake_resource> cache{upstream, options};
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) {
    blocks.push_back(cache.allocate(s1, 1024));
  }
  for (void* p : blocks) {
    cache.deallocate(s1, p, 1024);
  }
  EXPECT_EQ(upstream.deallocations(), 1);
  EXPECT_EQ(cache.statistics().cached_bytes, 4096u);
}

TEST(ThreadCacheAdaptor, LargeAndOverAlignedAllocationsBypassTheCache)
{
  fake_resource upstream;
  thread_cache_options options;
  options.max_block_size = 64 << 10;
  thread_cache_adaptor<fake_resource> cache{upstream, options};
  void* big = cache.allocate(s1, (64 << 10) + 1);
  cache.deallocate(s1, big, (64 << 10) + 1);
  EXPECT_EQ(upstream.deallocations(), 1);
  void* aligned = cache.allocate(s1, 100, 512);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % 512, 0u);
  cache.deallocate(s1, aligned, 100, 512);
  EXPECT_EQ(upstream.deallocations(), 2);
  auto const st = cache.statistics();
  EXPECT_EQ(st.bypasses, 2u);
  EXPECT_EQ(st.hits + st.misses, 0u);
  EXPECT_EQ(st.cached_bytes, 0u);
  EXPECT_EQ(cache.allocate(s1, 0), nullptr);
  cache.deallocate(s1, nullptr, 0);
}

TEST(ThreadCacheAdaptor, SyncCallsGoToTheUpstream)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  void* p = cache.allocate_sync(256);
  cache.deallocate_sync(p, 256);
  EXPECT_EQ(upstream.allocations(), 1);
  EXPECT_EQ(upstream.deallocations(), 1);
  EXPECT_EQ(cache.statistics().cached_bytes, 0u);
}

TEST(ThreadCacheAdaptor, StreamsBeyondTheLimitReturnTheLeastRecentlyUsed)
{
  fake_resource upstream;
  thread_cache_options options;
  options.max_streams_per_thread = 2;
  thread_cache_adaptor<fake_resource> cache{upstream, options};
  void* a = cache.allocate(s1, 256);
  void* b = cache.allocate(s2, 256);
  void* c = cache.allocate(s3, 256);  // a third stream: s1's (empty) list is reused
  EXPECT_EQ(cache.statistics().flushes, 0u);
  cache.deallocate(s2, b, 256);
  cache.deallocate(s3, c, 256);
  cache.deallocate(s1, a, 256);  // s2 is the least recently used: its block goes upstream
  EXPECT_EQ(upstream.deallocations(), 1);
  EXPECT_EQ(cache.statistics().flushes, 1u);
  EXPECT_EQ(cache.allocate(s3, 256), c);
  EXPECT_EQ(cache.allocate(s1, 256), a);
  EXPECT_EQ(upstream.allocations(), 3);
  void* d = cache.allocate(s2, 256);  // s2's block went upstream: a new allocation
  EXPECT_EQ(upstream.allocations(), 4);
  cache.deallocate(s1, a, 256);
  cache.deallocate(s2, d, 256);
  cache.deallocate(s3, c, 256);
}

TEST(ThreadCacheAdaptor, ZeroStreamsIsRejected)
{
  thread_cache_options options;
  options.max_streams_per_thread = 0;
  try {
    thread_cache_adaptor<fake_resource> cache{fake_resource{}, options};
    FAIL() << "no exception";
  } catch (std::invalid_argument const& e) {
    EXPECT_NE(std::string{e.what()}.find("max_streams_per_thread"), std::string::npos);
  }
}

TEST(ThreadCacheAdaptor, CopiesShareOneCacheAndTheLastReturnsEverything)
{
  fake_resource upstream;
  std::barrier sync{2};
  std::thread worker;
  {
    auto original = std::make_unique<thread_cache_adaptor<fake_resource>>(upstream);
    auto copy     = *original;
    EXPECT_TRUE(copy == *original);
    EXPECT_FALSE(copy == thread_cache_adaptor<fake_resource>{upstream});
    void* p = original->allocate(s1, 256);
    copy.deallocate(s1, p, 256);
    EXPECT_EQ(copy.allocate(s1, 256), p);
    copy.deallocate(s1, p, 256);
    worker = std::thread{[&, copy]() mutable {
      void* q = copy.allocate(s2, 8192);
      copy.deallocate(s2, q, 8192);
      sync.arrive_and_wait();  // cached; the thread lives on
      sync.arrive_and_wait();
    }};
    sync.arrive_and_wait();
    original.reset();
    EXPECT_EQ(upstream.deallocations(), 0);  // a copy still lives
    EXPECT_EQ(copy.statistics().cached_bytes, 256u + 8192u);
  }
  // The worker's lambda holds the last copy: when it finishes, everything goes back.
  sync.arrive_and_wait();
  worker.join();
  EXPECT_EQ(upstream.deallocations(), 2);
  EXPECT_EQ(upstream.allocations(), 2);
}

TEST(ThreadCacheAdaptor, DestroyingTheAdaptorEmptiesCachesOfLiveThreads)
{
  fake_resource upstream;
  std::barrier sync{2};
  auto cache = std::make_unique<thread_cache_adaptor<fake_resource>>(upstream);
  std::thread worker{[&] {
    void* q = cache->allocate(s2, 8192);
    cache->deallocate(s2, q, 8192);
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // the adaptor is gone now; exiting must not touch it
  }};
  sync.arrive_and_wait();
  void* p = cache->allocate(s1, 256);
  cache->deallocate(s1, p, 256);
  cache.reset();
  EXPECT_EQ(upstream.deallocations(), 2);
  sync.arrive_and_wait();
  worker.join();
  EXPECT_EQ(upstream.deallocations(), 2);
}

TEST(ThreadCacheAdaptor, OutOfMemoryFlushesEveryThreadAndRetries)
{
  limited_resource upstream{16 << 10};
  thread_cache_adaptor<limited_resource> cache{upstream};
  std::barrier sync{2};
  std::thread holder{[&] {  // caches 12 KiB and stays alive
    std::vector<void*> blocks;
    for (int i = 0; i < 12; ++i) {
      blocks.push_back(cache.allocate(s2, 1024));
    }
    for (void* p : blocks) {
      cache.deallocate(s2, p, 1024);
    }
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  }};
  sync.arrive_and_wait();
  EXPECT_EQ(upstream.used(), 12u << 10);
  void* big = cache.allocate(s1, 8 << 10);  // needs the other thread's cached blocks
  EXPECT_NE(big, nullptr);
  auto const st = cache.statistics();
  EXPECT_EQ(st.flushes, 1u);
  EXPECT_EQ(st.cached_bytes, 0u);
  EXPECT_EQ(upstream.used(), 8u << 10);
  // Truly exhausted: out_of_memory reaches the caller, and the adaptor keeps working.
  EXPECT_THROW((void)cache.allocate(s1, 12 << 10), rmm_next::out_of_memory);
  cache.deallocate(s1, big, 8 << 10);
  void* again = cache.allocate(s1, 8 << 10);
  EXPECT_EQ(again, big);
  cache.deallocate(s1, again, 8 << 10);
  sync.arrive_and_wait();
  holder.join();
}

/** Frees through the adaptor from a thread-local destructor that runs after the cache table's. */
struct late_free {
  thread_cache_adaptor<fake_resource>* cache{};
  void* ptr{};
  ~late_free()
  {
    if (ptr != nullptr) { cache->deallocate(s1, ptr, 256); }
  }
};

TEST(ThreadCacheAdaptor, FreesFromLateThreadLocalDestructorsGoUpstream)
{
  fake_resource upstream;
  thread_cache_adaptor<fake_resource> cache{upstream};
  std::thread{[&] {
    thread_local late_free holder;  // constructed before the table: destroyed after it
    holder.cache = &cache;
    holder.ptr   = cache.allocate(s1, 256);
  }}.join();
  EXPECT_EQ(upstream.allocations(), 1);
  EXPECT_EQ(upstream.deallocations(), 1);
}

TEST(ThreadCacheAdaptor, ConcurrentThreadsNeverShareABlock)
{
  fake_resource upstream;
  thread_cache_options options;
  options.max_cached_bytes_per_thread = 256 << 10;
  options.max_streams_per_thread      = 2;  // three streams: lists get recycled too
  constexpr int threads               = 8;
  constexpr int iterations            = 4000;
  {
    thread_cache_adaptor<fake_resource> cache{upstream, options};
    std::mutex mutex;
    std::set<void*> live;
    std::vector<std::pair<void*, std::size_t>> handoff;  // blocks passed between threads
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng{static_cast<unsigned>(t)};
        std::vector<std::pair<void*, std::size_t>> mine;
        cuda::stream_ref const streams[] = {s1, s2, s3};
        for (int i = 0; i < iterations; ++i) {
          auto const stream = streams[rng() % 3];
          if (mine.size() < 16 && rng() % 2 == 0) {
            std::size_t const bytes = 256 + rng() % (32 << 10);
            void* p                 = cache.allocate(stream, bytes);
            std::memset(p, t, bytes);  // host memory: the block is really ours
            {
              std::lock_guard lock{mutex};
              ASSERT_TRUE(live.insert(p).second) << "block handed out twice";
            }
            mine.emplace_back(p, bytes);
          } else if (!mine.empty()) {
            auto [p, bytes] = mine.back();
            mine.pop_back();
            std::lock_guard lock{mutex};
            live.erase(p);
            if (rng() % 4 == 0) {  // another thread frees it
              handoff.emplace_back(p, bytes);
              continue;
            }
            cache.deallocate(stream, p, bytes);
          }
          std::pair<void*, std::size_t> foreign{};
          {
            std::lock_guard lock{mutex};
            if (!handoff.empty()) {
              foreign = handoff.back();
              handoff.pop_back();
            }
          }
          if (foreign.first != nullptr) { cache.deallocate(stream, foreign.first, foreign.second); }
        }
        for (auto [p, bytes] : mine) {
          {
            std::lock_guard lock{mutex};
            live.erase(p);
          }
          cache.deallocate(s1, p, bytes);
        }
      });
    }
    for (auto& w : workers) {
      w.join();
    }
    for (auto [p, bytes] : handoff) {
      cache.deallocate(s2, p, bytes);
    }
    auto const st = cache.statistics();
    EXPECT_GT(st.hits, 0u);
    EXPECT_EQ(st.misses, static_cast<std::uint64_t>(upstream.allocations()));
  }
  EXPECT_EQ(upstream.allocations(), upstream.deallocations());
}

}  // namespace
