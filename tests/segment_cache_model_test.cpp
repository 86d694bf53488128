/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A model-based randomized test of segment_cache_adaptor, on the CPU, over the driver model of
// support/driver_model.hpp and its model pool (support/model_pool.hpp) upstream. Worker threads,
// driven one operation at a time from a seeded sequence, allocate sizes from 512 bytes to 12 MiB
// (and SIZE_MAX) on streams of device 0's primary context and of a second context (destroyed and
// made again), on the legacy default stream of each context and on the threads' per-thread default
// streams (the threads switch between the two contexts), free on the block's stream or, ordered by
// an event, on another, free blocks inside captures in every mode (graphs launched or destroyed),
// destroy streams, exit (a new thread takes the place of one that held blocks, which another
// frees), trim from any thread and run out of memory. The model checks throughout:
// - every byte handed out is ordered after every earlier use of it, and memory freed in a capture
//   comes back only once its graph ran past the free;
// - no two live blocks overlap, and each lies in a block the pool handed out;
// - no call is made that the driver would refuse or that would invalidate a capture;
// - the live bytes and the idle bound agree with what the test holds.
// RMM_NEXT_MODEL_SEED picks the seed (printed) and RMM_NEXT_MODEL_SECONDS the time (default 3).

#include "support/driver_model.hpp"
#include "support/forked_child.hpp"
#include "support/model_pool.hpp"
#include "support/parking_pool.hpp"
#include "support/unknown_device.hpp"

#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using model::model_pool;
using model::the;

/** @brief A block the test holds. */
struct held {
  std::uintptr_t address;
  std::size_t bytes;
  cudaStream_t handle;
  model::stream* on;
  bool graph;              ///< allocated during a capture (graph memory of the pool)
  std::thread::id thread;  ///< the thread that allocated it (whose per-thread stream `on` may be)
};

/** @brief Memory handed out before: its range and every use it had. */
struct used_range {
  std::size_t bytes;
  model::vclock last_use;
  bool pending;  ///< freed inside a capture whose graph has not run past the free
  std::string how;
};

TEST(SegmentCacheModel, EveryByteHandedOutIsOrderedAfterItsLastUseAndNoCaptureIsHarmed)
{
  auto const [seed, seconds] = model::settings_from_environment("segment cache model", 3.0);
  std::mt19937_64 rng{seed};
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };

  model_pool pool{std::size_t{128} << 20};
  model::model_pool::state& ps = pool.get();
  rmm_next::segment_cache_options options;
  std::size_t constexpr bounds[] = {0, std::size_t{4} << 20, std::size_t{1} << 40};
  double constexpr fractions[]   = {0.0, 0.25, 0.5};
  options.max_idle_bytes         = bounds[pick(3)];
  options.max_idle_fraction      = fractions[pick(3)];
  options.fence_interval         = 1 + pick(8);
  std::printf("max_idle_bytes %zu, max_idle_fraction %.2f, fence_interval %zu\n",
              options.max_idle_bytes,
              options.max_idle_fraction,
              options.fence_interval);
  auto cache = std::make_unique<rmm_next::segment_cache_adaptor<model_pool>>(pool, 0, options);

  int second = 1;  // the second context of device 0 (destroyed and made again)
  std::vector<std::unique_ptr<model::worker>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<model::worker>(0));
  }
  std::vector<cudaStream_t> streams;
  auto new_stream = [&] {
    std::lock_guard lock{the().mutex};
    int const ctx = pick(3) == 0 ? second : 0;
    streams.push_back(
      reinterpret_cast<cudaStream_t>(the().create_stream(ctx, false, pick(2) == 0)));
  };
  for (int i = 0; i < 5; ++i) {
    new_stream();
  }
  std::vector<held> live;
  std::map<std::uintptr_t, used_range> history;
  struct graph_free {
    std::uintptr_t address;
    std::size_t node;
  };
  struct capture_state {
    bool on{false};
    std::size_t worker{};
    cudaStream_t handle{};
    model::stream* s{};
    std::vector<graph_free> frees;
  } capture;
  std::map<std::string, long> ops;

  // What the test checks of memory handed out on `s` (eager) at [p, p + bytes).
  auto check_handed_out = [&](std::uintptr_t p, std::size_t bytes, model::stream const& s) {
    bool inside = false;
    for (auto const& [a, b] : ps.blocks) {
      inside = inside || (b.live && a <= p && p + bytes <= a + b.bytes);
    }
    if (!inside) { the().violation("a block outside every block the pool handed out"); }
    for (held const& h : live) {
      if (p < h.address + h.bytes && h.address < p + bytes) {
        the().violation("two live blocks overlap");
      }
    }
    model::vclock const now = model::done_before(s);
    auto it                 = history.upper_bound(p);
    if (it != history.begin()) { it = std::prev(it); }
    for (; it != history.end() && it->first < p + bytes; ++it) {
      if (it->first + it->second.bytes <= p) { continue; }
      if (it->second.pending) {
        the().violation("memory freed in a capture came back before its graph ran past the free");
      } else if (!model::covers(now, it->second.last_use)) {
        if (std::getenv("RMM_NEXT_MODEL_DEBUG") != nullptr) {
          std::printf("DEBUG handed [%lx,+%zu) on uid %llu; range %lx +%zu: %s\n",
                      (unsigned long)p,
                      bytes,
                      (unsigned long long)s.uid,
                      (unsigned long)it->first,
                      it->second.bytes,
                      it->second.how.c_str());
        }
        the().violation("memory was handed out before its last use was done");
      }
    }
  };

  auto allocate_on = [&](std::size_t w, cudaStream_t h, std::size_t bytes) {
    workers[w]->call([&] {
      model::stream* s = nullptr;
      {
        std::lock_guard lock{the().mutex};
        s = model::resolve_on(h);
      }
      void* ptr = nullptr;
      try {
        ptr = cache->allocate(cuda::stream_ref{h}, bytes);
      } catch (rmm_next::out_of_memory const&) {
        ++ops["out of memory"];
        return;
      }
      auto const p = reinterpret_cast<std::uintptr_t>(ptr);
      std::lock_guard lock{the().mutex};
      bool const graph = s->capturing;
      if (!graph) { check_handed_out(p, bytes, *s); }
      if (graph) {
        the().enqueue_captured(*s);  // a use in the graph, not on the stream's own clock
      } else {
        model::enqueue(*s);
      }
      if (!graph) {
        for (auto it = history.lower_bound(p); it != history.end() && it->first < p + bytes;) {
          it = it->first + it->second.bytes <= p + bytes ? history.erase(it) : std::next(it);
        }
      }
      live.push_back({p, bytes, h, s, graph, std::this_thread::get_id()});
    });
  };

  // Frees block i on `h` (its own stream, or one the test orders after it first).
  auto free_on = [&](std::size_t w, std::size_t i, cudaStream_t h) {
    held const b = live[i];
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    workers[w]->call([&] {
      model::stream* to = nullptr;
      {
        std::lock_guard lock{the().mutex};
        to = model::resolve_on(h);
        // From the block's stream itself: a default stream's handle names another stream on
        // another thread.
        if (to != b.on) { model::user_order(reinterpret_cast<CUstream>(b.on), b.on->ctx, *to); }
        if (!b.graph) {
          model::vclock use  = to->capturing ? b.on->clock : to->clock;
          history[b.address] = {b.bytes,
                                use,
                                to->capturing,
                                "alloc uid " + std::to_string(b.on->uid) + " freed uid " +
                                  std::to_string(to->uid) + (to->capturing ? " in capture" : "")};
          if (to->capturing) {
            capture.frees.push_back({b.address, the().graphs.back()->nodes.size()});
          }
        }
      }
      cache->deallocate(cuda::stream_ref{h}, reinterpret_cast<void*>(b.address), b.bytes);
    });
  };

  auto end_capture = [&](bool launch) {
    std::lock_guard lock{the().mutex};
    model::graph* g = the().end_capture(*capture.s);
    capture.on      = false;
    if (g == nullptr) {
      the().violation("a capture was invalidated");
      return;
    }
    if (launch) {
      model::stream* on = model::resolve_on(streams[pick(streams.size())]);
      model::merge(on->clock, g->before);
      the().launch_graph(*g, *on, [&](std::size_t node) {
        for (graph_free const& f : capture.frees) {
          if (f.node != node) { continue; }
          auto const it = history.find(f.address);
          if (it == history.end() || !it->second.pending) { continue; }
          it->second.pending = false;
          model::merge(it->second.last_use, on->clock);
        }
      });
      ++ops["graph launched"];
    }
    the().destroy_graph(*g);
    capture.frees.clear();
  };

  long const steps = model::run_steps(seconds, [&] {
    std::size_t const w = pick(workers.size());
    std::size_t const r = pick(100);
    if (r < 40 || (r < 75 && live.empty())) {  // allocate
      cudaStream_t h = streams[pick(streams.size())];
      if (std::size_t const d = pick(6); d < 2) {  // a default stream: 0 is the legacy one here
        h = d == 0 ? cudaStream_t{} : cudaStreamPerThread;
      }
      if (capture.on && w == capture.worker && pick(3) == 0) { h = capture.handle; }
      if (capture.on && h == capture.handle && w != capture.worker) { return; }
      std::size_t constexpr sizes[] = {
        512, 1000, 4096, 300000, std::size_t{3} << 19, std::size_t{3} << 20, std::size_t{12} << 20};
      std::size_t const kind  = pick(20) == 0 ? 6 : pick(6);  // 12 MiB now and then
      std::size_t const bytes = pick(300) == 0 ? SIZE_MAX : sizes[kind] + pick(2) * pick(5000);
      if (live.size() > 24) { return; }
      allocate_on(w, h, bytes);
      ++ops["allocate"];
    } else if (r < 75) {  // free, mostly on its own stream
      std::size_t const i = pick(live.size());
      held const& b       = live[i];
      if (capture.on && b.on == capture.s) {
        // Memory from before the capture, freed on the captured stream: the graph's to free.
        if (w != capture.worker || b.graph) { return; }
        free_on(w, i, b.handle);
        ++ops["free in a capture"];
        return;
      }
      cudaStream_t h = b.handle;
      if (pick(4) == 0) { h = streams[pick(streams.size())]; }
      if (capture.on && model::resolve_on(h) == capture.s) { return; }
      bool const elsewhere = h != b.handle;
      free_on(w, i, h);
      ++ops[elsewhere ? "free on another stream" : "free"];
    } else if (r < 80) {  // trim, from any thread, with a stream or none
      cudaStream_t const h = pick(2) == 0 ? cudaStream_t{} : streams[pick(streams.size())];
      if (capture.on && model::resolve_on(h) == capture.s) { return; }
      workers[w]->call([&] { (void)cache->trim(cuda::stream_ref{h}); });
      ++ops["trim"];
    } else if (r < 84) {  // a capture begins or ends
      if (!capture.on) {
        cudaStream_t const h = streams[pick(streams.size())];
        model::stream* s     = nullptr;
        {
          std::lock_guard lock{the().mutex};
          s = model::resolve_on(h);
        }
        if (s->ctx != 0) { return; }
        std::lock_guard lock{the().mutex};
        the().begin_capture(*s, static_cast<cudaStreamCaptureMode>(pick(3)), workers[w]->id());
        capture.on     = true;
        capture.worker = w;
        capture.handle = h;
        capture.s      = s;
        ++ops["capture"];
      } else {
        // Graph memory allocated in the capture is freed eagerly later (its output).
        end_capture(pick(8) != 0);
      }
    } else if (r < 86) {  // a stream is destroyed once its blocks are freed; a new one is made
      // Now and then: the idle segments a destroyed stream's last frees leave unproven stay for
      // good, and would fill the pool.
      if (pick(8) != 0) { return; }
      std::size_t const k  = pick(streams.size());
      cudaStream_t const h = streams[k];
      if (capture.on && model::resolve_on(h) == capture.s) { return; }
      bool busy = false;
      for (held const& b : live) {
        busy = busy || b.handle == h;
      }
      if (busy) { return; }
      {
        std::lock_guard lock{the().mutex};
        model::stream_destroy(reinterpret_cast<CUstream>(h));
      }
      streams.erase(streams.begin() + static_cast<std::ptrdiff_t>(k));
      new_stream();
      ++ops["stream destroyed"];
    } else if (r < 87) {  // the second context is destroyed by its owner, and another made
      if (pick(4) != 0) { return; }
      for (held const& b : live) {
        if (b.on->ctx == second) { return; }
      }
      for (auto& worker : workers) {  // threads in it make the primary context current first
        if (worker->ctx_ != second) { continue; }
        worker->call([] { model::ctx_stack = {0}; });
        worker->ctx_ = 0;
      }
      std::lock_guard lock{the().mutex};
      for (std::size_t k = 0; k < streams.size(); ++k) {
        if (model::resolve_on(streams[k])->ctx == second) {
          streams[k] = reinterpret_cast<cudaStream_t>(the().create_stream(0, false, false));
        }
      }
      the().destroy_context(second);
      second = the().create_context(0);
      ++ops["context destroyed"];
    } else if (r < 89) {  // the host waits for a stream
      cudaStream_t const h = streams[pick(streams.size())];
      std::lock_guard lock{the().mutex};
      model::stream* s = model::resolve_on(h);
      if (s != nullptr && !s->capturing) { model::merge(the().completed, s->clock); }
    } else if (r < 91) {  // a thread exits mid-way; a new one takes its place
      if (pick(4) != 0 || (capture.on && w == capture.worker)) { return; }
      // Its per-thread default stream ends with it: the blocks still in use there move to a
      // regular stream first, ordered after it, as a program hands its work over. Its blocks on
      // the legacy stream and on regular streams stay live, for other threads to free.
      std::thread::id const leaving = workers[w]->id();
      for (held& b : live) {
        if (b.handle != cudaStreamPerThread || b.thread != leaving) { continue; }
        cudaStream_t to{};
        do {
          to = streams[pick(streams.size())];
        } while (capture.on && model::resolve_on(to) == capture.s);
        workers[w]->call([&] {
          std::lock_guard lock{the().mutex};
          model::stream* t = model::resolve_on(to);
          model::user_order(reinterpret_cast<CUstream>(b.on), b.on->ctx, *t);
          model::enqueue(*t);  // a use there
          b.handle = to;
          b.on     = t;
          b.thread = {};
        });
        ++ops["handed over at thread exit"];
      }
      workers[w] = std::make_unique<model::worker>(0);
      ++ops["thread exit"];
    } else if (r < 93) {  // a thread makes the other context of the device current
      if (capture.on && w == capture.worker) { return; }
      int const ctx = workers[w]->ctx_ == 0 ? second : 0;
      workers[w]->call([&] { model::ctx_stack = {ctx}; });
      workers[w]->ctx_ = ctx;
      ++ops["context switch"];
    }
    rmm_next::segment_cache_statistics const st = cache->statistics();
    std::uint64_t const below_peak              = st.peak_live_bytes - st.live_bytes;
    auto const relative =
      std::min<std::uint64_t>(static_cast<std::uint64_t>(options.max_idle_fraction *
                                                         static_cast<double>(st.peak_live_bytes)),
                              below_peak);
    if (st.idle_bound != std::max<std::uint64_t>(options.max_idle_bytes, relative)) {
      the().violation(
        "the idle bound is not the larger of max_idle_bytes and the fraction, up to how far the "
        "live bytes are below their peak");
    }
    if (st.idle_bytes - st.unproven_bytes > st.idle_bound) {
      the().violation("idle segments that fences prove stayed beyond the bound");
    }
  });

  if (capture.on) { end_capture(false); }
  for (std::size_t i = live.size(); i-- > 0;) {
    free_on(0, i, live[i].handle);
  }
  for (cudaStream_t h : streams) {  // each stream's own order proves its idle segments free
    workers[0]->call([&] { (void)cache->trim(cuda::stream_ref{h}); });
  }
  for (auto& worker : workers) {  // and each thread's default streams', theirs
    worker->call([&] {
      (void)cache->trim(cuda::stream_ref{cudaStream_t{}});
      (void)cache->trim(cuda::stream_ref{cudaStreamPerThread});
    });
  }
  rmm_next::segment_cache_statistics const st = cache->statistics();
  std::printf("segments %llu (%llu B), pool in use %zu B, lost %llu B\n",
              static_cast<unsigned long long>(st.segments),
              static_cast<unsigned long long>(st.segment_bytes),
              ps.in_use,
              static_cast<unsigned long long>(st.lost_bytes));
  std::printf(
    "%ld steps; hits %llu, misses %llu, bypasses %llu, released %llu, idle %llu B, "
    "unproven %llu B\n",
    steps,
    static_cast<unsigned long long>(st.hits),
    static_cast<unsigned long long>(st.misses),
    static_cast<unsigned long long>(st.bypasses),
    static_cast<unsigned long long>(st.released_segments),
    static_cast<unsigned long long>(st.idle_bytes),
    static_cast<unsigned long long>(st.unproven_bytes));
  for (auto const& [name, n] : ops) {
    std::printf("  %-24s %ld\n", name.c_str(), n);
  }
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(ps.in_use, st.segment_bytes);  // the cache holds what the pool gave it, no more
  workers.clear();
  cache.reset();
  model::report_violations(seed);
  EXPECT_GT(st.hits, 0u);
  EXPECT_GT(ops["capture"], 0);
}

/** @brief A stream the program made (non-blocking) on the primary context of device 0. */
model::stream* made_stream()
{
  std::lock_guard lock{the().mutex};
  return the().create_stream(0, false, false);
}

/** @brief A segment cache over a model pool of `bytes`; `ps` is what the pool knows. */
struct cache_over_pool {
  cache_over_pool(std::size_t bytes, rmm_next::segment_cache_options const& options)
    : pool{bytes}, ps{pool.get()}, cache{pool, 0, options}
  {
  }
  model_pool pool;
  model::model_pool::state& ps;
  rmm_next::segment_cache_adaptor<model_pool> cache;
};

/** @brief Options that give every segment back as soon as it is idle. */
rmm_next::segment_cache_options giving_idle_segments_back()
{
  rmm_next::segment_cache_options options;
  options.max_idle_bytes    = 0;
  options.max_idle_fraction = 0.0;
  return options;
}

/** @brief Options that keep every idle segment until a trim or the cache goes. */
rmm_next::segment_cache_options keeping_every_idle_segment()
{
  rmm_next::segment_cache_options options;
  options.max_idle_bytes = std::size_t{1} << 40;
  return options;
}

// A stream destroyed while its work still uses a freed block, and another made at its handle: the
// thread whose last lane answer was the old stream's frees a block of the old stream there, so its
// lane hint names the old stream. The new stream's order proves nothing of the old one's later
// work: no fence of the old lane and no segment given back on the new stream may follow from that
// free, and the block the old stream still uses is not handed out again before that use is done.
TEST(SegmentCacheModel, AStreamMadeAtADestroyedStreamsHandleProvesNothingOfItsWork)
{
  model_pool pool{std::size_t{64} << 20};
  rmm_next::segment_cache_adaptor<model_pool> cache{pool, 0, giving_idle_segments_back()};
  model::worker thread{0};
  model::stream* const old  = made_stream();
  cudaStream_t const handle = reinterpret_cast<cudaStream_t>(old);
  cuda::stream_ref const stream{handle};
  std::size_t constexpr bytes = 4096;
  void* x                     = nullptr;
  void* z                     = nullptr;
  model::vclock z_use;
  model::stream* made = nullptr;
  thread.call([&] {
    x = cache.allocate(stream, bytes);
    z = cache.allocate(stream, bytes);  // the same segment
    CUevent x_done{};
    {
      std::lock_guard lock{the().mutex};
      model::as_user const user;
      model::enqueue(*old);  // a kernel uses x
      model::event_create(&x_done, 0);
      model::event_record(x_done, reinterpret_cast<CUstream>(handle));
      model::enqueue(*old);  // a later kernel uses z
      z_use = old->clock;
    }
    cache.deallocate(stream, z, bytes);  // on its own stream, the kernel pending
    {
      std::lock_guard lock{the().mutex};
      model::as_user const user;
      model::stream_destroy(reinterpret_cast<CUstream>(handle));
      made = the().remake_stream(*old, 0, false);
      // The user orders x's free after x's use, and after nothing else of the old stream.
      model::stream_wait_event(reinterpret_cast<CUstream>(handle), x_done, 0);
      model::event_destroy(x_done);
    }
    cache.deallocate(stream, x, bytes);
    // A segment for the new stream: the pool hands out again what went back to it.
    auto const p = reinterpret_cast<std::uintptr_t>(cache.allocate(stream, bytes));
    auto const a = reinterpret_cast<std::uintptr_t>(z);
    {
      std::lock_guard lock{the().mutex};
      if (p <= a && a < p + (std::size_t{2} << 20) &&
          !model::covers(model::done_before(*made), z_use)) {
        the().violation("a block the destroyed stream still used was handed out on the new stream");
      }
    }
    cache.deallocate(stream, reinterpret_cast<void*>(p), bytes);
  });
  rmm_next::segment_cache_statistics const st = cache.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_GT(st.segments, 0u);  // the old stream's segment stays: nothing proves it free
  model::report_violations(0);
}

// A stream the program made is destroyed while its kernels still use blocks freed on it: the first
// free (a segment of its own) fenced, the last ones past the lane's fences. A trim from another
// stream gives the fenced segment back behind its kernel, and only it; what no fence proves stays
// with the cache (the stream is gone, and is not asked).
TEST(SegmentCacheModel, AStreamDestroyedWithWorkPendingGivesBackWhatItsFencesProveAndNothingElse)
{
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  auto& cache                 = c.cache;
  std::size_t constexpr large = std::size_t{24} << 20;   // a segment of its own
  std::size_t constexpr small = std::size_t{512} << 10;  // in a small segment of their own
  model::worker thread{0};
  model::stream* const made = made_stream();
  cuda::stream_ref const stream{reinterpret_cast<cudaStream_t>(made)};
  model::vclock x_use;
  rmm_next::segment_cache_statistics before{};
  thread.call([&] {
    void* x = cache.allocate(stream, large);
    {
      std::lock_guard lock{the().mutex};
      model::enqueue(*made);  // a kernel uses x
      x_use = made->clock;
    }
    cache.deallocate(stream, x, large);  // the lane's first free: fenced
    for (int i = 0; i < 4096 && (i < 1024 || before.unproven_bytes == 0); ++i) {
      void* p = cache.allocate(stream, small);
      {
        std::lock_guard lock{the().mutex};
        model::enqueue(*made);
      }
      cache.deallocate(stream, p, small);
      before = cache.statistics();
    }
    std::lock_guard lock{the().mutex};
    model::as_user const user;
    model::stream_destroy(reinterpret_cast<CUstream>(made));  // its kernels still pending
  });
  ASSERT_GT(before.unproven_bytes, 0u);
  ASSERT_EQ(before.segment_bytes, before.unproven_bytes + large);
  std::size_t trimmed = 0;
  thread.call([&] { trimmed = cache.trim(); });  // from the legacy stream
  EXPECT_EQ(trimmed, large);
  rmm_next::segment_cache_statistics const st = cache.statistics();
  EXPECT_EQ(st.unproven_bytes, before.unproven_bytes);
  EXPECT_EQ(st.segment_bytes, st.unproven_bytes);
  EXPECT_EQ(c.ps.in_use, st.segment_bytes);
  // The pool's next user of x's memory waits for x's last use.
  thread.call([&] {
    model::stream* const other = made_stream();
    cuda::stream_ref const next{reinterpret_cast<cudaStream_t>(other)};
    void* p = c.pool.allocate(next, large);
    {
      std::lock_guard lock{the().mutex};
      if (!model::covers(model::done_before(*other), x_use)) {
        the().violation("the fenced segment went back before its kernel was done");
      }
    }
    c.pool.deallocate(next, p, large);
  });
  model::report_violations(0);
}

/**
 * @brief A cache over a model pool, after frees on `thread`'s legacy stream past the first ones
 * (each fenced) until the last ones are not.
 */
struct legacy_frees_past_the_fences {
  legacy_frees_past_the_fences()
    : pool{std::size_t{256} << 20},
      ps{pool.get()},
      cache{std::make_unique<rmm_next::segment_cache_adaptor<model_pool>>(
        pool, 0, keeping_every_idle_segment())}
  {
    cuda::stream_ref const zero{cudaStream_t{}};
    thread.call([&] {
      for (int i = 0; i < 4096 && (i < 1024 || unproven_bytes == 0); ++i) {
        std::size_t const bytes = std::size_t{4096} << (i % 12);  // 4 KiB to 8 MiB
        cache->deallocate(zero, cache->allocate(zero, bytes), bytes);
        unproven_bytes = cache->statistics().unproven_bytes;
      }
    });
  }
  model_pool pool;
  model::model_pool::state& ps;
  std::unique_ptr<rmm_next::segment_cache_adaptor<model_pool>> cache;
  model::worker thread{0};
  std::uint64_t unproven_bytes{0};
};

// A device id the driver does not know (the model's driver has devices 0 and 1): the constructor
// throws std::out_of_range naming the cache, the id and the visible devices, and retains no
// primary context, without a driver call that fails; a cache of a known device works after it.
TEST(SegmentCacheModel, AnUnknownDeviceIsRefusedAndRetainsNothing)
{
  model_pool pool{std::size_t{64} << 20};
  model::model_pool::state& ps = pool.get();
  int const retained[2]        = {the().primary_retains[0], the().primary_retains[1]};
  int const refused_before     = the().refused_device_gets;
  rmm_next::test::expect_unknown_devices_refused(
    [&](int device) { rmm_next::segment_cache_adaptor<model_pool> cache{pool, device}; },
    "segment_cache_adaptor",
    2);
  EXPECT_EQ(the().refused_device_gets, refused_before)
    << "an unknown id was refused by asking the driver for it, an error the driver reports";
  EXPECT_EQ(the().primary_retains[0], retained[0]);
  EXPECT_EQ(the().primary_retains[1], retained[1]);
  {
    rmm_next::segment_cache_adaptor<model_pool> cache{pool, 0, keeping_every_idle_segment()};
    model::worker thread{0};
    thread.call([&] {
      cuda::stream_ref const zero{cudaStream_t{}};
      void* const p = cache.allocate(zero, 4096);
      EXPECT_NE(p, nullptr);
      EXPECT_GT(ps.in_use, 0u);
      cache.deallocate(zero, p, 4096);
      EXPECT_EQ(cache.allocate(zero, 4096), p) << "the freed block is not the next hit";
      cache.deallocate(zero, p, 4096);
      (void)cache.trim(zero);
    });
  }
  EXPECT_EQ(ps.in_use, 0u);
  model::report_violations(0);
}

// A cache destroyed on a thread of the legacy stream's context, after frees on that stream that no
// fence covers yet: the legacy stream's order proves them, so their segments go back to the pool
// instead of staying allocated from it for the rest of the process.
TEST(SegmentCacheModel, DestroyingTheCacheGivesTheLegacyStreamsIdleSegmentsBack)
{
  legacy_frees_past_the_fences c;
  ASSERT_GT(c.unproven_bytes, 0u);
  ASSERT_GT(c.ps.in_use, 0u);
  c.thread.call([&] { c.cache.reset(); });
  EXPECT_EQ(c.ps.in_use, 0u);
  model::report_violations(0);
}

// A cache destroyed on a thread with no current context (one that never used the runtime, or
// that set none): that thread has no legacy stream, so the destructor asks the driver nothing of
// one (cuStreamIsCapturing would fail there with CUDA_ERROR_INVALID_CONTEXT, an API error under
// compute-sanitizer), and the unproven frees' segments stay allocated, as a cache destroyed on
// another context's thread leaves them.
TEST(SegmentCacheModel, DestroyingTheCacheOnAThreadWithoutAContextAsksNothingOfALegacyStream)
{
  legacy_frees_past_the_fences c;
  ASSERT_GT(c.unproven_bytes, 0u);
  c.thread.call([&] {
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(nullptr), CUDA_SUCCESS);
    ASSERT_EQ(rmm_next::detail::current_context_or_null(), nullptr);
    c.cache.reset();
  });
  EXPECT_GT(c.ps.in_use, 0u) << "segments went back on a stream no thread of this context ordered";
  model::report_violations(0);
}

// A thread that has made no runtime call has no current context: the driver cannot say whether the
// legacy stream is captured there. A block another thread allocated on it, freed there, is free
// again for that thread (not lost as if a capture held it), and the freeing thread is left without
// a context, as it was.
TEST(SegmentCacheModel, AFreeOnTheLegacyStreamFromAThreadWithoutAContextIsNotLost)
{
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  cuda::stream_ref const legacy{cudaStreamLegacy};
  model::worker owner{0};
  model::worker other{0};
  void* p = nullptr;
  owner.call([&] { p = c.cache.allocate(legacy, 4096); });
  other.call([&] {
    ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(nullptr), CUDA_SUCCESS);
    c.cache.deallocate(legacy, p, 4096);
    EXPECT_EQ(rmm_next::detail::current_context_or_null(), nullptr);
    // Sizes no segment can hold: refused there as anywhere, the thread again left without one.
    EXPECT_THROW((void)c.cache.allocate(legacy, SIZE_MAX), rmm_next::out_of_memory);
    EXPECT_THROW((void)c.cache.allocate(legacy, SIZE_MAX - 4095), rmm_next::out_of_memory);
    EXPECT_EQ(rmm_next::detail::current_context_or_null(), nullptr);
  });
  rmm_next::segment_cache_statistics const st = c.cache.statistics();
  EXPECT_EQ(st.lost_bytes, 0u);
  EXPECT_EQ(st.graph_pending_bytes, 0u);
  EXPECT_EQ(st.live_bytes, 0u);
  void* q = nullptr;
  owner.call([&] { q = c.cache.allocate(legacy, 4096); });
  EXPECT_EQ(q, p) << "the block came back to its lane";
  owner.call([&] { c.cache.deallocate(legacy, q, 4096); });
  model::report_violations(0);
}

// The same beside another thread's capture of a made stream, in each mode: the thread without a
// context frees and allocates on the legacy stream with the primary context lent for the call,
// and the capture is not invalidated; nothing asks the driver what it cannot answer.
TEST(SegmentCacheModel, AThreadWithoutAContextBesideACaptureInEveryModeHarmsNoCapture)
{
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  cuda::stream_ref const legacy{cudaStreamLegacy};
  model::worker owner{0};
  model::worker capturing{0};
  model::worker other{0};
  model::stream* const s = made_stream();
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    void* p = nullptr;
    owner.call([&] { p = c.cache.allocate(legacy, 4096); });
    capturing.call([&] {
      std::lock_guard lock{the().mutex};
      the().begin_capture(*s, static_cast<cudaStreamCaptureMode>(mode), capturing.id());
    });
    CUcontext left_with = reinterpret_cast<CUcontext>(1);
    other.call([&] {
      ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(nullptr), CUDA_SUCCESS);
      c.cache.deallocate(legacy, p, 4096);
      void* const q = c.cache.allocate(legacy, 4096);
      c.cache.deallocate(legacy, q, 4096);
      left_with = rmm_next::detail::current_context_or_null();
    });
    EXPECT_EQ(left_with, nullptr);
    capturing.call([&] {
      std::lock_guard lock{the().mutex};
      EXPECT_NE(the().end_capture(*s), nullptr) << "the capture was invalidated";
    });
    EXPECT_EQ(c.cache.statistics().live_bytes, 0u);
  }
  model::report_violations(0);
}

// A block allocated on the legacy stream of a second context of the device (and used there), freed
// by a thread without a context once the host has seen that work finish: the free runs in the
// primary context lent for the call, and the second context's next allocation is ordered after
// every use (the model checks each one), whether that context still lives or was destroyed and
// its thread went back to the primary context.
TEST(SegmentCacheModel, AThreadWithoutAContextFreesABlockOfASecondContextAlsoOneSinceDestroyed)
{
  for (bool const destroy : {false, true}) {
    SCOPED_TRACE(destroy);
    cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
    cuda::stream_ref const legacy{cudaStreamLegacy};
    int const second = the().create_context(0);
    model::worker owner{second};
    model::worker other{0};
    void* p = nullptr;
    owner.call([&] {
      p = c.cache.allocate(legacy, 4096);
      std::lock_guard lock{the().mutex};
      model::stream& s = *model::resolve_on(cudaStreamLegacy);
      model::enqueue(s);                       // a kernel uses the block
      model::merge(the().completed, s.clock);  // and the host waits for it
    });
    if (destroy) {
      owner.call([] { model::ctx_stack = {0}; });
      std::lock_guard lock{the().mutex};
      the().destroy_context(second);
    }
    CUcontext left_with = reinterpret_cast<CUcontext>(1);
    other.call([&] {
      ASSERT_EQ(rmm_next::detail::driver().ctx_set_current(nullptr), CUDA_SUCCESS);
      c.cache.deallocate(legacy, p, 4096);
      left_with = rmm_next::detail::current_context_or_null();
    });
    EXPECT_EQ(left_with, nullptr);
    EXPECT_EQ(c.cache.statistics().live_bytes, 0u);
    owner.call([&] {
      void* const q = c.cache.allocate(legacy, 4096);
      ASSERT_NE(q, nullptr);
      c.cache.deallocate(legacy, q, 4096);
    });
    EXPECT_EQ(c.cache.statistics().lost_bytes, 0u);
  }
  model::report_violations(0);
}

// A thread allocates and frees on its per-thread default stream, past the first frees (each
// fenced) until the last ones are not, and exits with a kernel still using the last block. The
// stream ends with the thread, so only its exit can fence those frees: after it, a trim from
// another thread gives every idle segment back, and the pool holds nothing more.
TEST(SegmentCacheModel, AThreadThatExitsFencesItsPerThreadStreamsLastFrees)
{
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  auto& cache = c.cache;
  auto& ps    = c.ps;
  cuda::stream_ref const own{cudaStreamPerThread};
  rmm_next::segment_cache_statistics st{};
  model::stream* used = nullptr;
  model::vclock last_use;
  {
    model::worker thread{0};
    thread.call([&] {
      for (int i = 0; i < 4096 && (i < 1024 || st.unproven_bytes == 0); ++i) {
        std::size_t const bytes = std::size_t{4096} << (i % 12);  // 4 KiB to 8 MiB
        void* p                 = cache.allocate(own, bytes);
        {
          std::lock_guard lock{the().mutex};
          used = model::resolve_on(cudaStreamPerThread);
          model::enqueue(*used);  // a kernel uses the block
          last_use = used->clock;
        }
        cache.deallocate(own, p, bytes);
        st = cache.statistics();
      }
    });
    ASSERT_GT(st.unproven_bytes, 0u);
  }  // the thread exits; its per-thread default stream ends
  model::worker other{0};
  other.call([&] { (void)cache.trim(); });
  st = cache.statistics();
  EXPECT_EQ(st.unproven_bytes, 0u);
  EXPECT_EQ(st.idle_bytes, 0u);
  EXPECT_EQ(st.segment_bytes, 0u);
  EXPECT_EQ(ps.in_use, 0u);
  // What went back to the pool went back behind the exiting thread's last use of it.
  other.call([&] {
    cuda::stream_ref const zero{cudaStream_t{}};
    void* p = cache.allocate(zero, std::size_t{8} << 20);
    {
      std::lock_guard lock{the().mutex};
      model::stream* s = model::resolve_on(cudaStream_t{});
      if (!model::covers(model::done_before(*s), last_use)) {
        the().violation("a segment went back before the exited thread's last use of it was done");
      }
    }
    cache.deallocate(zero, p, std::size_t{8} << 20);
  });
  model::report_violations(0);
}

// A child forked by a thread that took segments on its per-thread default stream inherits that
// thread's exit registry. The child cannot use the driver, and the stream is its parent's: when the
// child's thread exits (std::exit runs its thread-local destructors), the exit fence must do
// nothing. The parent's thread still fences its lane when it exits.
TEST(SegmentCacheModel, AForkedChildsExitFencesNothingAndTheParentsThreadStillDoes)
{
  rmm_next::detail::watch_runtime_teardown();  // as the first CUDA call of a resource does
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  auto& cache = c.cache;
  rmm_next::segment_cache_statistics st{};
  std::string child;
  {
    model::worker thread{0};
    thread.call([&] {
      cuda::stream_ref const own{cudaStreamPerThread};
      for (int i = 0; i < 4096 && (i < 1024 || st.unproven_bytes == 0); ++i) {
        std::size_t const bytes = std::size_t{4096} << (i % 12);  // 4 KiB to 8 MiB
        cache.deallocate(own, cache.allocate(own, bytes), bytes);
        st = cache.statistics();
      }
      child = rmm_next::test::run_in_forked_child([&] {
        // Runs after this thread's thread-local destructors, std::exit's first step.
        static rmm_next::segment_cache_adaptor<model_pool>* inherited;
        static std::uint64_t unproven;
        inherited = &cache;
        unproven  = st.unproven_bytes;
        std::atexit(+[] {
          int code = 0;
          if (inherited->statistics().unproven_bytes != unproven) { code |= 1; }
          if (!the().violations.empty()) { code |= 2; }
          std::_Exit(code);
        });
        std::exit(0);
        return 0;
      });
    });
    ASSERT_GT(st.unproven_bytes, 0u);
    EXPECT_EQ(cache.statistics().unproven_bytes, st.unproven_bytes);  // the parent's lane as it was
  }  // the parent's thread exits and fences its lane
  EXPECT_EQ(child, "") << "bits: 1 the child's exit fenced its parent's stream, 2 a driver call "
                          "the model refused";
  EXPECT_EQ(cache.statistics().unproven_bytes, 0u);
  model::worker other{0};
  other.call([&] { EXPECT_EQ(cache.trim(), st.idle_bytes); });
  EXPECT_EQ(c.ps.in_use, 0u);
  model::report_violations(0);
}

// Blocks allocated on one stream and all freed on another (a producer and a consumer stream): no
// free ever joins the segment's own lane, so no lane fence is owed; each free carries its own
// fence. Once idle, the segment goes back behind those fences, without its stream being used or
// named again, and what the pool hands out next is ordered after the blocks' last uses.
TEST(SegmentCacheModel, ASegmentFreedOnlyOnAnotherStreamGoesBackBehindThoseFrees)
{
  cache_over_pool c{std::size_t{64} << 20, giving_idle_segments_back()};
  model::worker thread{0};
  model::stream* const producer = made_stream();
  model::stream* const consumer = made_stream();
  auto const handle = [](model::stream* s) { return reinterpret_cast<cudaStream_t>(s); };
  model::vclock last_use;
  thread.call([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) {
      blocks.push_back(c.cache.allocate(cuda::stream_ref{handle(producer)}, 4096));
    }
    {
      std::lock_guard lock{the().mutex};
      model::enqueue(*producer);  // kernels fill the blocks
      model::user_order(reinterpret_cast<CUstream>(producer), 0, *consumer);
      model::enqueue(*consumer);  // and others read them
      last_use = consumer->clock;
    }
    for (void* p : blocks) {
      c.cache.deallocate(cuda::stream_ref{handle(consumer)}, p, 4096);
    }
  });
  rmm_next::segment_cache_statistics const st = c.cache.statistics();
  EXPECT_EQ(st.live_bytes, 0u);
  EXPECT_EQ(st.unproven_bytes, 0u);
  EXPECT_EQ(st.idle_bytes, 0u);
  EXPECT_EQ(st.released_segments, 1u);
  EXPECT_EQ(c.ps.in_use, 0u);
  thread.call([&] {  // the pool's next user of that memory waits for the blocks' last uses
    model::stream* const other = made_stream();
    void* p = c.pool.allocate(cuda::stream_ref{handle(other)}, std::size_t{2} << 20);
    {
      std::lock_guard lock{the().mutex};
      if (!model::covers(model::done_before(*other), last_use)) {
        the().violation("the segment went back before the blocks' last uses were done");
      }
    }
    c.pool.deallocate(cuda::stream_ref{handle(other)}, p, std::size_t{2} << 20);
  });
  model::report_violations(0);
}

// PyTorch's two threads on the legacy stream: the main thread allocates, the autograd thread frees
// half, and both allocate again from what the other freed. One lane: after a trim on stream 0
// from either thread nothing idle stays, proven or not, and the pool holds nothing more.
TEST(SegmentCacheModel, TwoThreadsOnTheLegacyStreamLeaveNothingIdleAfterATrim)
{
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  auto& cache = c.cache;
  auto& ps    = c.ps;
  model::worker main_thread{0};
  model::worker autograd{0};
  cuda::stream_ref const zero{cudaStream_t{}};
  std::mt19937_64 rng{7};
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int step = 0; step < 20; ++step) {
    main_thread.call([&] {
      for (int i = 0; i < 16; ++i) {
        std::size_t const bytes = std::size_t{512} << (rng() % 16);  // 512 B to 16 MiB
        blocks.emplace_back(cache.allocate(zero, bytes), bytes);
      }
    });
    autograd.call([&] {  // frees every other block, and allocates its own
      for (std::size_t i = 0; i < blocks.size(); i += 2) {
        cache.deallocate(zero, blocks[i].first, blocks[i].second);
      }
      std::vector<std::pair<void*, std::size_t>> kept;
      for (std::size_t i = 1; i < blocks.size(); i += 2) {
        kept.push_back(blocks[i]);
      }
      blocks = std::move(kept);
      for (int i = 0; i < 4; ++i) {
        std::size_t const bytes = std::size_t{4096} << (rng() % 10);
        blocks.emplace_back(cache.allocate(zero, bytes), bytes);
      }
    });
    main_thread.call([&] {
      for (auto const& [p, bytes] : blocks) {
        cache.deallocate(zero, p, bytes);
      }
      blocks.clear();
    });
  }
  rmm_next::segment_cache_statistics const before = cache.statistics();
  EXPECT_GT(before.hits, before.misses);
  EXPECT_GT(before.idle_bytes, 0u);
  main_thread.call([&] { (void)cache.trim(zero); });
  rmm_next::segment_cache_statistics const after = cache.statistics();
  EXPECT_EQ(after.live_bytes, 0u);
  EXPECT_EQ(after.idle_bytes, 0u);
  EXPECT_EQ(after.unproven_bytes, 0u);
  EXPECT_EQ(after.segment_bytes, 0u);
  EXPECT_EQ(ps.in_use, 0u);
  model::report_violations(7);
}

}  // namespace

// The allocator plugin vouches for a stream it has just found eager (detail::eager_stream_scope)
// around one call into the cache. A block of stream `s` is cached; `s` is then captured (every
// mode), and the cache is called on `s` after a scope for `s` ended, inside a scope for another
// stream, and from another thread while a scope for `s` lasts on this one. Each time the cache
// must ask `s`, find it captured and bypass: asking a captured stream for its lane, as a hit does,
// would invalidate the capture (a violation of the model). Inside a live scope for `s` after the
// capture, the cached block is served.
TEST(SegmentCacheModel, AVouchForAStreamEndsWithItsScopeAndStaysOnItsThread)
{
  using rmm_next::detail::eager_stream_scope;
  cache_over_pool c{std::size_t{256} << 20, keeping_every_idle_segment()};
  auto& cache = c.cache;
  model::worker thread{0};
  model::worker other{0};
  model::stream* const s      = made_stream();
  model::stream* const t      = made_stream();
  auto const handle_s         = reinterpret_cast<cudaStream_t>(s);
  auto const handle_t         = reinterpret_cast<cudaStream_t>(t);
  constexpr std::size_t bytes = 4096;
  void* cached                = nullptr;
  thread.call([&] {
    cached = cache.allocate(handle_s, bytes);
    cache.deallocate(handle_s, cached, bytes);
  });
  for (int mode = 0; mode < 3; ++mode) {
    SCOPED_TRACE(mode);
    std::uint64_t const bypasses = cache.statistics().bypasses;
    std::vector<void*> graph_blocks;
    thread.call([&] {
      {
        std::lock_guard lock{the().mutex};
        the().begin_capture(*s, static_cast<cudaStreamCaptureMode>(mode), thread.id());
      }
      {
        eager_stream_scope const ended{handle_s};
      }
      graph_blocks.push_back(cache.allocate(handle_s, bytes));
      {
        eager_stream_scope const outer{handle_s};
        eager_stream_scope const inner{handle_t};
        graph_blocks.push_back(cache.allocate(handle_s, bytes));
        eager_stream_scope const held{handle_s};
        other.call([&] { graph_blocks.push_back(cache.allocate(handle_s, bytes)); });
      }
      for (void* p : graph_blocks) {
        cache.deallocate(handle_s, p, bytes);
      }
      std::lock_guard lock{the().mutex};
      EXPECT_NE(the().end_capture(*s), nullptr) << "the capture was invalidated";
    });
    EXPECT_EQ(cache.statistics().bypasses, bypasses + graph_blocks.size());
    for (void* p : graph_blocks) {
      EXPECT_NE(p, cached);
    }
  }
  thread.call([&] {
    eager_stream_scope const vouched{handle_s};
    void* const again = cache.allocate(handle_s, bytes);
    EXPECT_EQ(again, cached);
    cache.deallocate(handle_s, again, bytes);
  });
  EXPECT_EQ(cache.statistics().hits, 1u);
  model::report_violations(0);
}

// A child forked while a cache lives cannot use the driver: destroying the cache there destroys no
// stream and releases no retain of the primary context (both are the parent's).
TEST(SegmentCacheModel, ACacheDestroyedInAForkedChildReleasesNothingOfItsParents)
{
  rmm_next::detail::watch_runtime_teardown();  // as the first CUDA call of a resource does
  auto c = std::make_unique<cache_over_pool>(std::size_t{64} << 20, keeping_every_idle_segment());
  int const retains = the().primary_retains[0];
  ASSERT_GT(retains, 0);
  std::string const child = rmm_next::test::run_in_forked_child([&] {
    the().violations.clear();
    std::size_t const streams_made = the().created_in.size();
    c.reset();
    int code = the().primary_retains[0] == retains ? 0 : 1;
    if (!the().violations.empty()) { code |= 2; }
    if (the().created_in.size() != streams_made) { code |= 4; }
    return code;
  });
  EXPECT_EQ(child, "") << "bits: 1 a retain was released, 2 a driver call the model refused, "
                          "4 a stream was made";
  EXPECT_EQ(the().primary_retains[0], retains);  // the parent's cache still holds its own
  c.reset();
  EXPECT_EQ(the().primary_retains[0], retains - 1);
  model::report_violations(0);
}

// A child forked while a thread of the parent was inside the cache (a miss waiting on the
// upstream, under the cache's lock) has no thread that will ever leave it. Destroying the cache
// there must not wait for the lock: the child leaves the cache's host bookkeeping as it is, and
// asks the driver nothing.
TEST(SegmentCacheModel, ACacheDestroyedInAForkedChildWhileAParentThreadWasInsideItDoesNotWait)
{
  rmm_next::detail::watch_runtime_teardown();
  auto park  = std::make_shared<model::parking>();
  auto cache = std::make_unique<rmm_next::segment_cache_adaptor<model::parking_pool>>(
    model::parking_pool{std::size_t{64} << 20, park}, 0, keeping_every_idle_segment());
  model::worker worker{0};
  cuda::stream_ref const zero{cudaStream_t{}};
  void* parked = nullptr;
  park->armed  = true;
  std::thread inside{[&] { worker.call([&] { parked = cache->allocate(zero, 4096); }); }};
  park->wait_inside();
  // Without the fix the child waits for the lock (statistics, then the destructor) until its
  // alarm kills it.
  EXPECT_EQ(model::destroyed_in_forked_child(cache), "");
  park->release = true;
  inside.join();
  ASSERT_NE(parked, nullptr);  // the parent's cache goes on
  worker.call([&] { cache->deallocate(zero, parked, 4096); });
  EXPECT_EQ(cache->statistics().live_bytes, 0U);
  cache.reset();
  model::report_violations(0);
}

// A cache made while nothing else holds its device's primary context (a process whose runtime has
// not touched the device yet, over an upstream that has not either): the cache's own stream lives
// in that context, which the cache keeps while it lives and lets go of after destroying the stream.
// Last in this program: the model's primary context of device 0 goes at its end, as it would in
// such a process.
TEST(SegmentCacheModel, ACacheKeepsThePrimaryContextOfItsStreamUntilItGoes)
{
  model::start_with_primary_unheld(0);
  {
    cache_over_pool c{std::size_t{64} << 20, keeping_every_idle_segment()};
    EXPECT_TRUE(model::primary_active(0)) << "the context went while the cache lived";
    model::worker thread{0};
    thread.call([&] {
      cuda::stream_ref const zero{cudaStream_t{}};
      c.cache.deallocate(zero, c.cache.allocate(zero, 4096), 4096);
    });
  }
  EXPECT_FALSE(model::primary_active(0)) << "the cache kept the context after it went";
  model::report_violations(0);
}
