/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of failure_callback_adaptor over a fake upstream of limited capacity: the callback's
// arguments (bytes, stream, attempt), retries while it returns true, the upstream's own
// out_of_memory rethrown when it returns false, other exceptions passed through untouched, a
// callback that spills by freeing blocks through the same adaptor, shared state of copies,
// spilling from 8 threads at once, and the exception type that calls the callback (RMM's
// ExceptionType: bad_alloc, a narrower type, std::bad_alloc).

#include "support/fake_resource.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/failure_callback_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmm_next::test {
namespace {

/** @brief An out_of_memory of a type of its own, to see that the type survives the rethrow. */
class pool_exhausted : public out_of_memory {
 public:
  using out_of_memory::out_of_memory;
};

/**
 * @brief Host memory with a capacity: past it, out_of_memory naming the request and what is in
 * use. Copies share the capacity. `next_error` makes the next allocation throw something else.
 */
class limited_resource {
 public:
  enum class error { none, bad_alloc, runtime_error, pool_exhausted };

  explicit limited_resource(std::size_t capacity) : state_{std::make_shared<state>(capacity)} {}

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    state_->attempts.fetch_add(1);
    switch (state_->next_error.exchange(error::none)) {
      case error::bad_alloc: throw bad_alloc{"rmm_next::limited_resource: bad alignment"};
      case error::runtime_error: throw std::runtime_error{"limited_resource: broken"};
      case error::pool_exhausted: throw pool_exhausted{"rmm_next::out_of_memory: exhausted"};
      case error::none: break;
    }
    {
      std::lock_guard const lock{state_->mutex};
      if (state_->used + bytes > state_->capacity) {
        throw out_of_memory{"rmm_next::out_of_memory: " + std::to_string(bytes) + " bytes with " +
                            std::to_string(state_->used) + " of " +
                            std::to_string(state_->capacity) + " in use"};
      }
      state_->used += bytes;
    }
    return state_->memory.allocate_sync(bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment)
  {
    if (ptr == nullptr) { return; }
    state_->memory.deallocate_sync(ptr, bytes, alignment);
    std::lock_guard const lock{state_->mutex};
    state_->used -= bytes;
  }
  [[nodiscard]] void* allocate(cuda::stream_ref, std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(cuda::stream_ref, void* ptr, std::size_t bytes, std::size_t alignment)
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  // CCCL 3.0 members (cuda::mr::resource / async_resource before CCCL 3.1).
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment)
  {
    deallocate_sync(ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, cuda::stream_ref)
  {
    deallocate_sync(ptr, bytes, alignment);
  }

  [[nodiscard]] std::size_t used() const
  {
    std::lock_guard const lock{state_->mutex};
    return state_->used;
  }
  [[nodiscard]] long attempts() const noexcept { return state_->attempts.load(); }
  [[nodiscard]] long allocations() const noexcept { return state_->memory.allocations(); }
  [[nodiscard]] long deallocations() const noexcept { return state_->memory.deallocations(); }
  void fail_next_with(error e) noexcept { state_->next_error.store(e); }

  friend bool operator==(limited_resource const& lhs, limited_resource const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }
  friend constexpr void get_property(limited_resource const&, cuda::mr::device_accessible) noexcept
  {
  }

 private:
  struct state {
    explicit state(std::size_t c) : capacity{c} {}
    std::size_t capacity;
    mutable std::mutex mutex;
    std::size_t used{0};
    std::atomic<long> attempts{0};
    std::atomic<error> next_error{error::none};
    fake_resource memory;
  };
  std::shared_ptr<state> state_;
};

using adaptor = failure_callback_adaptor<limited_resource>;

cuda::stream_ref stream_a() { return cuda::stream_ref{reinterpret_cast<cudaStream_t>(0x5a)}; }

/** @brief One call of a callback. */
struct call {
  std::size_t bytes;
  cudaStream_t stream;
  std::size_t attempt;
  friend bool operator==(call const&, call const&) = default;
};

/** @brief A callback that records its calls and answers true `retries` times per allocation. */
struct recorder {
  std::shared_ptr<std::vector<call>> calls = std::make_shared<std::vector<call>>();
  std::size_t retries                      = 0;
  bool operator()(std::size_t bytes, cuda::stream_ref stream, std::size_t attempt) const
  {
    calls->push_back({bytes, stream.get(), attempt});
    return attempt <= retries;
  }
};

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(
  rmm_next::detail::stream_ordered_resource_with<failure_callback_adaptor<fake_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<failure_callback_adaptor<fake_resource>,
                                                          cuda::mr::device_accessible,
                                                          cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<failure_callback_adaptor<async_device_resource>,
                                                 cuda::mr::device_accessible>);
static_assert(
  !cuda::has_property<failure_callback_adaptor<async_device_resource>, cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<failure_callback_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(rmm_next::detail::stream_ordered_resource_with<
              failure_callback_adaptor<thread_cache_adaptor<async_device_resource>>,
              cuda::mr::device_accessible>);
static_assert(
  rmm_next::detail::synchronous_resource_with<failure_callback_adaptor<device_resource_ref>,
                                              cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<failure_callback_adaptor<device_resource_ref>>);
static_assert(!cuda::has_property<adaptor, cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<device_async_resource_ref, adaptor&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      failure_callback_adaptor<fake_resource>&>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);
// A failure_callback_adaptor over a ref to another one is not a copy of it.
static_assert(
  !std::is_constructible_v<adaptor, failure_callback_adaptor<device_async_resource_ref>&>);

// ---- Passing through ----------------------------------------------------------------------------

TEST(failure_callback_adaptor, WithoutFailuresTheCallbackIsNeverCalled)
{
  limited_resource upstream{1 << 20};
  recorder r;
  adaptor a{upstream, r};
  void* p = a.allocate(stream_a(), 1000);
  void* q = a.allocate_sync(24, 64);
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % 64, 0U);
  EXPECT_EQ(upstream.used(), 1024U);
  a.deallocate(stream_a(), p, 1000);
  a.deallocate_sync(q, 24, 64);
  EXPECT_EQ(upstream.used(), 0U);
  EXPECT_EQ(upstream.allocations(), 2);
  EXPECT_EQ(upstream.deallocations(), 2);
  EXPECT_TRUE(r.calls->empty());
  EXPECT_EQ(a.allocate(stream_a(), 0), nullptr);  // what the upstream returns, untouched
  EXPECT_TRUE(a.upstream_resource() == upstream);
}

TEST(failure_callback_adaptor, OtherExceptionsPassThroughWithoutTheCallback)
{
  limited_resource upstream{1 << 20};
  recorder r;
  r.retries = 100;
  adaptor a{upstream, r};
  upstream.fail_next_with(limited_resource::error::bad_alloc);
  try {
    (void)a.allocate(stream_a(), 64);
    FAIL() << "no exception";
  } catch (out_of_memory const&) {
    FAIL() << "a bad_alloc became out_of_memory";
  } catch (bad_alloc const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::limited_resource: bad alignment");
  }
  upstream.fail_next_with(limited_resource::error::runtime_error);
  try {
    (void)a.allocate_sync(64);
    FAIL() << "no exception";
  } catch (std::runtime_error const& e) {
    EXPECT_STREQ(e.what(), "limited_resource: broken");
  }
  EXPECT_TRUE(r.calls->empty());
  EXPECT_EQ(upstream.attempts(), 2);  // no retry either
}

// ---- Retrying -----------------------------------------------------------------------------------

TEST(failure_callback_adaptor, RetriesWhileTheCallbackSaysSoThenRethrowsTheUpstreamsError)
{
  limited_resource upstream{1000};
  recorder r;
  r.retries = 3;
  adaptor a{upstream, r};
  try {
    (void)a.allocate(stream_a(), 4096);
    FAIL() << "no exception";
  } catch (out_of_memory const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::out_of_memory: 4096 bytes with 0 of 1000 in use");
  }
  // Called after each of the 4 failed attempts; true three times, then false.
  std::vector<call> const expected{{4096, stream_a().get(), 1},
                                   {4096, stream_a().get(), 2},
                                   {4096, stream_a().get(), 3},
                                   {4096, stream_a().get(), 4}};
  EXPECT_EQ(*r.calls, expected);
  EXPECT_EQ(upstream.attempts(), 4);

  // Each allocation counts its own attempts from 1; allocate_sync names the default stream.
  r.calls->clear();
  EXPECT_THROW((void)a.allocate_sync(2000), out_of_memory);
  std::vector<call> const sync_expected{
    {2000, nullptr, 1}, {2000, nullptr, 2}, {2000, nullptr, 3}, {2000, nullptr, 4}};
  EXPECT_EQ(*r.calls, sync_expected);

  // It works afterwards.
  void* p = a.allocate(stream_a(), 1000);
  EXPECT_NE(p, nullptr);
  a.deallocate(stream_a(), p, 1000);
  EXPECT_EQ(upstream.used(), 0U);
}

TEST(failure_callback_adaptor, TheRethrownErrorKeepsItsType)
{
  limited_resource upstream{1000};
  adaptor a{upstream, [](std::size_t, cuda::stream_ref, std::size_t) { return false; }};
  upstream.fail_next_with(limited_resource::error::pool_exhausted);
  try {
    (void)a.allocate(stream_a(), 8);
    FAIL() << "no exception";
  } catch (pool_exhausted const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::out_of_memory: exhausted");
  }
}

TEST(failure_callback_adaptor, AnExceptionOfTheCallbackReachesTheCaller)
{
  limited_resource upstream{10};
  adaptor a{upstream, [](std::size_t bytes, cuda::stream_ref, std::size_t) -> bool {
              throw std::length_error{"spill failed for " + std::to_string(bytes)};
            }};
  try {
    (void)a.allocate(stream_a(), 64);
    FAIL() << "no exception";
  } catch (std::length_error const& e) {
    EXPECT_STREQ(e.what(), "spill failed for 64");
  }
  EXPECT_EQ(upstream.attempts(), 1);
}

TEST(failure_callback_adaptor, AnEmptyCallbackIsRefused)
{
  try {
    adaptor const a{limited_resource{10}, failure_callback{}};
    FAIL() << "constructed";
  } catch (logic_error const& e) {
    EXPECT_STREQ(e.what(),
                 "rmm_next::failure_callback_adaptor: the callback is empty; pass a callable "
                 "bool(std::size_t bytes, cuda::stream_ref stream, std::size_t attempt)");
  }
}

// ---- The exception type (RMM's ExceptionType) ---------------------------------------------------

static_assert(std::is_same_v<adaptor::exception_type, out_of_memory>);
static_assert(
  std::is_same_v<failure_callback_adaptor<limited_resource, bad_alloc>::exception_type, bad_alloc>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<failure_callback_adaptor<fake_resource, bad_alloc>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<device_async_resource_ref,
                                      failure_callback_adaptor<limited_resource, bad_alloc>&>);
static_assert(std::is_same_v<decltype(failure_callback_adaptor{fake_resource{}, recorder{}}),
                             failure_callback_adaptor<fake_resource>>);  // the guide: out_of_memory

TEST(failure_callback_adaptor, ChosenExceptionTypeCallsTheCallbackForItAndItsDerivedTypes)
{
  // As RMM's failure_callback_resource_adaptor<rmm::bad_alloc>: bad_alloc and out_of_memory (a
  // bad_alloc) both call the callback; the error it gives up on is rethrown as it was.
  limited_resource upstream{1000};
  recorder r;
  r.retries = 1;
  failure_callback_adaptor<limited_resource, bad_alloc> a{upstream, r};
  upstream.fail_next_with(limited_resource::error::bad_alloc);
  void* p = a.allocate(stream_a(), 64);  // bad_alloc, callback, retried: succeeds
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*r.calls, (std::vector<call>{{64, stream_a().get(), 1}}));
  EXPECT_EQ(upstream.attempts(), 2);

  r.calls->clear();
  try {
    (void)a.allocate_sync(4096);  // out_of_memory twice: called, retried, called, rethrown
    FAIL() << "no exception";
  } catch (out_of_memory const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::out_of_memory: 4096 bytes with 64 of 1000 in use");
  }
  EXPECT_EQ(*r.calls, (std::vector<call>{{4096, nullptr, 1}, {4096, nullptr, 2}}));

  recorder gives_up;  // retries 0: the first bad_alloc is rethrown
  failure_callback_adaptor<limited_resource, bad_alloc> b{upstream, gives_up};
  upstream.fail_next_with(limited_resource::error::bad_alloc);
  try {
    (void)b.allocate(stream_a(), 8);
    FAIL() << "no exception";
  } catch (out_of_memory const&) {
    FAIL() << "a bad_alloc became out_of_memory";
  } catch (bad_alloc const& e) {
    EXPECT_STREQ(e.what(), "rmm_next::limited_resource: bad alignment");
  }
  EXPECT_EQ(*gives_up.calls, (std::vector<call>{{8, stream_a().get(), 1}}));

  // Not a bad_alloc: straight to the caller, no callback.
  r.calls->clear();
  upstream.fail_next_with(limited_resource::error::runtime_error);
  EXPECT_THROW((void)a.allocate(stream_a(), 8), std::runtime_error);
  EXPECT_TRUE(r.calls->empty());
  a.deallocate(stream_a(), p, 64);
  EXPECT_EQ(upstream.used(), 0U);
}

TEST(failure_callback_adaptor, ANarrowerExceptionTypeLetsOutOfMemoryThrough)
{
  limited_resource upstream{1000};
  recorder r;
  r.retries = 5;
  failure_callback_adaptor<limited_resource, pool_exhausted> a{upstream, r};
  EXPECT_THROW((void)a.allocate(stream_a(), 4096), out_of_memory);  // not a pool_exhausted
  EXPECT_TRUE(r.calls->empty());
  upstream.fail_next_with(limited_resource::error::pool_exhausted);
  void* p = a.allocate(stream_a(), 8);  // called once, retried
  EXPECT_EQ(r.calls->size(), 1U);
  a.deallocate(stream_a(), p, 8);
}

TEST(failure_callback_adaptor, StdBadAllocCatchesHostAllocationFailuresToo)
{
  // fake_resource throws std::bad_alloc when std::aligned_alloc fails: here, for a size no host
  // can hold. The callback sees it only when asked for std::bad_alloc.
  std::size_t const huge = std::size_t{1} << 62;
  recorder r;
  failure_callback_adaptor<fake_resource> oom_only{fake_resource{}, r};
  EXPECT_THROW((void)oom_only.allocate_sync(huge), std::bad_alloc);
  EXPECT_TRUE(r.calls->empty());
  failure_callback_adaptor<fake_resource, std::bad_alloc> any_bad_alloc{fake_resource{}, r};
  EXPECT_THROW((void)any_bad_alloc.allocate_sync(huge), std::bad_alloc);
  EXPECT_EQ(*r.calls, (std::vector<call>{{huge, nullptr, 1}}));
}

// ---- Spilling -----------------------------------------------------------------------------------

TEST(failure_callback_adaptor, SpillsByFreeingBlocksThroughTheSameAdaptorThenSucceeds)
{
  constexpr std::size_t block = 256;
  limited_resource upstream{4 * block};
  std::deque<void*> spillable;  // the blocks the application may give up, oldest first
  std::vector<std::size_t> attempts;
  std::shared_ptr<adaptor> self;  // the callback frees through the adaptor that calls it
  self = std::make_shared<adaptor>(
    upstream, [&](std::size_t bytes, cuda::stream_ref stream, std::size_t attempt) {
      attempts.push_back(attempt);
      EXPECT_EQ(stream.get(), stream_a().get());
      if (spillable.empty()) { return false; }
      EXPECT_EQ(bytes, 3 * block);
      self->deallocate(stream, spillable.front(), block);  // one block per call: count retries
      spillable.pop_front();
      return true;
    });
  adaptor& a = *self;
  for (int i = 0; i < 4; ++i) {
    spillable.push_back(a.allocate(stream_a(), block));
  }
  EXPECT_EQ(upstream.used(), 4 * block);

  void* big = a.allocate(stream_a(), 3 * block);  // three blocks must go
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(attempts, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(spillable.size(), 1U);
  EXPECT_EQ(upstream.used(), 4 * block);
  EXPECT_EQ(upstream.attempts(), 4 + 4);

  // Nothing left to spill: the callback says no, and the caller sees the upstream's error.
  attempts.clear();
  spillable.clear();
  EXPECT_THROW((void)a.allocate(stream_a(), 2 * block), out_of_memory);
  EXPECT_EQ(attempts, (std::vector<std::size_t>{1}));
  a.deallocate(stream_a(), big, 3 * block);
  EXPECT_EQ(upstream.used(), block);  // the block the test forgot above
  self.reset();
}

TEST(failure_callback_adaptor, CopiesShareTheCallback)
{
  limited_resource upstream{10};
  recorder r;
  r.retries = 1;
  adaptor a{upstream, r};
  adaptor b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
  adaptor c{upstream, r};
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  EXPECT_THROW((void)b.allocate(stream_a(), 64), out_of_memory);
  EXPECT_EQ(r.calls->size(), 2U);

  // Through a ref, as libraries hold it.
  device_async_resource_ref ref{a};
  EXPECT_THROW((void)ref.allocate(stream_a(), 64, default_alignment), out_of_memory);
  EXPECT_EQ(r.calls->size(), 4U);
  void* p = ref.allocate(stream_a(), 8, default_alignment);
  ref.deallocate(stream_a(), p, 8, default_alignment);
  EXPECT_EQ(upstream.used(), 0U);
}

TEST(failure_callback_adaptor, OverARef)
{
  limited_resource upstream{100};
  recorder r;
  failure_callback_adaptor<device_async_resource_ref> a{device_async_resource_ref{upstream}, r};
  EXPECT_THROW((void)a.allocate(stream_a(), 200), out_of_memory);
  EXPECT_EQ(r.calls->size(), 1U);
  void* p = a.allocate_sync(100);
  EXPECT_EQ(upstream.used(), 100U);
  a.deallocate_sync(p, 100);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST(failure_callback_adaptor, ThreadsSpillEachOthersBlocksWithoutLosingAny)
{
  constexpr int threads       = 8;
  constexpr int rounds        = 2000;
  constexpr std::size_t block = 256;
  limited_resource upstream{threads * block * 2};  // room for about 1.3 blocks per thread

  std::mutex spill_mutex;  // the test's own lock, never held by the adaptor
  std::deque<std::pair<void*, std::size_t>> spillable;
  std::atomic<long> callbacks{0};
  std::atomic<long> spilled{0};
  std::atomic<bool> overlapped{false};
  std::atomic<int> inside{0};
  std::shared_ptr<adaptor> self;
  self = std::make_shared<adaptor>(
    upstream, [&](std::size_t, cuda::stream_ref stream, std::size_t attempt) {
      callbacks.fetch_add(1);
      if (inside.fetch_add(1) > 0) { overlapped.store(true); }  // no lock around the callback
      std::pair<void*, std::size_t> victim{nullptr, 0};
      {
        std::lock_guard const lock{spill_mutex};
        if (!spillable.empty()) {
          victim = spillable.front();
          spillable.pop_front();
        }
      }
      if (victim.first != nullptr) {
        self->deallocate(stream, victim.first, victim.second);
        spilled.fetch_add(1);
      } else {
        std::this_thread::yield();  // another thread holds the memory: let it go on
      }
      inside.fetch_sub(1);
      return attempt < 100000;
    });

  std::vector<std::thread> pool;
  std::atomic<long> allocated{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      adaptor a = *self;  // a copy per thread, sharing the callback
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes = block * static_cast<std::size_t>(1 + (i + t) % 2);
        void* p                 = a.allocate(stream_a(), bytes);
        allocated.fetch_add(1);
        std::lock_guard const lock{spill_mutex};
        spillable.emplace_back(p, bytes);
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  EXPECT_EQ(allocated.load(), threads * rounds);
  EXPECT_GT(callbacks.load(), 0);
  // Every block was either spilled or is still spillable: none lost, none freed twice.
  EXPECT_EQ(upstream.allocations(), threads * rounds);
  EXPECT_EQ(upstream.deallocations(), spilled.load());
  EXPECT_EQ(static_cast<long>(spillable.size()) + spilled.load(), threads * rounds);
  std::size_t in_use = 0;
  for (auto const& [p, bytes] : spillable) {
    in_use += bytes;
  }
  EXPECT_EQ(upstream.used(), in_use);
  EXPECT_LE(in_use, threads * block * 2);
  for (auto const& [p, bytes] : spillable) {
    self->deallocate(stream_a(), p, bytes);
  }
  EXPECT_EQ(upstream.used(), 0U);
  std::printf("callbacks %ld, spilled %ld, callbacks overlapped: %s\n",
              callbacks.load(),
              spilled.load(),
              overlapped.load() ? "yes" : "no");
  self.reset();
}

}  // namespace
}  // namespace rmm_next::test
