/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// segment_cache_adaptor on a GPU: kernels prove that reused blocks keep stream order (on one
// stream from two threads, and across streams through fences), that the legacy default stream is
// one lane for every thread of a context, that frees on a capturing stream leave the capture
// intact in every mode, that a destroyed second context poisons nothing, that trim() leaves the
// pool's used bytes at the segments of live blocks, that an exited thread's per-thread default
// stream and a segment freed only on other streams leave nothing behind, and the typed errors
// near SIZE_MAX.

#include "support/device_fill_check.cuh"
#include "support/kernels.cuh"
#include "support/second_context.hpp"
#include "support/stream_guard.hpp"
#include "support/unknown_device.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using cache = rmm_next::segment_cache_adaptor<rmm_next::async_device_resource>;
using rmm_next::async_device_resource;
using rmm_next::test::check;
using rmm_next::test::fill;
using rmm_next::test::mismatch_counter;
using word = std::uint32_t;
using rmm_next::test::second_context;
using rmm_next::test::stream_guard;

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

constexpr std::size_t MiB        = std::size_t{1} << 20;
constexpr std::size_t busy_bytes = 3 * MiB;  // a medium block, in a shared medium segment

/** Keeps writing `value` into the block on `stream` for `ns` nanoseconds after its free there. */
void keep_writing(void* p,
                  std::size_t bytes,
                  word value,
                  cudaStream_t stream,
                  unsigned long long ns = 300'000'000ULL)
{
  rmm_next::test::keep_writing_kernel<<<1, 256, 0, stream>>>(
    static_cast<word*>(p), bytes / sizeof(word), value, ns);
}

async_device_resource owned_pool()
{
  rmm_next::pool_options options;
  return async_device_resource{options};
}

/**
 * Allocates and frees blocks of `bytes` on `stream` (by default this thread's per-thread default
 * stream) until more of its frees than `unproven_before` are past its lane's fences (later ones
 * while a kernel writes `value` for `ns`).
 * @return the statistics after the last free.
 */
rmm_next::segment_cache_statistics free_past_the_fences(cache& segments,
                                                        std::uint64_t unproven_before,
                                                        word value,
                                                        unsigned long long ns,
                                                        cudaStream_t stream = cudaStreamPerThread,
                                                        std::size_t bytes   = busy_bytes)
{
  cuda::stream_ref const own{stream};
  rmm_next::segment_cache_statistics st{};
  for (int i = 0; i < 4096 && (i < 1024 || st.unproven_bytes == unproven_before); ++i) {
    void* p = segments.allocate(own, bytes);
    if (i >= 1024) { keep_writing(p, bytes, value, stream, ns); }
    segments.deallocate(own, p, bytes);
    st = segments.statistics();
  }
  return st;
}

/** Options that keep every idle segment until a trim. */
rmm_next::segment_cache_options keeping_idle_segments()
{
  rmm_next::segment_cache_options options;
  options.max_idle_bytes = std::size_t{1} << 40;
  return options;
}

/**
 * Expects what `pool` hands out next to hold its new user's pattern: memory the cache gave back
 * went back behind the kernels still writing it.
 */
void expect_the_pools_next_user_reads_its_own_writes(async_device_resource& pool, word value)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  void* q = pool.allocate(stream, busy_bytes);  // the pool's, behind the relayed free
  mismatch_counter mismatches;
  fill(q, busy_bytes, value, stream);
  CHECK_CUDA(cudaDeviceSynchronize());  // the kernel, had it not been waited for, writes on
  check(q, busy_bytes, value, stream, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  pool.deallocate(stream, q, busy_bytes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

/** Expects `segments` to serve and take back a block on a new stream of this thread, error-free. */
void expect_the_cache_goes_on(cache& segments)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  void* r                   = segments.allocate(stream, busy_bytes);
  segments.deallocate(stream, r, busy_bytes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

std::uint64_t lane_on_new_thread(cudaStream_t stream)
{
  std::uint64_t lane = 0;
  std::thread{[&] { lane = rmm_next::detail::stream_lane(stream); }}.join();
  return lane;
}

TEST(SegmentCacheAdaptorGpu, TheLegacyStreamIsOneLaneForEveryThreadOfAContext)
{
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the primary context, current on this thread
  std::uint64_t const zero = rmm_next::detail::stream_lane(cudaStream_t{});
  EXPECT_NE(zero, 0u);
  EXPECT_EQ(rmm_next::detail::stream_lane(cudaStreamLegacy), zero);
  // Another thread: the runtime makes the primary context current there on its first call.
  std::uint64_t other = 0;
  std::thread{[&] {
    (void)cudaFree(nullptr);
    other = rmm_next::detail::stream_lane(cudaStream_t{});
  }}.join();
  EXPECT_EQ(other, zero);
  // The per-thread default stream is a stream of each thread's own.
  std::uint64_t const mine = rmm_next::detail::stream_lane(cudaStreamPerThread);
  EXPECT_NE(mine, zero);
  EXPECT_NE(lane_on_new_thread(cudaStreamPerThread), mine);
  // A second context has a legacy stream of its own.
  second_context ctx2;
  CUcontext const primary = rmm_next::detail::current_context_or_null();
  ctx2.make_current();
  std::uint64_t const second = rmm_next::detail::stream_lane(cudaStream_t{});
  ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  EXPECT_NE(second, 0u);
  EXPECT_NE(second, zero);
  EXPECT_EQ(rmm_next::detail::stream_lane(cudaStream_t{}), zero);  // back in the primary context
}

// An eager_stream_scope (the allocator plugin's, around a call into the cache) vouches only for its
// own stream, only on its thread and only while it lasts: outside it a captured stream is asked,
// and found captured, again. The capture (relaxed mode, so that nothing else is refused) ends
// intact: no question the scopes answered reached the driver as one a capture refuses.
TEST(SegmentCacheAdaptorGpu, AnEagerStreamScopeVouchesForItsStreamOnItsThreadWhileItLasts)
{
  using rmm_next::detail::eager_stream_scope;
  using rmm_next::detail::stream_is_eager;
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  stream_guard captured_guard;
  stream_guard other_guard;
  cudaStream_t const captured = captured_guard;
  cudaStream_t const other    = other_guard;
  ASSERT_EQ(cudaStreamBeginCapture(captured, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_FALSE(stream_is_eager(captured));
  {
    eager_stream_scope const outer{captured};
    EXPECT_TRUE(stream_is_eager(captured));  // vouched for: the driver is not asked
    EXPECT_TRUE(stream_is_eager(other));     // asked, and eager
    bool elsewhere = true;
    std::thread{[&] { elsewhere = stream_is_eager(captured); }}.join();
    EXPECT_FALSE(elsewhere) << "a scope vouches on its own thread only";
    {
      eager_stream_scope const inner{other};
      EXPECT_FALSE(stream_is_eager(captured)) << "the inner scope vouches for its stream only";
    }
    EXPECT_TRUE(stream_is_eager(captured)) << "the outer scope vouches again";
  }
  EXPECT_FALSE(stream_is_eager(captured)) << "no scope outlives its lifetime";
  cudaGraph_t graph{};
  EXPECT_EQ(cudaStreamEndCapture(captured, &graph), cudaSuccess);
  if (graph != nullptr) { EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess); }
}

TEST(SegmentCacheAdaptorGpu, ABlockAnotherThreadFreedOnStreamZeroIsReusedInStreamOrder)
{
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  cache segments{owned_pool()};
  void* p = nullptr;
  std::thread{[&] {
    // The runtime makes the primary context current on a thread's first call; until then the
    // legacy stream has no lane, and a default-stream allocation goes to the upstream.
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    p = segments.allocate(cudaStream_t{}, busy_bytes);
    keep_writing(p, busy_bytes, 0xdead, cudaStream_t{});
    segments.deallocate(cudaStream_t{}, p, busy_bytes);  // freed while the kernel still writes
  }}.join();
  auto const before = segments.statistics();
  void* q           = segments.allocate(cudaStream_t{}, busy_bytes);
  EXPECT_EQ(q, p);  // one lane: the block is a hit on this thread, with no fence
  EXPECT_EQ(segments.statistics().hits, before.hits + 1);
  mismatch_counter mismatches;
  fill(q, busy_bytes, 21, cudaStream_t{});  // ordered after the kernel by stream 0 itself
  check(q, busy_bytes, 21, cudaStream_t{}, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  segments.deallocate(cudaStream_t{}, q, busy_bytes);
  CHECK_CUDA(cudaDeviceSynchronize());
}

TEST(SegmentCacheAdaptorGpu, ABlockFreedOnAnotherStreamIsReusedAfterThatStreamsWork)
{
  stream_guard owner_guard;
  cudaStream_t const owner = owner_guard;
  stream_guard user_guard;
  cudaStream_t const user = user_guard;
  cache segments{owned_pool()};
  void* p = segments.allocate(owner, busy_bytes);  // a segment of `owner`'s lane
  CHECK_CUDA(cudaStreamSynchronize(owner));
  keep_writing(p, busy_bytes, 0xdead, user);
  segments.deallocate(user, p, busy_bytes);  // freed on `user`, with a fence
  void* q = segments.allocate(owner, busy_bytes);
  EXPECT_EQ(q, p);
  mismatch_counter mismatches;
  fill(q, busy_bytes, 33, owner);  // `owner` waits for the fence before this kernel
  check(q, busy_bytes, 33, owner, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  segments.deallocate(owner, q, busy_bytes);
  CHECK_CUDA(cudaDeviceSynchronize());
}

class CaptureMode : public ::testing::TestWithParam<cudaStreamCaptureMode> {};

TEST_P(CaptureMode, AFreeOnTheCapturingStreamLeavesTheCaptureIntact)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  mismatch_counter mismatches;
  cache segments{owned_pool()};
  void* before_capture = segments.allocate(stream, busy_bytes);
  fill(before_capture, busy_bytes, 5, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));

  cudaGraph_t graph{};
  CHECK_CUDA(cudaStreamBeginCapture(stream, GetParam()));
  void* in_graph = segments.allocate(stream, 4096);  // graph memory: the upstream's
  fill(in_graph, 4096, 6, stream);
  check(in_graph, 4096, 6, stream, mismatches.get());
  check(before_capture, busy_bytes, 5, stream, mismatches.get());
  segments.deallocate(stream, in_graph, 4096);
  segments.deallocate(stream, before_capture, busy_bytes);  // a cached block, freed in the graph
  cudaError_t const ended = cudaStreamEndCapture(stream, &graph);
  ASSERT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
  EXPECT_EQ(segments.statistics().graph_pending_bytes, busy_bytes);

  // Another thread, on another stream, is served while the graph has not run.
  stream_guard other_guard;
  cudaStream_t const other = other_guard;
  void* elsewhere          = nullptr;
  std::thread{[&] { elsewhere = segments.allocate(other, busy_bytes); }}.join();
  EXPECT_NE(elsewhere, before_capture);

  cudaGraphExec_t exec{};
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(mismatches.read(), 0u);
  // The graph ran past the free: the block is the cache's again, and its stream gets it.
  void* again = segments.allocate(stream, busy_bytes);
  EXPECT_EQ(again, before_capture);
  EXPECT_EQ(segments.statistics().graph_pending_bytes, 0u);
  segments.deallocate(stream, again, busy_bytes);
  segments.deallocate(other, elsewhere, busy_bytes);
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaDeviceSynchronize());
}

/** Two streams, the first captured in `mode` from construction until `end()`. */
struct beside_a_capture {
  stream_guard streams[2];
  cudaStream_t const capturing = streams[0];
  cudaStream_t const mine      = streams[1];

  explicit beside_a_capture(cudaStreamCaptureMode mode)
  {
    EXPECT_EQ(cudaStreamBeginCapture(capturing, mode), cudaSuccess);
  }
  /** Ends the capture and destroys its graph: the capture's status. */
  cudaError_t end() const
  {
    cudaGraph_t graph{};
    cudaError_t const ended = cudaStreamEndCapture(capturing, &graph);
    if (graph != nullptr) { EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess); }
    return ended;
  }
};

TEST_P(CaptureMode, AnotherThreadsCaptureSurvivesAllocationsAndFreesBesideIt)
{
  beside_a_capture c{GetParam()};
  cudaStream_t const capturing = c.capturing;
  cudaStream_t const mine      = c.mine;
  cache segments{owned_pool(), keeping_idle_segments()};  // misses counted below
  void* captured = segments.allocate(capturing, 8192);
  std::thread{[&] {
    // Relaxed: in the other modes, this thread's own calls are what the driver refuses.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    (void)cudaThreadExchangeStreamCaptureMode(&relaxed);
    for (int i = 0; i < 32; ++i) {
      void* p = segments.allocate(mine, (i % 4 + 1) * MiB);
      segments.deallocate(mine, p, (i % 4 + 1) * MiB);
    }
    (void)segments.trim(mine);
  }}.join();
  segments.deallocate(capturing, captured, 8192);
  cudaError_t const ended = c.end();
  EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
  // 1 MiB blocks share a small segment, 2 to 4 MiB ones a medium segment: two misses.
  auto const st = segments.statistics();
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(st.hits, 30u);
  CHECK_CUDA(cudaDeviceSynchronize());
}

// The same beside a capture, from a thread left in its default (global) mode: the adaptor makes
// its own upstream calls (the misses, the segments given back) in relaxed mode, so the driver
// refuses none of them and invalidates no capture.
TEST_P(CaptureMode, AThreadInGlobalModeMissesAndTrimsBesideAnotherThreadsCapture)
{
  beside_a_capture c{GetParam()};
  cudaStream_t const mine = c.mine;
  cache segments{owned_pool()};
  std::thread{[&] {
    for (int i = 0; i < 32; ++i) {
      std::size_t const bytes = (i % 4 + 1) * MiB + (i % 3 == 0 ? 24 * MiB : 0);  // some large
      void* p                 = segments.allocate(mine, bytes);
      segments.deallocate(mine, p, bytes);
    }
    (void)segments.trim(mine);
  }}.join();
  cudaError_t const ended = c.end();
  EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
  auto const st = segments.statistics();
  EXPECT_GT(st.misses, 1u);  // upstream calls were made beside the capture
  EXPECT_GT(st.released_segments, 0u);
  CHECK_CUDA(cudaDeviceSynchronize());
}

// A thread left in global mode takes segments on its per-thread default stream and exits while
// another thread captures: its exit fence (an event on its own, eager stream) and the segments
// it proves free (given back in relaxed mode) harm no capture.
TEST_P(CaptureMode, AThreadExitingBesideAnotherThreadsCaptureFencesItsStream)
{
  beside_a_capture c{GetParam()};
  cache segments{owned_pool(), keeping_idle_segments()};  // nothing goes back before the trim
  rmm_next::segment_cache_statistics before_exit{};
  std::thread{[&] {
    // The primary context current without cudaFree, which a global-mode capture would refuse.
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cuda::stream_ref const own{cudaStreamPerThread};
    for (int i = 0; i < 4096 && (i < 1024 || before_exit.unproven_bytes == 0); ++i) {
      segments.deallocate(own, segments.allocate(own, busy_bytes), busy_bytes);
      before_exit = segments.statistics();
    }
  }}.join();
  cudaError_t const ended = c.end();
  EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
  ASSERT_GT(before_exit.unproven_bytes, 0u);
  EXPECT_EQ(segments.statistics().unproven_bytes, 0u);  // the exit fenced the stream
  EXPECT_GT(segments.trim(), 0u);
  EXPECT_EQ(segments.statistics().segment_bytes, 0u);
  CHECK_CUDA(cudaDeviceSynchronize());
}

INSTANTIATE_TEST_SUITE_P(EveryMode,
                         CaptureMode,
                         ::testing::Values(cudaStreamCaptureModeGlobal,
                                           cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed),
                         [](auto const& info) {
                           switch (info.param) {
                             case cudaStreamCaptureModeGlobal: return std::string{"global"};
                             case cudaStreamCaptureModeThreadLocal: return std::string{"thread"};
                             default: return std::string{"relaxed"};
                           }
                         });

TEST(SegmentCacheAdaptorGpu, ADestroyedSecondContextPoisonsNoSegment)
{
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  stream_guard guard;
  cudaStream_t const stream = guard;
  cache segments{owned_pool()};
  void* p = segments.allocate(stream, busy_bytes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  {
    second_context ctx2;
    CUcontext const primary = rmm_next::detail::current_context_or_null();
    ctx2.make_current();
    cudaStream_t theirs{};
    CHECK_CUDA(cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking));
    keep_writing(p, busy_bytes, 0xdead, theirs, 100'000'000ULL);
    segments.deallocate(theirs, p, busy_bytes);  // a fence relayed to the primary context
    CHECK_CUDA(cudaStreamSynchronize(theirs));
    CHECK_CUDA(cudaStreamDestroy(theirs));
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  }  // the second context is destroyed here
  mismatch_counter mismatches;
  void* q = segments.allocate(stream, busy_bytes);  // waits on the relayed fence: no error
  EXPECT_EQ(q, p);
  void* r = segments.allocate(stream, 2 * MiB);  // the same segment, another block
  fill(q, busy_bytes, 8, stream);
  check(q, busy_bytes, 8, stream, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  segments.deallocate(stream, q, busy_bytes);
  segments.deallocate(stream, r, 2 * MiB);
  CHECK_CUDA(cudaDeviceSynchronize());
}

TEST(SegmentCacheAdaptorGpu, TrimLeavesThePoolsUsedBytesAtTheSegmentsOfLiveBlocks)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  auto pool                 = owned_pool();
  cache segments{pool, keeping_idle_segments()};  // what goes back, goes back on the trims
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t i = 0; i < 48; ++i) {
    std::size_t const bytes = (i % 3 == 0) ? 40 * MiB : (i % 3 == 1) ? 3 * MiB : 4096 * (i + 1);
    blocks.emplace_back(segments.allocate(stream, bytes), bytes);
  }
  std::size_t kept_bytes = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i == 3) {  // one large block stays live: a segment of its own
      kept_bytes = blocks[i].second;
      continue;
    }
    segments.deallocate(stream, blocks[i].first, blocks[i].second);
  }
  EXPECT_GT(segments.trim(stream), 0u);
  auto const st = segments.statistics();
  EXPECT_EQ(st.idle_bytes, 0u);
  EXPECT_EQ(st.unproven_bytes, 0u);
  EXPECT_EQ(st.segments, 1u);
  EXPECT_EQ(st.live_bytes, kept_bytes);
  EXPECT_EQ(st.segment_bytes, kept_bytes);  // 40 MiB: a multiple of 2 MiB
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(pool.statistics().used_bytes, kept_bytes);
  segments.deallocate(stream, blocks[3].first, kept_bytes);
  EXPECT_EQ(segments.trim(stream), kept_bytes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(pool.statistics().used_bytes, 0u);
}

/**
 * A cache over a pool of its own that keeps every idle segment until a trim, and a thread that
 * uses it and exits.
 */
class ExitFence : public ::testing::Test {
 protected:
  void SetUp() override { CHECK_CUDA(cudaFree(nullptr)); }

  /** Runs `work` on a new thread, once the runtime made the primary context current there. */
  template <class Work>
  static void on_a_thread_that_exits(Work&& work)
  {
    std::thread{[&] {
      ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
      work();
    }}.join();
  }

  async_device_resource pool{owned_pool()};
  cache segments{pool, keeping_idle_segments()};
};

// A thread frees on its per-thread default stream past the fences of its first frees, the last
// block freed while a kernel still writes it, and exits: its stream ends with it, and its exit
// fences those frees. A trim from another thread then gives every segment back, and the pool
// hands that memory out again only after the kernel: it holds this thread's pattern.
TEST_F(ExitFence, AThreadThatExitsFencesItsPerThreadStreamsLastFrees)
{
  rmm_next::segment_cache_statistics before_exit{};
  on_a_thread_that_exits(
    [&] { before_exit = free_past_the_fences(segments, 0, 0xdead, 50'000'000ULL); });
  ASSERT_GT(before_exit.unproven_bytes, 0u);
  EXPECT_GT(segments.trim(), 0u);
  auto const st = segments.statistics();
  EXPECT_EQ(st.unproven_bytes, 0u);
  EXPECT_EQ(st.segment_bytes, 0u);
  expect_the_pools_next_user_reads_its_own_writes(pool, 44);
  EXPECT_EQ(pool.statistics().used_bytes, 0u);
}

// A thread takes segments on the per-thread default stream of a second context, frees past that
// lane's fences while a kernel still writes, and destroys the context before it exits. Its exit
// must not make the destroyed context current to fence that lane (the driver refuses it, or another
// context sits at its address): the lane stays unproven, nothing is reported, and its per-thread
// stream of the primary context, used last, is fenced and goes back as usual.
TEST_F(ExitFence, AThreadWhoseSecondContextIsDestroyedExitsWithoutFencingItsLane)
{
  rmm_next::segment_cache_statistics in_second{};
  rmm_next::segment_cache_statistics before_exit{};
  on_a_thread_that_exits([&] {
    CUcontext const primary = rmm_next::detail::current_context_or_null();
    {
      second_context ctx2;
      ctx2.make_current();
      in_second = free_past_the_fences(segments, 0, 0xdead, 1'000'000ULL);
      ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
      ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
    }  // the second context is destroyed here, its per-thread stream with it
    before_exit = free_past_the_fences(segments, in_second.unproven_bytes, 0xbeef, 50'000'000ULL);
  });
  ASSERT_GT(in_second.unproven_bytes, 0u);
  ASSERT_GT(before_exit.unproven_bytes, in_second.unproven_bytes);  // the primary lane's too
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  (void)segments.trim();
  auto const st = segments.statistics();
  EXPECT_EQ(st.unproven_bytes, in_second.unproven_bytes);  // the destroyed context's lane alone
  EXPECT_EQ(st.segment_bytes, st.unproven_bytes);          // everything proven went back
  EXPECT_EQ(st.live_bytes, 0u);
  // What the primary lane gave back went back behind the exiting thread's last kernel.
  expect_the_pools_next_user_reads_its_own_writes(pool, 45);
  expect_the_cache_goes_on(segments);
}

// A stream the program made is destroyed while a kernel still writes a block freed on it, its first
// free fenced and its last ones past its lane's fences. The fenced segment goes back on a trim from
// another stream, behind the kernel; what no fence proves stays allocated from the pool (the
// stream is gone, and is not asked); nothing errs, and the cache goes on.
TEST_F(ExitFence, AStreamDestroyedWithWorkPendingGivesBackWhatItsFencesProveAndNothingElse)
{
  constexpr std::size_t large = 24 * MiB;  // a segment of its own
  cudaStream_t made{};
  CHECK_CUDA(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
  void* x = segments.allocate(made, large);
  keep_writing(x, large, 0xdead, made, 200'000'000ULL);
  segments.deallocate(made, x, large);  // the lane's first free: fenced
  // Small blocks, in a small segment of their own: a medium block would be a hit in x's segment.
  rmm_next::segment_cache_statistics const before =
    free_past_the_fences(segments, 0, 0xbeef, 1'000'000ULL, made, 512 * 1024);
  ASSERT_GT(before.unproven_bytes, 0u);
  ASSERT_EQ(before.segment_bytes, before.unproven_bytes + large);
  CHECK_CUDA(cudaStreamDestroy(made));  // the kernels still run
  EXPECT_EQ(segments.trim(), large);    // from the legacy stream: x's segment, behind its fence
  auto const st = segments.statistics();
  EXPECT_EQ(st.unproven_bytes, before.unproven_bytes);
  EXPECT_EQ(st.segment_bytes, st.unproven_bytes);
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The pool hands out x's memory only after the kernel that wrote it.
  expect_the_pools_next_user_reads_its_own_writes(pool, 46);
  expect_the_cache_goes_on(segments);
}

// Blocks of one stream's segment all freed on another (a producer and a consumer): the segment goes
// back behind those frees' fences once idle, without its own stream being used or named again.
TEST(SegmentCacheAdaptorGpu, ASegmentFreedOnlyOnAnotherStreamGoesBackBehindThoseFrees)
{
  stream_guard streams[3];
  cudaStream_t const producer = streams[0];
  cudaStream_t const consumer = streams[1];
  cudaStream_t const other    = streams[2];
  auto pool                   = owned_pool();
  rmm_next::segment_cache_options options;
  options.max_idle_bytes    = 0;  // an idle segment goes back at once
  options.max_idle_fraction = 0;
  cache segments{pool, options};
  void* p = segments.allocate(producer, busy_bytes);
  fill(p, busy_bytes, 7, producer);
  cudaEvent_t filled{};
  CHECK_CUDA(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(filled, producer));
  CHECK_CUDA(cudaStreamWaitEvent(consumer, filled, 0));
  keep_writing(p, busy_bytes, 0xdead, consumer, 50'000'000ULL);
  segments.deallocate(consumer, p, busy_bytes);
  auto const st = segments.statistics();
  EXPECT_EQ(st.released_segments, 1u);
  EXPECT_EQ(st.segment_bytes, 0u);
  EXPECT_EQ(st.unproven_bytes, 0u);
  void* q = pool.allocate(other, busy_bytes);
  mismatch_counter mismatches;
  fill(q, busy_bytes, 45, other);
  CHECK_CUDA(cudaDeviceSynchronize());
  check(q, busy_bytes, 45, other, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  pool.deallocate(other, q, busy_bytes);
  CHECK_CUDA(cudaEventDestroy(filled));
  CHECK_CUDA(cudaDeviceSynchronize());
}

// Frees on the legacy stream past its last fence, then the cache goes: the legacy stream's order
// proves them, so the pool is left with nothing of the cache's.
TEST(SegmentCacheAdaptorGpu, DestroyingTheCacheGivesTheLegacyStreamsIdleSegmentsBack)
{
  CHECK_CUDA(cudaFree(nullptr));  // this thread's context current: the legacy stream has a lane
  auto pool = owned_pool();
  std::optional<cache> segments{std::in_place, pool, keeping_idle_segments()};
  cuda::stream_ref const legacy{cudaStreamLegacy};
  rmm_next::segment_cache_statistics st{};
  for (int i = 0; i < 4096 && (i < 1024 || st.unproven_bytes == 0); ++i) {
    std::size_t const bytes = std::size_t{4096} << (i % 12);  // 4 KiB to 8 MiB
    segments->deallocate(legacy, segments->allocate(legacy, bytes), bytes);
    st = segments->statistics();
  }
  ASSERT_GT(st.unproven_bytes, 0u);
  segments.reset();
  CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  EXPECT_EQ(pool.statistics().used_bytes, 0u);
}

TEST(SegmentCacheAdaptorGpu, SizesNearSizeMaxAndBadAlignmentsGetTypedErrorsAndTheCacheGoesOn)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  cache segments{owned_pool()};
  // `held` keeps the small segment live, so that giving idle segments back on out of memory
  // leaves `warm`'s block in the cache.
  void* held = segments.allocate(stream, 4096);
  void* warm = segments.allocate(stream, 4096);
  segments.deallocate(stream, warm, 4096);
  for (std::size_t bytes : {std::numeric_limits<std::size_t>::max(),
                            std::numeric_limits<std::size_t>::max() - 4095,
                            std::size_t{1} << 62}) {
    EXPECT_THROW((void)segments.allocate(stream, bytes), rmm_next::out_of_memory) << bytes;
  }
  try {
    (void)segments.allocate(stream, 4096, 3);
    ADD_FAILURE() << "an alignment of 3 was accepted";
  } catch (rmm_next::bad_alloc const& e) {
    EXPECT_NE(std::string{e.what()}.find("alignment 3 is not a power of two"), std::string::npos)
      << e.what();
  }
  EXPECT_EQ(segments.allocate(stream, 4096), warm);  // the cache still works
  segments.deallocate(stream, warm, 4096);
  segments.deallocate(stream, held, 4096);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

// A device id past the visible ones: std::out_of_range naming the cache, the id and the count;
// the upstream's pool keeps working under a cache of its own device.
TEST(SegmentCacheAdaptorGpu, AnUnknownDeviceIsRefusedAndThePoolGoesOn)
{
  int count{};
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  rmm_next::async_device_resource pool = owned_pool();
  rmm_next::test::expect_unknown_devices_refused(
    [&](int device) { cache segments{pool, device}; }, "segment_cache_adaptor", count);
  stream_guard guard;
  cudaStream_t const stream = guard;
  cache segments{pool, 0};
  void* const p = segments.allocate(stream, 4096);
  segments.deallocate(stream, p, 4096);
  EXPECT_EQ(segments.allocate(stream, 4096), p) << "the freed block is not the next hit";
  segments.deallocate(stream, p, 4096);
  EXPECT_GT(pool.statistics().used_bytes, 0u);  // the cached segment
  EXPECT_GT(segments.trim(stream), 0u);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(pool.statistics().used_bytes, 0u);
}

// A fresh std::thread has made no runtime call: it has no current context, and the driver answers
// nothing about the legacy stream there. A block the main thread allocated on the legacy stream,
// freed on such a thread, is free again for the main thread's next allocation (not lost); an
// allocation and free there are a hit and a free of the cache like any thread's; the thread is
// left without a context.
TEST(SegmentCacheAdaptorGpu, AThreadWithoutAContextFreesAndAllocatesOnTheLegacyStream)
{
  rmm_next::async_device_resource pool = owned_pool();
  cache segments{pool, 0};
  cuda::stream_ref const legacy{cudaStreamLegacy};
  void* const p = segments.allocate(legacy, 4096);
  CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  CUcontext before = reinterpret_cast<CUcontext>(1);
  CUcontext after  = reinterpret_cast<CUcontext>(1);
  void* there      = nullptr;
  std::thread{[&] {
    before = rmm_next::detail::current_context_or_null();
    segments.deallocate(legacy, p, 4096);
    there = segments.allocate(legacy, 4096);
    segments.deallocate(legacy, there, 4096);
    after = rmm_next::detail::current_context_or_null();
  }}.join();
  EXPECT_EQ(before, nullptr) << "the thread had a context: the test proves nothing";
  EXPECT_EQ(after, nullptr) << "the thread was left with a context";
  EXPECT_EQ(there, p) << "the block freed there was not the next hit there";
  rmm_next::segment_cache_statistics const st = segments.statistics();
  EXPECT_EQ(st.lost_bytes, 0u);
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.bypasses, 0u);
  EXPECT_EQ(st.hits, 1u);
  void* const q = segments.allocate(legacy, 4096);
  EXPECT_EQ(q, p) << "the block did not come back to the main thread";
  mismatch_counter mismatches;
  fill(q, 4096, 7, cudaStreamLegacy);
  check(q, 4096, 7, cudaStreamLegacy, mismatches.get());
  segments.deallocate(legacy, q, 4096);
  CHECK_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  EXPECT_EQ(mismatches.read(), 0u);
}

}  // namespace
