/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// thread_cache_adaptor on a GPU: kernels prove that cached blocks keep stream order, that a stream
// made at a destroyed stream's handle never races with the old stream's work, that capture makes
// graph nodes, that an exhausted bounded pool recovers after the flush, and a stress test of 16
// threads with 2 to 4 streams each. RMM_NEXT_STRESS_ITERATIONS sets the stress test's length
// (iterations per thread, default 3000; fewer under compute-sanitizer).

#include "support/device_fill_check.cuh"
#include "support/kernels.cuh"
#include "support/second_context.hpp"
#include "support/stream_guard.hpp"
#include "support/unknown_device.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using rmm_next::async_device_resource;
using rmm_next::thread_cache_adaptor;
using rmm_next::thread_cache_options;
using rmm_next::test::check;
using rmm_next::test::fill;
using rmm_next::test::keep_writing_kernel;
using rmm_next::test::mismatch_counter;
using rmm_next::test::second_context;
using rmm_next::test::stream_guard;
using word = std::uint32_t;

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

async_device_resource owned_pool(std::size_t maximum = 0)
{
  rmm_next::pool_options options;
  if (maximum != 0) { options.maximum_pool_size = maximum; }
  return async_device_resource{options};
}

TEST(ThreadCacheAdaptorGpu, SameStreamReuseKeepsStreamOrder)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  mismatch_counter mismatches;
  auto upstream = owned_pool();
  thread_cache_adaptor<async_device_resource> cache{upstream};
  void* p = cache.allocate(stream, 40000);
  fill(p, 40000, 7, stream);
  cache.deallocate(stream, p, 40000);
  void* q = cache.allocate(stream, 39000);  // same class: the same block, ordered after the fill
  ASSERT_EQ(q, p);
  check(q, 39000, 7, stream, mismatches.get());
  cache.deallocate(stream, q, 39000);
  EXPECT_EQ(mismatches.read(), 0u);

  auto const st = cache.statistics();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  // The pool sees the block in use while it is cached, and nothing once it is flushed.
  EXPECT_GE(upstream.statistics().used_bytes, 40960u);  // 40000 bytes' size class
  EXPECT_GT(cache.flush(), 0u);
  EXPECT_EQ(upstream.statistics().used_bytes, 0u);
}

TEST(ThreadCacheAdaptorGpu, OtherStreamsGetOtherBlocks)
{
  stream_guard a_guard;
  cudaStream_t const a = a_guard;
  stream_guard b_guard;
  cudaStream_t const b = b_guard;
  thread_cache_adaptor<async_device_resource> cache{owned_pool()};
  void* p = cache.allocate(a, 1 << 16);
  cache.deallocate(a, p, 1 << 16);
  void* q = cache.allocate(b, 1 << 16);
  EXPECT_NE(q, p);
  EXPECT_EQ(cache.statistics().hits, 0u);
  cache.deallocate(b, q, 1 << 16);
  CHECK_CUDA(cudaDeviceSynchronize());
}

TEST(ThreadCacheAdaptorGpu, AStreamMadeAtADestroyedStreamsHandleNeverRacesWithItsWork)
{
  constexpr std::size_t bytes = 1 << 16;
  mismatch_counter mismatches;
  thread_cache_adaptor<async_device_resource> cache{owned_pool()};
  cudaStream_t old_stream{};
  CHECK_CUDA(cudaStreamCreateWithFlags(&old_stream, cudaStreamNonBlocking));
  void* p = cache.allocate(old_stream, bytes);
  // The old stream keeps writing 0xdead into the block for 300 ms after it was freed there.
  keep_writing_kernel<<<1, 256, 0, old_stream>>>(
    static_cast<word*>(p), bytes / sizeof(word), word{0xdead}, 300'000'000ULL);
  cache.deallocate(old_stream, p, bytes);
  CHECK_CUDA(cudaStreamDestroy(old_stream));  // work still pending

  std::vector<cudaStream_t> made;
  cudaStream_t reused{};
  for (int i = 0; i < 8 && reused == nullptr; ++i) {
    cudaStream_t s{};
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (s == old_stream) {
      reused = s;
    } else {
      made.push_back(s);
    }
  }
  for (cudaStream_t s : made) {
    CHECK_CUDA(cudaStreamDestroy(s));
  }
  if (reused == nullptr) {
    GTEST_SKIP() << "the driver did not hand out the destroyed stream's handle again";
  }
  auto const before = cache.statistics();
  void* q           = cache.allocate(reused, bytes);
  fill(q, bytes, 42, reused);
  check(q, bytes, 42, reused, mismatches.get());
  auto const after = cache.statistics();
  EXPECT_EQ(after.hits, before.hits);  // not served from the old stream's list
  EXPECT_EQ(after.flushes, before.flushes + 1);
  EXPECT_EQ(mismatches.read(), 0u);
  cache.deallocate(reused, q, bytes);
  CHECK_CUDA(cudaStreamSynchronize(reused));
  CHECK_CUDA(cudaStreamDestroy(reused));
}

TEST(ThreadCacheAdaptorGpu, CaptureMakesGraphNodesAndNeverCachesGraphMemory)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  mismatch_counter mismatches;
  thread_cache_adaptor<async_device_resource> cache{async_device_resource{}};
  void* warm = cache.allocate(stream, 4096);
  cache.deallocate(stream, warm, 4096);  // a cached block the capture must not take
  CHECK_CUDA(cudaStreamSynchronize(stream));
  auto const before = cache.statistics();

  cudaGraph_t graph{};
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  void* p = cache.allocate(stream, 4096);
  fill(p, 4096, 3, stream);
  check(p, 4096, 3, stream, mismatches.get());
  // Allocated while `p` is live, so that the graph gives the two blocks distinct addresses.
  void* kept = cache.allocate(stream, 2048);  // freed after the capture, outside the graph
  fill(kept, 2048, 5, stream);
  cache.deallocate(stream, p, 4096);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));

  EXPECT_NE(p, warm);
  std::size_t count{};
  CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CHECK_CUDA(cudaGraphGetNodes(graph, nodes.data(), &count));
  int allocs = 0;
  int frees  = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CHECK_CUDA(cudaGraphNodeGetType(node, &type));
    allocs += type == cudaGraphNodeTypeMemAlloc;
    frees += type == cudaGraphNodeTypeMemFree;
  }
  EXPECT_EQ(allocs, 2);
  EXPECT_EQ(frees, 1);

  cudaGraphExec_t exec{};
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(mismatches.read(), 0u);
  cache.deallocate(stream, kept, 2048);  // graph memory: back to the pool, not into the cache
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));

  auto const after = cache.statistics();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.bypasses, before.bypasses + 2);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
  EXPECT_EQ(cache.allocate(stream, 4096), warm);  // the cache still works after the capture
  cache.deallocate(stream, warm, 4096);
}

TEST(ThreadCacheAdaptorGpu, ABoundedPoolRecoversAfterTheFlush)
{
  constexpr std::size_t mib = std::size_t{1} << 20;
  stream_guard guard;
  cudaStream_t const stream = guard;
  auto upstream             = owned_pool(64 * mib);
  thread_cache_options options;
  options.max_cached_bytes_per_thread = 64 * mib;
  thread_cache_adaptor<async_device_resource> cache{upstream, options};
  std::vector<void*> blocks;
  for (int i = 0; i < 48; ++i) {
    blocks.push_back(cache.allocate(stream, mib));
  }
  for (void* p : blocks) {
    cache.deallocate(stream, p, mib);
  }
  ASSERT_EQ(cache.statistics().cached_bytes, 48 * mib);  // a full cache the pool counts as used
  void* big = nullptr;
  EXPECT_NO_THROW(big = cache.allocate(stream, 40 * mib));  // fits only after the flush
  EXPECT_NE(big, nullptr);
  auto const st = cache.statistics();
  EXPECT_EQ(st.flushes, 1u);
  EXPECT_EQ(st.cached_bytes, 0u);
  mismatch_counter mismatches;
  fill(big, 40 * mib, 9, stream);
  check(big, 40 * mib, 9, stream, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  // Beyond the pool's maximum even with empty caches: out_of_memory, and the adaptor still works.
  EXPECT_THROW((void)cache.allocate(stream, 32 * mib), rmm_next::out_of_memory);
  cache.deallocate(stream, big, 40 * mib);
  void* small = cache.allocate(stream, 1000);
  EXPECT_NE(small, nullptr);
  cache.deallocate(stream, small, 1000);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

TEST(ThreadCacheAdaptorGpu, EnableThreadCacheWrapsTheProcessWideResource)
{
  stream_guard guard;
  cudaStream_t const stream               = guard;
  int const device                        = 0;
  auto const original                     = rmm_next::get_per_device_resource_ref(device);
  auto const wrapped                      = rmm_next::enable_thread_cache(device);
  rmm_next::device_async_resource_ref ref = rmm_next::get_per_device_resource_ref(device);
  EXPECT_TRUE(wrapped == original);
  EXPECT_FALSE(ref == original);
  EXPECT_TRUE(rmm_next::enable_thread_cache(device) == original);  // once only
  EXPECT_TRUE(rmm_next::get_per_device_resource_ref(device) == ref);
  void* p = ref.allocate(stream, 3000);
  ref.deallocate(stream, p, 3000);
  EXPECT_EQ(ref.allocate(stream, 3000), p);
  ref.deallocate(stream, p, 3000);
  CHECK_CUDA(cudaSetDevice(device));
  EXPECT_TRUE(rmm_next::get_current_device_resource_ref() == ref);
  (void)rmm_next::set_per_device_resource_ref(device, original);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

TEST(ThreadCacheAdaptorGpu, CurrentDeviceFollowsSetDeviceOnEveryThread)
{
  int count{};
  CHECK_CUDA(cudaGetDeviceCount(&count));
  for (int d = 0; d < count; ++d) {
    std::thread{[&, d] {
      ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
      EXPECT_EQ(rmm_next::detail::current_device(), d);
      EXPECT_TRUE(rmm_next::get_current_device_resource_ref() ==
                  rmm_next::get_per_device_resource_ref(d));
      int const other = (d + 1) % count;
      ASSERT_EQ(cudaSetDevice(other), cudaSuccess);
      EXPECT_EQ(rmm_next::detail::current_device(), other);
      ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
      EXPECT_EQ(rmm_next::detail::current_device(), d);
    }}.join();
  }
  std::thread{[] {  // a fresh thread with no context yet: device 0, as cudaGetDevice says
    EXPECT_EQ(rmm_next::detail::current_device(), 0);
  }}
    .join();
}

TEST(ThreadCacheAdaptorGpu, AFlushWhileAnotherThreadCapturesLosesNoBlock)
{
  stream_guard capture_guard;
  cudaStream_t const capturing = capture_guard;
  thread_cache_adaptor<async_device_resource> cache{owned_pool()};
  void* mine = cache.allocate(capturing, 1 << 12);
  cache.deallocate(capturing, mine, 1 << 12);  // cached on this thread
  CHECK_CUDA(cudaStreamSynchronize(capturing));

  cudaGraph_t graph{};
  CHECK_CUDA(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  std::size_t flushed = 0;
  std::thread{[&] { flushed = cache.flush(); }}.join();  // another thread flushes mid-capture
  cudaError_t const ended = cudaStreamEndCapture(capturing, &graph);
  (void)cudaGetLastError();
  EXPECT_EQ(ended, cudaSuccess) << cudaGetErrorName(ended);
  if (graph != nullptr) { (void)cudaGraphDestroy(graph); }
  // The block was freed on a new list, which fences every free: the flush returned it.
  EXPECT_EQ(flushed, std::size_t{1} << 12);
  EXPECT_EQ(cache.statistics().cached_bytes, 0u);
}

// ---- Releases from another context, and captures on other threads ----------------------------

CUcontext current_context() { return rmm_next::detail::current_context_or_null(); }

constexpr std::size_t busy_bytes = 1 << 16;  // 16384 words

/** Keeps writing `value` into the block on `stream` for `ns` nanoseconds after its free there. */
void keep_writing(void* p, word value, cudaStream_t stream, unsigned long long ns = 400'000'000ULL)
{
  keep_writing_kernel<<<1, 256, 0, stream>>>(
    static_cast<word*>(p), busy_bytes / sizeof(word), value, ns);
}

TEST(ThreadCacheAdaptorGpu, AFlushFromASecondContextWaitsForThePrimaryContextsKernel)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  stream_guard other_guard;
  cudaStream_t const other = other_guard;
  second_context ctx2;
  auto upstream = owned_pool();
  thread_cache_adaptor<async_device_resource> cache{upstream};
  void* p = cache.allocate(stream, busy_bytes);
  keep_writing(p, 0xdead, stream);
  cache.deallocate(stream, p, busy_bytes);  // cached while the kernel still writes

  std::size_t flushed = 0;
  std::thread{[&] {
    ctx2.make_current();
    flushed = cache.flush();  // a thread of the second context returns the block upstream
  }}.join();
  EXPECT_EQ(flushed, busy_bytes);
  // The pool may hand the block to another stream, but only after the kernel: 0 words lost.
  mismatch_counter mismatches;
  void* q = upstream.allocate(other, busy_bytes);
  fill(q, busy_bytes, 11, other);
  CHECK_CUDA(cudaDeviceSynchronize());
  check(q, busy_bytes, 11, other, mismatches.get());
  std::printf("second-context flush: the next block %s the busy one\n", q == p ? "is" : "is not");
  EXPECT_EQ(mismatches.read(), 0u);
  upstream.deallocate(other, q, busy_bytes);
  CHECK_CUDA(cudaStreamSynchronize(other));
}

TEST(ThreadCacheAdaptorGpu, StreamZeroOfASecondContextNeverGetsThePrimaryContextsBlocks)
{
  stream_guard guard;
  cudaStream_t const checker = guard;
  second_context ctx2;
  CUcontext const primary = current_context();
  auto upstream           = owned_pool();
  thread_cache_adaptor<async_device_resource> cache{upstream};
  void* p = cache.allocate(cudaStream_t{}, busy_bytes);
  keep_writing(p, 0xdead, cudaStream_t{});
  cache.deallocate(cudaStream_t{}, p, busy_bytes);  // cached on the primary context's stream 0

  ctx2.make_current();
  void* q = cache.allocate(cudaStream_t{}, busy_bytes);  // stream 0 of the second context
  cudaEvent_t allocated{};
  CHECK_CUDA(cudaEventCreateWithFlags(&allocated, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(allocated, cudaStream_t{}));
  ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  EXPECT_NE(q, p);
  // Used in the order of its allocation: never concurrently with the old kernel.
  CHECK_CUDA(cudaStreamWaitEvent(checker, allocated, 0));
  mismatch_counter mismatches;
  fill(q, busy_bytes, 12, checker);
  CHECK_CUDA(cudaDeviceSynchronize());
  check(q, busy_bytes, 12, checker, mismatches.get());
  EXPECT_EQ(mismatches.read(), 0u);
  ctx2.make_current();
  cache.deallocate(cudaStream_t{}, q, busy_bytes);
  CHECK_CUDA(cudaEventDestroy(allocated));
  ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
  EXPECT_EQ(cache.allocate(cudaStream_t{}, busy_bytes), p);  // the primary context's list is intact
  cache.deallocate(cudaStream_t{}, p, busy_bytes);
  CHECK_CUDA(cudaDeviceSynchronize());
}

// A thread caches blocks freed on a stream and on its per-thread default stream of a second
// context, which is destroyed before the thread exits. The fences those frees took were relayed
// into the primary context, so the thread's exit gives the blocks back without waiting on an event
// of the destroyed context, and without making it current again: nothing is refused, nothing stays
// unproven, and the pool hands the memory out again.
TEST(ThreadCacheAdaptorGpu, BlocksCachedInASecondContextGoBackAfterItIsDestroyed)
{
  CHECK_CUDA(cudaFree(nullptr));
  auto upstream = owned_pool();
  thread_cache_adaptor<async_device_resource> cache{upstream};
  std::thread{[&] {
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    CUcontext const primary = current_context();
    {
      second_context ctx2;
      ctx2.make_current();
      cudaStream_t theirs{};
      ASSERT_EQ(cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking), cudaSuccess);
      for (cudaStream_t const s : {theirs, cudaStreamPerThread}) {
        void* p = cache.allocate(s, busy_bytes);
        keep_writing(p, 0xdead, s, 1'000'000ULL);
        cache.deallocate(s, p, busy_bytes);  // cached, its fence relayed to the primary context
      }
      ASSERT_EQ(cudaStreamSynchronize(theirs), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
      ASSERT_EQ(cudaStreamDestroy(theirs), cudaSuccess);
      ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(primary), CUDA_SUCCESS);
    }  // the second context is destroyed here
  }}.join();  // the thread exits: its cache's blocks go back
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  (void)cache.flush();
  auto const st = cache.statistics();
  EXPECT_EQ(st.cached_bytes, 0u);
  EXPECT_EQ(st.unproven_bytes, 0u);
  CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(upstream.statistics().used_bytes, 0u);
  stream_guard guard;
  cudaStream_t const stream = guard;
  void* q                   = cache.allocate(stream, busy_bytes);
  mismatch_counter mismatches;
  fill(q, busy_bytes, 13, stream);
  check(q, busy_bytes, 13, stream, mismatches.get());
  CHECK_CUDA(cudaStreamSynchronize(stream));
  EXPECT_EQ(mismatches.read(), 0u);
  cache.deallocate(stream, q, busy_bytes);
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

/** What makes a cache give blocks back while another thread captures. */
enum class release_kind { thread_exit, eviction, reused_handle, out_of_memory, flush };

char const* name_of(release_kind k)
{
  switch (k) {
    case release_kind::thread_exit: return "thread_exit";
    case release_kind::eviction: return "eviction";
    case release_kind::reused_handle: return "reused_handle";
    case release_kind::out_of_memory: return "out_of_memory";
    case release_kind::flush: return "flush";
  }
  return "?";
}

class ImplicitRelease
  : public ::testing::TestWithParam<std::tuple<cudaStreamCaptureMode, release_kind>> {};

TEST_P(ImplicitRelease, LeavesAnotherThreadsCaptureIntact)
{
  auto const [mode, kind]   = GetParam();
  constexpr std::size_t mib = std::size_t{1} << 20;
  auto upstream             = owned_pool(64 * mib);
  thread_cache_options options;
  options.max_streams_per_thread      = 2;
  options.max_cached_bytes_per_thread = 64 * mib;
  options.max_block_size              = 4 * mib;
  thread_cache_adaptor<async_device_resource> cache{upstream, options};
  stream_guard capture_guard;
  cudaStream_t const capturing = capture_guard;

  std::vector<cudaStream_t> streams(4);
  for (auto& s : streams) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  // Four cached blocks on each of two streams, on the releasing thread.
  auto fill_cache = [&] {
    for (int k = 0; k < 2; ++k) {
      std::vector<void*> blocks;
      for (int i = 0; i < 4; ++i) {
        blocks.push_back(cache.allocate(streams[static_cast<std::size_t>(k)], 4 * mib));
      }
      for (void* b : blocks) {
        cache.deallocate(streams[static_cast<std::size_t>(k)], b, 4 * mib);
      }
    }
  };

  std::mutex m;
  std::condition_variable cv;
  int phase         = 0;  // 1: the caches are full; 2: the capture runs; 3: the release is done
  cudaError_t ended = cudaErrorUnknown;
  auto wait_for     = [&](int p) {
    std::unique_lock lock{m};
    cv.wait(lock, [&] { return phase == p; });
  };
  auto set_phase = [&](int p) {
    std::lock_guard lock{m};
    phase = p;
    cv.notify_all();
  };
  std::thread capturer{[&] {
    cudaGraph_t graph{};
    wait_for(1);
    ASSERT_EQ(cudaStreamBeginCapture(capturing, mode), cudaSuccess);
    fill(cache.allocate(capturing, 1000), 1000, 1, capturing);
    set_phase(2);
    wait_for(3);
    ended = cudaStreamEndCapture(capturing, &graph);
    if (graph != nullptr) { (void)cudaGraphDestroy(graph); }
  }};
  std::size_t released = 0;
  bool reused          = false;
  std::thread releaser{[&] {
    // Relaxed, as a thread that allocates beside a global-mode capture on another thread must
    // be: the driver refuses its own allocations otherwise.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    CHECK_CUDA(cudaThreadExchangeStreamCaptureMode(&relaxed));
    fill_cache();
    for (cudaStream_t s : streams) {
      CHECK_CUDA(cudaStreamSynchronize(s));
    }
    set_phase(1);
    wait_for(2);
    auto const before = cache.statistics();
    switch (kind) {
      case release_kind::thread_exit: break;  // the thread ends below with its blocks cached
      case release_kind::eviction: {          // a third stream: the least recent list goes back
        void* b = cache.allocate(streams[2], 4096);
        cache.deallocate(streams[2], b, 4096);
        break;
      }
      case release_kind::reused_handle: {  // a list whose handle another stream took
        cudaStream_t const old = streams[1];
        CHECK_CUDA(cudaStreamDestroy(old));
        // Streams until one lands at the old handle; each other one is destroyed once, below.
        cudaStream_t fresh{};
        for (int i = 0; i < 64 && fresh != old; ++i) {
          if (fresh != nullptr) { streams.push_back(fresh); }
          CHECK_CUDA(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking));
        }
        streams[1] = fresh;
        reused     = fresh == old;
        if (reused) { cache.deallocate(fresh, cache.allocate(fresh, 4096), 4096); }
        break;
      }
      case release_kind::out_of_memory: {  // more than the pool has left: the caches flush
        void* big = cache.allocate(streams[0], 48 * mib);
        cache.deallocate(streams[0], big, 48 * mib);
        break;
      }
      case release_kind::flush: released = cache.flush(); break;
    }
    released += cache.statistics().flushes - before.flushes;
  }};
  releaser.join();  // a thread exit releases here
  set_phase(3);
  capturer.join();
  EXPECT_EQ(ended, cudaSuccess) << name_of(kind) << ": " << cudaGetErrorName(ended);
  if (kind == release_kind::thread_exit) {
    EXPECT_EQ(cache.statistics().cached_bytes, 0u);  // the exited thread's blocks went back
    EXPECT_GE(cache.statistics().flushes, 1u);
  } else if (kind != release_kind::reused_handle || reused) {
    EXPECT_GT(released, 0u) << name_of(kind);
  }
  for (cudaStream_t s : streams) {
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaStreamDestroy(s));
  }
  (void)cudaGetLastError();
  if (kind == release_kind::reused_handle && !reused) {
    GTEST_SKIP() << "no new stream landed at the destroyed stream's handle in 64 tries";
  }
}

std::string release_test_name(
  ::testing::TestParamInfo<std::tuple<cudaStreamCaptureMode, release_kind>> const& info)
{
  char const* const modes[] = {"global", "thread_local", "relaxed"};
  return std::string{modes[static_cast<int>(std::get<0>(info.param))]} + "_" +
         name_of(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryModeAndRelease,
                         ImplicitRelease,
                         ::testing::Combine(::testing::Values(cudaStreamCaptureModeGlobal,
                                                              cudaStreamCaptureModeThreadLocal,
                                                              cudaStreamCaptureModeRelaxed),
                                            ::testing::Values(release_kind::thread_exit,
                                                              release_kind::eviction,
                                                              release_kind::reused_handle,
                                                              release_kind::out_of_memory,
                                                              release_kind::flush)),
                         release_test_name);

TEST(ThreadCacheAdaptorGpu, AllocatingSizeMaxThrowsOutOfMemoryWithOrWithoutCaps)
{
  stream_guard guard;
  cudaStream_t const stream = guard;
  for (std::size_t max_block : {std::size_t{1} << 20, std::numeric_limits<std::size_t>::max()}) {
    for (std::size_t cap : {std::size_t{32} << 20, std::numeric_limits<std::size_t>::max()}) {
      thread_cache_options options;
      options.max_block_size              = max_block;
      options.max_cached_bytes_per_thread = cap;
      thread_cache_adaptor<async_device_resource> cache{owned_pool(), options};
      for (std::size_t bytes : {std::numeric_limits<std::size_t>::max(),
                                std::numeric_limits<std::size_t>::max() / 2 + 1,
                                (std::size_t{1} << 63) + (std::size_t{3} << 61) + 1}) {
        EXPECT_THROW((void)cache.allocate(stream, bytes), rmm_next::out_of_memory)
          << "max_block_size " << max_block << ", cap " << cap << ", " << bytes << " bytes";
      }
      void* p = cache.allocate(stream, 1000);  // still working
      EXPECT_NE(p, nullptr);
      cache.deallocate(stream, p, 1000);
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

// A device id past the visible ones: std::out_of_range naming the adaptor, the id and the count;
// the upstream's pool keeps working under an adaptor of its own device.
TEST(ThreadCacheAdaptorGpu, AnUnknownDeviceIsRefusedAndThePoolGoesOn)
{
  int count{};
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  async_device_resource pool = owned_pool();
  rmm_next::test::expect_unknown_devices_refused(
    [&](int device) { thread_cache_adaptor<async_device_resource> cache{pool, device}; },
    "thread_cache_adaptor",
    count);
  stream_guard guard;
  cudaStream_t const stream = guard;
  mismatch_counter mismatches;
  thread_cache_adaptor<async_device_resource> cache{pool, 0};
  void* const p = cache.allocate(stream, 40000);
  fill(p, 40000, 5, stream);
  cache.deallocate(stream, p, 40000);
  void* const q = cache.allocate(stream, 40000);
  EXPECT_EQ(q, p) << "the freed block is not the next hit";
  check(q, 40000, 5, stream, mismatches.get());
  cache.deallocate(stream, q, 40000);
  EXPECT_EQ(mismatches.read(), 0u);
}

int stress_iterations()
{
  char const* env = std::getenv("RMM_NEXT_STRESS_ITERATIONS");
  int const n     = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? n : 3000;
}

/** A live block of the stress test: its pattern's seed and the stream of its last use. */
struct live_block {
  void* ptr;
  std::size_t bytes;
  word seed;
  cudaStream_t stream;
};

/** A block passed to another thread, with an event marking the end of its last use. */
struct handed_block {
  live_block block;
  cudaEvent_t done;
};

TEST(ThreadCacheAdaptorGpu, StressSixteenThreadsManyStreams)
{
  constexpr int threads = 16;
  int const iterations  = stress_iterations();
  std::printf("stress: %d threads x %d iterations\n", threads, iterations);
  mismatch_counter mismatches;
  auto upstream = owned_pool();
  std::mutex mutex;
  std::set<void*> live;  // every block some thread holds: none may be handed out twice
  std::deque<handed_block> handoff;
  int duplicates = 0;
  {
    thread_cache_options options;
    options.max_cached_bytes_per_thread = 8 << 20;
    thread_cache_adaptor<async_device_resource> cache{upstream, options};
    auto take = [&](void* p) {
      std::lock_guard lock{mutex};
      duplicates += live.insert(p).second ? 0 : 1;
    };
    auto drop = [&](void* p) {
      std::lock_guard lock{mutex};
      live.erase(p);
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng{static_cast<unsigned>(1234 + t)};
        std::vector<cudaStream_t> streams(2 + t % 3);
        for (auto& s : streams) {
          EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
        }
        std::vector<live_block> mine;
        auto pick_stream = [&] { return streams[rng() % streams.size()]; };
        auto free_block  = [&](live_block const& b, cudaStream_t on) {
          check(b.ptr, b.bytes, b.seed, b.stream, mismatches.get());
          drop(b.ptr);
          if (on != b.stream) {  // order the free after the last use on the other stream
            cudaEvent_t done{};
            EXPECT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
            EXPECT_EQ(cudaEventRecord(done, b.stream), cudaSuccess);
            EXPECT_EQ(cudaStreamWaitEvent(on, done), cudaSuccess);
            EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
          }
          cache.deallocate(on, b.ptr, b.bytes);
        };
        for (int i = 0; i < iterations; ++i) {
          unsigned const op = rng() % 8;
          if (op < 4 && mine.size() < 24) {
            cudaStream_t const s    = pick_stream();
            std::size_t const bytes = (256 + rng() % (64 << 10)) & ~std::size_t{3};
            word const seed         = rng();
            void* p                 = cache.allocate(s, bytes);
            take(p);
            fill(p, bytes, seed, s);
            mine.push_back({p, bytes, seed, s});
          } else if (op < 6 && !mine.empty()) {
            std::size_t const k = rng() % mine.size();
            live_block const b  = mine[k];
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
            free_block(b, rng() % 3 == 0 ? pick_stream() : b.stream);
          } else if (op == 6 && !mine.empty()) {  // hand a block to another thread
            live_block const b = mine.back();
            mine.pop_back();
            check(b.ptr, b.bytes, b.seed, b.stream, mismatches.get());
            cudaEvent_t done{};
            EXPECT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
            EXPECT_EQ(cudaEventRecord(done, b.stream), cudaSuccess);
            std::lock_guard lock{mutex};
            handoff.push_back({b, done});
          } else if (op == 7) {
            std::optional<handed_block> got;
            {
              std::lock_guard lock{mutex};
              if (!handoff.empty()) {
                got = handoff.front();
                handoff.pop_front();
              }
            }
            if (got) {  // adopt it on one of this thread's streams, check it, keep or free it
              cudaStream_t const s = pick_stream();
              EXPECT_EQ(cudaStreamWaitEvent(s, got->done), cudaSuccess);
              EXPECT_EQ(cudaEventDestroy(got->done), cudaSuccess);
              live_block b = got->block;
              b.stream     = s;
              if (rng() % 2 == 0) {
                check(b.ptr, b.bytes, b.seed, s, mismatches.get());
                mine.push_back(b);
              } else {
                free_block(b, s);
              }
            }
          }
          if (i % 250 == 249) {  // destroy a stream with work pending and make a new one
            std::size_t const k = rng() % streams.size();
            for (std::size_t j = 0; j < mine.size();) {
              if (mine[j].stream == streams[k]) {
                free_block(mine[j], streams[k]);
                mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(j));
              } else {
                ++j;
              }
            }
            EXPECT_EQ(cudaStreamDestroy(streams[k]), cudaSuccess);
            EXPECT_EQ(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking), cudaSuccess);
          }
        }
        for (live_block const& b : mine) {
          free_block(b, b.stream);
        }
        for (cudaStream_t s : streams) {
          EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
          EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
        }
      });
    }
    for (auto& w : workers) {
      w.join();
    }
    stream_guard last_guard;
    cudaStream_t const last = last_guard;
    for (handed_block const& h : handoff) {
      EXPECT_EQ(cudaStreamWaitEvent(last, h.done), cudaSuccess);
      EXPECT_EQ(cudaEventDestroy(h.done), cudaSuccess);
      check(h.block.ptr, h.block.bytes, h.block.seed, last, mismatches.get());
      cache.deallocate(last, h.block.ptr, h.block.bytes);
    }
    CHECK_CUDA(cudaStreamSynchronize(last));
    auto const st = cache.statistics();
    std::printf("stress: hits %llu, misses %llu, bypasses %llu, flushes %llu\n",
                static_cast<unsigned long long>(st.hits),
                static_cast<unsigned long long>(st.misses),
                static_cast<unsigned long long>(st.bypasses),
                static_cast<unsigned long long>(st.flushes));
    EXPECT_GT(st.hits, 0u);
    // The workers' streams are gone: what they freed after their last fence is unproven, at
    // most max_unfenced_bytes (and one block) per worker and stream, until the contexts are
    // waited for.
    std::printf("stress: %llu bytes unproven\n",
                static_cast<unsigned long long>(st.unproven_bytes));
    EXPECT_LE(st.unproven_bytes, std::uint64_t{threads} * 5 * ((8 << 20) + (64 << 10)));
    cache.synchronize_and_flush();
    EXPECT_EQ(cache.statistics().cached_bytes, 0u);
    EXPECT_EQ(cache.statistics().unproven_bytes, 0u);
  }
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(mismatches.read(), 0u);
  EXPECT_EQ(upstream.statistics().used_bytes, 0u);  // everything went back to the pool
}

}  // namespace
