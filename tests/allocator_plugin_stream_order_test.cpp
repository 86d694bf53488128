/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so's frees of memory recorded on other streams (PyTorch's record_stream)
// while captures run, over the fake CUDA runtime (linked into this program, it takes the place of
// libcudart's functions for the plugin too), whose streams can be marked as captured. A free must
// never record or wait on a stream that a capture other than its own holds: the driver refuses
// such a cross-capture dependency, and the refusal invalidates the capture. Its fences are the
// stream vocabulary's (driver events), never the runtime's. And the capture mode the plugin's
// queries run in, and frees of vmm_resource blocks on a stream being captured.

#include "support/fake_cuda_runtime.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace fake = rmm_next::test::fake_cuda;

/** @brief The fake has two devices from the start, before the plugin asks for the count. */
[[maybe_unused]] bool const two_devices = [] {
  fake::reset(2);
  return true;
}();

constexpr std::size_t bytes = 4096;

rmm_next_statistics statistics()
{
  rmm_next_statistics s{};
  EXPECT_EQ(rmm_next_get_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

rmm_next_vmm_statistics vmm_statistics()
{
  rmm_next_vmm_statistics s{};
  EXPECT_EQ(rmm_next_vmm_get_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

fake::stream_record& record(cudaStream_t stream)
{
  return *reinterpret_cast<fake::stream_record*>(stream);
}

/** @brief How many entries of `log` (one of the fake's event logs) name `stream` at `Index`. */
template <std::size_t Index, class Log>
int naming(Log const& log, cudaStream_t stream)
{
  std::lock_guard const lock{fake::event_mutex()};
  return static_cast<int>(std::count_if(log.begin(), log.end(), [stream](auto const& entry) {
    return std::get<Index>(entry) == stream;
  }));
}

/** @brief Fences (driver events) recorded on `stream` so far. */
int fences_recorded_on(cudaStream_t stream)
{
  return naming<1>(fake::fake().events.recorded, stream);
}

/** @brief Waits of `stream` on fences so far. */
int fence_waits_of(cudaStream_t stream) { return naming<0>(fake::fake().events.waits, stream); }

/** @brief Fences made and not yet destroyed. */
int live_fences()
{
  std::lock_guard const lock{fake::event_mutex()};
  return fake::fake().events.created - fake::fake().events.destroyed;
}

/** @brief No runtime event was recorded on or waited for by `stream`: only the vocabulary's. */
void expect_no_runtime_events(cudaStream_t stream)
{
  EXPECT_EQ(record(stream).events_recorded, 0)
    << "cudaEventRecord: not a fence of detail/stream.hpp";
  EXPECT_EQ(record(stream).event_waits, 0) << "cudaStreamWaitEvent: not detail/stream.hpp's";
}

/** @brief A block allocated on `own` and recorded on `side`, two streams of device 0. */
struct recorded_block {
  cudaStream_t own{fake::make_stream(0)};
  cudaStream_t side{fake::make_stream(0)};
  void* ptr{rmm_next_torch_alloc(bytes, 0, own)};

  recorded_block()
  {
    EXPECT_NE(ptr, nullptr) << rmm_next_last_error();
    rmm_next_torch_record_stream(ptr, side);
  }
};

TEST(RecordedStreams, AFreeOutsideACaptureWaitsForTheRecordedStreamAtOnce)
{
  auto const [own, side, p] = recorded_block{};
  int const fences_before   = live_fences();
  rmm_next_torch_free(p, bytes, 0, own);
  EXPECT_EQ(fences_recorded_on(side), 1);
  EXPECT_EQ(fence_waits_of(own), 1);
  EXPECT_EQ(live_fences(), fences_before);  // the fence went once the wait was queued
  expect_no_runtime_events(side);
  expect_no_runtime_events(own);
  rmm_next_statistics const s = statistics();
  EXPECT_EQ(s.deferred_frees, 0U);
  EXPECT_EQ(s.allocated_bytes, 0U);
}

// Another thread captures the stream the block was recorded on: the free waits for that capture
// to end, then makes its stream wait for the recorded stream's work as usual.
TEST(RecordedStreams, AFreeWaitsForTheEndOfACaptureThatHoldsARecordedStream)
{
  auto const [own, side, p] = recorded_block{};
  record(side).capture_id   = 7;  // another thread begins a capture on it
  rmm_next_torch_free(p, bytes, 0, own);
  EXPECT_EQ(fences_recorded_on(side), 0);  // the captured stream was not touched
  EXPECT_EQ(fence_waits_of(own), 0);
  rmm_next_statistics held = statistics();  // the capture still runs: nothing is released
  EXPECT_EQ(held.deferred_frees, 1U);
  EXPECT_EQ(held.allocated_bytes, bytes);
  EXPECT_FALSE(record(side).capture_invalidated);
  record(side).capture_id        = 0;  // the capture has ended
  rmm_next_statistics const done = statistics();
  EXPECT_EQ(done.deferred_frees, 0U);
  EXPECT_EQ(done.allocated_bytes, 0U);
  EXPECT_EQ(fences_recorded_on(side), 1);
  EXPECT_EQ(fence_waits_of(own), 1);
  expect_no_runtime_events(side);
  expect_no_runtime_events(own);
}

// A free node of capture 5 may wait for streams of capture 5 only: a recorded stream of capture 7
// (another thread's) is skipped, one of capture 5 is waited on.
TEST(RecordedStreams, AFreeDuringACaptureWaitsOnlyForStreamsOfTheSameCapture)
{
  cudaStream_t const own   = fake::make_stream(0);
  cudaStream_t const same  = fake::make_stream(0);
  cudaStream_t const other = fake::make_stream(0);
  record(own).capture_id   = 5;
  record(same).capture_id  = 5;
  record(other).capture_id = 7;
  void* p                  = rmm_next_torch_alloc(bytes, 0, own);  // a graph allocation of 5
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  rmm_next_torch_record_stream(p, same);
  rmm_next_torch_record_stream(p, other);
  rmm_next_torch_free(p, bytes, 0, own);   // a free node of 5
  EXPECT_EQ(fences_recorded_on(same), 1);  // a node of capture 5, joined by the free's stream
  EXPECT_EQ(fences_recorded_on(other), 0);
  EXPECT_EQ(fence_waits_of(own), 1);
  for (cudaStream_t const s : {own, same, other}) {
    EXPECT_FALSE(record(s).capture_invalidated);
    expect_no_runtime_events(s);
  }
  record(own).capture_id      = 0;
  record(same).capture_id     = 0;
  record(other).capture_id    = 0;
  rmm_next_statistics const s = statistics();
  EXPECT_EQ(s.deferred_frees, 0U);
  EXPECT_EQ(s.allocated_bytes, 0U);
}

// Statistics may be read (torch.cuda.memory_stats, a monitoring thread) while another thread
// captures in global mode: every driver query of the plugin's information calls runs in relaxed
// mode, whatever mode the calling thread has, and the thread's own mode is back afterwards.
TEST(CaptureModes, TheInformationCallsQueryTheDriverInRelaxedMode)
{
  void* p = rmm_next_allocate(bytes, 0, nullptr);  // device 0's resource exists
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  fake::fake().query_modes.clear();
  rmm_next_statistics s{};
  EXPECT_EQ(rmm_next_get_statistics(0, &s), 0) << rmm_next_last_error();
  std::uint64_t value{};
  EXPECT_EQ(rmm_next_get_pool_attribute(0, cudaMemPoolAttrUsedMemCurrent, &value), 0)
    << rmm_next_last_error();
  EXPECT_EQ(rmm_next_reset_peak_statistics(0), 0) << rmm_next_last_error();
  std::size_t free_bytes{}, total_bytes{};
  EXPECT_EQ(rmm_next_mem_get_info(0, &free_bytes, &total_bytes), 0) << rmm_next_last_error();
  auto const& modes = fake::fake().query_modes;
  ASSERT_GE(modes.size(), 4U);
  bool got_info = false, got_set = false;
  for (auto const& [call, mode] : modes) {
    SCOPED_TRACE(call);
    EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
    got_info = got_info || call == "cudaMemGetInfo";
    got_set  = got_set || call == "cudaMemPoolSetAttribute";
  }
  EXPECT_TRUE(got_info);
  EXPECT_TRUE(got_set);
  cudaStreamCaptureMode mine = cudaStreamCaptureModeGlobal;  // what the thread had before
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mine), cudaSuccess);
  EXPECT_EQ(mine, cudaStreamCaptureModeGlobal);
  rmm_next_deallocate(p, bytes, 0, nullptr);
}

// rmm_next_vmm_free on a stream being captured was refused ("the block is kept, free it outside
// the capture"), a second answer beside vmm_resource's own. It is forwarded now: the free is the
// graph's. The capture goes on intact, the block stays out of use until the graph runs past the
// free (a host node), and is handed out again after that.
TEST(VmmCaptures, AFreeOnACapturingStreamIsTheGraphsAndItsBlockComesBackWhenTheGraphRuns)
{
  constexpr std::size_t vmm_bytes      = std::size_t{1} << 20;
  constexpr unsigned long long capture = 11;
  cudaStream_t const s                 = fake::make_stream(0);
  void* const block                    = rmm_next_vmm_alloc(vmm_bytes, 0, s);
  ASSERT_NE(block, nullptr) << rmm_next_last_error();
  rmm_next_vmm_statistics const before = vmm_statistics();
  record(s).capture_id                 = capture;  // the capture begins
  rmm_next_vmm_free(block, vmm_bytes, 0, s);
  rmm_next_vmm_statistics const during = vmm_statistics();
  EXPECT_EQ(during.deallocations, before.deallocations + 1) << rmm_next_last_error();
  EXPECT_EQ(during.allocated_bytes, before.allocated_bytes - vmm_bytes);
  EXPECT_FALSE(record(s).capture_invalidated);
  EXPECT_EQ(fake::fake().graphs[capture].host_nodes.size(), 1U);
  record(s).capture_id = 0;                                    // the capture ended
  void* const other    = rmm_next_vmm_alloc(vmm_bytes, 0, s);  // not run yet: another block
  ASSERT_NE(other, nullptr) << rmm_next_last_error();
  EXPECT_NE(other, block);
  fake::run_graph(capture);  // a launch runs past the free
  void* const again = rmm_next_vmm_alloc(vmm_bytes, 0, s);
  EXPECT_EQ(again, block);
  rmm_next_vmm_free(other, vmm_bytes, 0, s);
  rmm_next_vmm_free(again, vmm_bytes, 0, s);
  fake::destroy_graph(capture);
  rmm_next_vmm_statistics const after = vmm_statistics();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes - vmm_bytes);
  EXPECT_EQ(after.deallocations, before.deallocations + 3);
}

}  // namespace

namespace {

rmm_next_segment_cache_statistics segment_statistics()
{
  rmm_next_segment_cache_statistics s{};
  EXPECT_EQ(rmm_next_get_segment_cache_statistics(0, &s), 0) << rmm_next_last_error();
  return s;
}

// A thread that has made no runtime call has no current context: the driver cannot say whether a
// default stream is captured there (CUDA_ERROR_INVALID_CONTEXT). A Python thread that drops the
// last reference to a tensor is such a thread. Its free is done at once, in the block's device's
// primary context, not held back as if a capture might hold the stream; an allocation there is
// served as on any thread. The thread is left without a context, as it was.
TEST(ThreadsWithoutAContext, FreesAndAllocationsOnTheLegacyStreamAreDoneAtOnce)
{
  cudaStream_t const legacy = cudaStreamLegacy;
  void* const p             = rmm_next_torch_alloc(bytes, 0, legacy);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  rmm_next_statistics after_free{};
  rmm_next_statistics after_pair{};
  void* again         = nullptr;
  CUcontext left_with = reinterpret_cast<CUcontext>(1);
  std::thread{[&] {
    fake::unbind_context_on_this_thread();
    rmm_next_torch_free(p, bytes, 0, legacy);
    EXPECT_EQ(rmm_next_get_statistics(0, &after_free), 0) << rmm_next_last_error();
    again = rmm_next_torch_alloc(bytes, 0, legacy);
    EXPECT_NE(again, nullptr) << rmm_next_last_error();
    rmm_next_torch_free(again, bytes, 0, legacy);
    EXPECT_EQ(rmm_next_get_statistics(0, &after_pair), 0) << rmm_next_last_error();
    left_with = rmm_next::detail::current_context_or_null();
  }}.join();
  EXPECT_EQ(after_free.deferred_frees, 0U) << "held back as if the stream might be captured";
  EXPECT_EQ(after_free.allocated_bytes, 0U);
  EXPECT_EQ(after_pair.deferred_frees, 0U);
  EXPECT_EQ(after_pair.allocated_bytes, 0U);
  EXPECT_EQ(left_with, nullptr) << "the thread is given back its state: no current context";
}

// The same under the segment cache: on the thread without a context, every call (not only the
// first) is served by the cache, as on any thread, and the block freed there comes back.
TEST(ThreadsWithoutAContext, TheSegmentCacheServesEveryCallOfSuchAThread)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  cudaStream_t const legacy                   = cudaStreamLegacy;
  rmm_next_segment_cache_statistics const st0 = segment_statistics();
  void* const p                               = rmm_next_torch_alloc(bytes, 0, legacy);
  ASSERT_NE(p, nullptr) << rmm_next_last_error();
  rmm_next_statistics seen{};
  std::vector<void*> handed;
  std::thread{[&] {
    fake::unbind_context_on_this_thread();
    rmm_next_torch_free(p, bytes, 0, legacy);
    for (int i = 0; i < 3; ++i) {
      void* const q = rmm_next_torch_alloc(bytes, 0, legacy);
      handed.push_back(q);
      rmm_next_torch_free(q, bytes, 0, legacy);
    }
    EXPECT_EQ(rmm_next_get_statistics(0, &seen), 0) << rmm_next_last_error();
    EXPECT_EQ(rmm_next::detail::current_context_or_null(), nullptr);
  }}.join();
  EXPECT_EQ(seen.deferred_frees, 0U);
  EXPECT_EQ(seen.allocated_bytes, 0U);
  EXPECT_EQ(handed, (std::vector<void*>{p, p, p})) << "the block freed there comes back there";
  rmm_next_segment_cache_statistics const st = segment_statistics();
  EXPECT_EQ(st.bypasses - st0.bypasses, 0U) << "a call of that thread went past the cache";
  EXPECT_EQ(st.hits - st0.hits, 3U);
  EXPECT_EQ(st.live_bytes, 0U);
  ASSERT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

/**
 * @brief With the plugin's caches in place: two pairs on a stream (the caches found on top, the
 * map's version noted), then a block kept live while C++ sets a resource, which must take the
 * next allocation and free; set back, the freed block is the next allocation again.
 * @return The segment cache's statistics while C++'s resource was set, and at the start of it.
 */
std::pair<rmm_next_segment_cache_statistics, rmm_next_segment_cache_statistics>
a_resource_set_from_cpp_takes_the_next_calls()
{
  cudaStream_t const s = fake::make_stream(0);
  for (int i = 0; i < 2; ++i) {
    void* const p = rmm_next_torch_alloc(bytes, 0, s);
    EXPECT_NE(p, nullptr) << rmm_next_last_error();
    rmm_next_torch_free(p, bytes, 0, s);
  }
  void* const cached                          = rmm_next_torch_alloc(bytes, 0, s);
  rmm_next_segment_cache_statistics const st0 = segment_statistics();
  rmm_next::test::fake_resource counted{7};
  auto const previous =
    rmm_next::set_per_device_resource_ref(0, rmm_next::device_async_resource_ref{counted});
  void* const elsewhere = rmm_next_torch_alloc(bytes, 0, s);
  EXPECT_NE(elsewhere, nullptr) << rmm_next_last_error();
  EXPECT_EQ(counted.allocations(), 1) << "the allocation went past the resource C++ set";
  rmm_next_torch_free(elsewhere, bytes, 0, s);
  EXPECT_EQ(counted.deallocations(), 1) << "the free went past the resource C++ set";
  rmm_next_segment_cache_statistics const st1 = segment_statistics();
  rmm_next::set_per_device_resource_ref(0, previous);
  rmm_next_torch_free(cached, bytes, 0, s);
  void* const again = rmm_next_torch_alloc(bytes, 0, s);
  EXPECT_EQ(again, cached) << "the freed block is the next allocation again";
  rmm_next_torch_free(again, bytes, 0, s);
  EXPECT_EQ(counted.allocations(), 1);
  return {st0, st1};
}

// The plugin sends a call straight to its segment cache while the per-device map's version is
// the one at which it last found the cache there. A resource C++ sets after that (a new version)
// takes the next allocation and free; set back, the cache serves again, its freed block first.
TEST(SegmentCache, AResourceSetFromCppAfterTheCacheServedTakesTheNextCalls)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  auto const [st0, st1] = a_resource_set_from_cpp_takes_the_next_calls();
  EXPECT_EQ(st1.hits, st0.hits);
  EXPECT_EQ(st1.misses, st0.misses);
  EXPECT_EQ(st1.live_bytes, bytes) << "only the block allocated before";
  EXPECT_EQ(segment_statistics().hits, st0.hits + 1) << "the block freed, then handed out again";
  EXPECT_EQ(segment_statistics().live_bytes, 0u);
  ASSERT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

// The same with the thread cache in front of the segment cache: the plugin calls that pair
// directly too, and a resource C++ sets takes the next calls all the same; set back, the thread
// cache hands the freed block out again.
TEST(SegmentCache, UnderTheThreadCacheAResourceSetFromCppTakesTheNextCalls)
{
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_enable_thread_cache(0, nullptr), 0) << rmm_next_last_error();
  auto const [st0, st1] = a_resource_set_from_cpp_takes_the_next_calls();
  EXPECT_EQ(st0.misses, 1u) << "one segment, under the thread cache";
  EXPECT_EQ(st1.misses, st0.misses);
  ASSERT_EQ(rmm_next_disable_thread_cache(0), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

TEST(SegmentCache, FrameworkBlocksComeFromSegmentsAndIdleOnesGoBackPastTheBound)
{
  EXPECT_EQ(segment_statistics().enabled, 0u);
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << rmm_next_last_error();
  ASSERT_EQ(rmm_next_enable_segment_cache(0, nullptr), 0) << "again: no change";
  cudaStream_t const s = fake::make_stream(0);
  void* a              = rmm_next_torch_alloc(bytes, 0, s);
  ASSERT_NE(a, nullptr) << rmm_next_last_error();
  rmm_next_torch_free(a, bytes, 0, s);
  void* b = rmm_next_torch_alloc(bytes, 0, s);
  EXPECT_EQ(b, a) << "the freed block comes back on its stream";
  rmm_next_segment_cache_statistics st = segment_statistics();
  EXPECT_EQ(st.enabled, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.segments, 1u);
  EXPECT_EQ(st.segment_bytes, std::uint64_t{2} << 20);
  EXPECT_EQ(st.live_bytes, bytes);
  EXPECT_EQ(statistics().allocated_bytes, bytes) << "the plugin's own count is unchanged";
  rmm_next_torch_free(b, bytes, 0, s);
  EXPECT_EQ(segment_statistics().idle_bytes, std::uint64_t{2} << 20) << "kept: within the bound";
  EXPECT_EQ(statistics().allocated_bytes, 0u);
  ASSERT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
  EXPECT_EQ(segment_statistics().enabled, 0u);

  // With no idle bytes allowed, the segment goes back on the free's own stream at once.
  rmm_next_segment_cache_options const none{0, 0, 0.0};
  ASSERT_EQ(rmm_next_enable_segment_cache(0, &none), 0) << rmm_next_last_error();
  void* c = rmm_next_torch_alloc(bytes, 0, s);
  ASSERT_NE(c, nullptr) << rmm_next_last_error();
  rmm_next_torch_free(c, bytes, 0, s);
  st = segment_statistics();
  EXPECT_EQ(st.segments, 0u);
  EXPECT_EQ(st.released_segments, 1u);
  EXPECT_EQ(st.idle_bytes, 0u);
  ASSERT_EQ(rmm_next_disable_segment_cache(0), 0) << rmm_next_last_error();
}

}  // namespace
