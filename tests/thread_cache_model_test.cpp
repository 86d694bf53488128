/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A model-based randomized test of thread_cache_adaptor, on the CPU, over the driver model of
// support/driver_model.hpp: contexts, streams, events and captures in which every stream carries a
// vector clock, what it is ordered after. A model pool stands upstream. Worker threads, driven one
// operation at a time from a seeded sequence, allocate and free on streams of two contexts, hand
// blocks across streams with events, exit, switch contexts, destroy streams (whose handles new
// streams then take), flush, capture in every mode and run out of memory. The model checks two
// things throughout:
// - every block the adaptor hands out is ordered after every earlier use of it;
// - no call is made that the driver would refuse, or that would invalidate a capture, while
//   another stream is being captured.
// RMM_NEXT_MODEL_SEED picks the seed (printed) and RMM_NEXT_MODEL_SECONDS the time (default 5).

#include "support/driver_model.hpp"
#include "support/model_pool.hpp"
#include "support/parking_pool.hpp"
#include "support/unknown_device.hpp"

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using model::block_record;
using model::model_pool;
using model::the;

/** @brief A block the test holds: where it was last used. */
struct live_block {
  void* ptr;
  std::size_t bytes;
  cudaStream_t handle;
  model::stream* on;  ///< the stream `handle` named when it was last used
  bool graph;
};

using model::resolve_on;
using model::worker;

TEST(ThreadCacheModel, EveryBlockHandedOutIsOrderedAfterItsLastUseAndNoCaptureIsHarmed)
{
  auto const [seed, seconds] = model::settings_from_environment("thread cache model", 5.0);
  std::mt19937_64 rng{seed};
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };

  model_pool pool{std::size_t{1} << 20};
  model_pool::state& ps = pool.get();
  rmm_next::thread_cache_options options;
  options.max_block_size              = 8192;
  options.max_streams_per_thread      = 3;
  options.max_cached_bytes_per_thread = 256 << 10;
  options.fence_interval              = 1 + pick(8);
  std::printf("fence_interval %zu\n", options.fence_interval);
  auto cache = std::make_unique<rmm_next::thread_cache_adaptor<model_pool>>(pool, options);

  std::vector<std::unique_ptr<worker>> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(std::make_unique<worker>(static_cast<int>(pick(2))));
  }
  std::vector<cudaStream_t> streams;
  auto new_stream = [&](bool reuse) {
    std::lock_guard lock{the().mutex};
    int const ctx = pick(8) == 0 ? 2 : static_cast<int>(pick(2));
    streams.push_back(
      reinterpret_cast<cudaStream_t>(the().create_stream(ctx, pick(2) == 0, reuse)));
  };
  for (int i = 0; i < 6; ++i) {
    new_stream(false);
  }
  std::vector<live_block> live;
  std::set<void*> held;
  struct capture_state {
    bool on{false};
    std::size_t worker{};
    cudaStream_t handle{};
    model::stream* s{};
  } capture;
  std::map<std::string, long> ops;

  // The handles a worker may use: every regular stream, and the default streams of its context;
  // mostly two of them, which it keeps for a while, so that the caches have blocks to hand out.
  std::map<std::size_t, std::pair<std::size_t, std::size_t>> favourites;
  auto handle_for = [&](std::size_t w) -> cudaStream_t {
    auto const any = [&] { return pick(streams.size() + 2); };
    auto& f        = favourites.try_emplace(w, any(), any()).first->second;
    if (pick(64) == 0) { f = {any(), any()}; }
    std::size_t k = pick(8) == 0 ? any() : (pick(2) == 0 ? f.first : f.second);
    if (k >= streams.size() + 2) { k = any(); }
    if (k < streams.size()) { return streams[k]; }
    return k == streams.size() ? cudaStream_t{} : cudaStreamPerThread;
  };

  auto allocate_on = [&](std::size_t w, cudaStream_t h, std::size_t bytes) {
    workers[w]->call([&] {
      model::stream* s = nullptr;
      {
        std::lock_guard lock{the().mutex};
        s = resolve_on(h);
      }
      void* p = nullptr;
      try {
        p = cache->allocate(cuda::stream_ref{h}, bytes);
      } catch (rmm_next::out_of_memory const&) {
        ++ops["out of memory"];
        return;
      }
      std::lock_guard lock{the().mutex};
      auto it = ps.blocks.find(reinterpret_cast<std::uintptr_t>(p));
      if (it == ps.blocks.end() || !it->second.live) {
        the().violation("the adaptor handed out a block the pool does not hold");
        return;
      }
      if (!held.insert(p).second) { the().violation("the adaptor handed out a held block"); }
      block_record& b = it->second;
      if (b.graph && !s->capturing) { the().violation("graph memory was handed out eagerly"); }
      if (!s->capturing && !model::covers(model::done_before(*s), b.last_use)) {
        the().violation("a block was handed out before its last use was done");
      }
      model::enqueue(*s);
      model::merge(b.last_use, s->clock);
      live.push_back({p, bytes, h, s, b.graph});
    });
  };
  auto free_block = [&](std::size_t w, std::size_t i) {
    live_block const b = live[i];
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    held.erase(b.ptr);
    workers[w]->call([&] { cache->deallocate(cuda::stream_ref{b.handle}, b.ptr, b.bytes); });
  };
  // A worker whose handle resolves to the stream of block i, or none.
  auto worker_for = [&](live_block const& b) -> std::ptrdiff_t {
    std::vector<std::size_t> fits;
    for (std::size_t w = 0; w < workers.size(); ++w) {
      model::stream* s = nullptr;
      workers[w]->call([&] {
        std::lock_guard lock{the().mutex};
        if (model::is_legacy(reinterpret_cast<CUstream>(b.handle)) ||
            b.handle == cudaStreamPerThread) {
          s = resolve_on(b.handle);
        } else {
          s = b.on;
        }
      });
      if (s == b.on) { fits.push_back(w); }
    }
    if (fits.empty()) { return -1; }
    return static_cast<std::ptrdiff_t>(fits[pick(fits.size())]);
  };
  // Moves block i onto a regular stream of the worker's choice, ordered by an event.
  auto hand_over = [&](std::size_t w, std::size_t i, cudaStream_t to) {
    live_block& b = live[i];
    workers[w]->call([&] {
      std::lock_guard lock{the().mutex};
      model::stream* t = resolve_on(to);
      model::user_order(reinterpret_cast<CUstream>(b.handle), b.on->ctx, *t);
      model::enqueue(*t);
      model::merge(ps.blocks[reinterpret_cast<std::uintptr_t>(b.ptr)].last_use, t->clock);
      b.handle = to;
      b.on     = t;
    });
  };
  // Blocks on a worker's own default streams move to a regular stream before it leaves them.
  auto hand_over_defaults = [&](std::size_t w) {
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (live[i].handle != cudaStreamPerThread && live[i].handle != cudaStream_t{}) { continue; }
      std::ptrdiff_t const owner = worker_for(live[i]);
      if (owner != static_cast<std::ptrdiff_t>(w)) { continue; }
      if (capture.on && live[i].on == capture.s) { continue; }
      // Not to a stream being captured: eager memory freed into a capture is a user's error.
      cudaStream_t to{};
      do {
        to = streams[pick(streams.size())];
      } while (capture.on && resolve_on(to) == capture.s);
      hand_over(w, i, to);
    }
  };

  long const steps = model::run_steps(seconds, [&] {
    std::size_t const w = pick(workers.size());
    std::size_t const r = pick(100);
    if (r < 40 || (r < 80 && live.empty())) {  // allocate
      cudaStream_t h = handle_for(w);
      if (capture.on && w == capture.worker && pick(2) == 0) { h = capture.handle; }
      std::size_t constexpr common[] = {256, 1000, 4096, 8192};
      std::size_t const bytes        = pick(50) == 0  ? 16384 + pick(16384)
                                       : pick(4) == 0 ? 256 + pick(8192)
                                                      : common[pick(4)];
      if (live.size() > 48) { return; }
      allocate_on(w, h, pick(500) == 0 ? SIZE_MAX : bytes);
      ++ops["allocate"];
    } else if (r < 75) {  // free
      std::size_t const i        = pick(live.size());
      std::ptrdiff_t const owner = worker_for(live[i]);
      if (owner < 0) { return; }
      if (capture.on && live[i].on == capture.s &&
          static_cast<std::size_t>(owner) != capture.worker) {
        return;
      }
      free_block(static_cast<std::size_t>(owner), i);
      ++ops["free"];
    } else if (r < 80) {  // hand a block to another stream with an event
      std::size_t const i        = pick(live.size());
      std::ptrdiff_t const owner = worker_for(live[i]);
      if (owner < 0 || live[i].graph || (capture.on && live[i].on == capture.s)) { return; }
      cudaStream_t const to = streams[pick(streams.size())];
      if (capture.on && resolve_on(to) == capture.s) { return; }
      hand_over(static_cast<std::size_t>(owner), i, to);
      ++ops["hand over"];
    } else if (r < 83) {  // flush from any thread and context
      workers[w]->call([&] { (void)cache->flush(); });
      ++ops["flush"];
    } else if (r < 86) {  // a thread exits; another starts
      if (capture.on && w == capture.worker) { return; }
      hand_over_defaults(w);
      workers[w] = std::make_unique<worker>(static_cast<int>(pick(2)));
      ++ops["thread exit"];
    } else if (r < 89) {  // a thread switches context
      if (capture.on && w == capture.worker) { return; }
      hand_over_defaults(w);
      int const ctx = static_cast<int>(pick(2));
      workers[w]->call([&] { model::ctx_stack = {ctx}; });
      workers[w]->ctx_ = ctx;
      ++ops["context switch"];
    } else if (r < 90) {  // a stream is destroyed after its blocks are freed; a new one is made
      if (pick(10) != 0) { return; }
      std::size_t const k  = pick(streams.size());
      cudaStream_t const h = streams[k];
      if (capture.on && resolve_on(h) == capture.s) { return; }
      for (std::size_t i = live.size(); i-- > 0;) {
        if (live[i].handle == h) { free_block(w, i); }
      }
      {
        std::lock_guard lock{the().mutex};
        model::stream_destroy(reinterpret_cast<CUstream>(h));
      }
      streams.erase(streams.begin() + static_cast<std::ptrdiff_t>(k));
      new_stream(pick(2) == 0);
      ++ops["stream destroyed"];
    } else if (r < 95) {  // a capture begins or ends on a worker's stream
      if (!capture.on) {
        cudaStream_t const h = pick(3) == 0 ? cudaStreamPerThread : streams[pick(streams.size())];
        model::stream* s     = nullptr;
        workers[w]->call([&] {
          std::lock_guard lock{the().mutex};
          s = resolve_on(h);
        });
        bool busy = false;
        for (auto const& b : live) {
          busy = busy || b.on == s;
        }
        // A stream with blocks would have them freed into the graph; a blocking one would make
        // the legacy stream's use an error of the test's own.
        if (busy || s->blocking) { return; }
        std::lock_guard lock{the().mutex};
        the().begin_capture(*s, static_cast<cudaStreamCaptureMode>(pick(3)), workers[w]->id());
        capture = {true, w, h, s};
        ++ops["capture"];
      } else {
        std::lock_guard lock{the().mutex};
        if (model::graph* g = the().end_capture(*capture.s)) { the().destroy_graph(*g); }
        capture.on = false;
        // Graph memory left live is the graph's output: the test frees it eagerly later.
      }
    } else if (r < 96) {  // where no capture runs: everything back, unproven blocks too
      if (capture.on || pick(4) != 0) { return; }
      workers[w]->call([&] { (void)cache->synchronize_and_flush(); });
      if (cache->statistics().unproven_bytes != 0) {
        the().violation("synchronize_and_flush left unproven blocks");
      }
      ++ops["sync and flush"];
    } else if (r < 97) {  // the host waits for a stream
      cudaStream_t const h = streams[pick(streams.size())];
      std::lock_guard lock{the().mutex};
      model::stream* s = resolve_on(h);
      if (s != nullptr && !s->capturing) { model::merge(the().completed, s->clock); }
    }
  });

  if (capture.on) {
    std::lock_guard lock{the().mutex};
    if (model::graph* g = the().end_capture(*capture.s)) { the().destroy_graph(*g); }
  }
  rmm_next::thread_cache_statistics const st = cache->statistics();
  std::printf("%ld steps; hits %llu, misses %llu, bypasses %llu, flushes %llu, unproven %llu B\n",
              steps,
              static_cast<unsigned long long>(st.hits),
              static_cast<unsigned long long>(st.misses),
              static_cast<unsigned long long>(st.bypasses),
              static_cast<unsigned long long>(st.flushes),
              static_cast<unsigned long long>(st.unproven_bytes));
  {
    std::size_t held_bytes = 0;
    for (auto const& b : live) {
      held_bytes += b.graph ? 0 : b.bytes;
    }
    std::printf("pool in use %zu B, held by the test %zu B, cached %llu B\n",
                ps.in_use,
                held_bytes,
                static_cast<unsigned long long>(st.cached_bytes));
  }
  for (auto const& [name, n] : ops) {
    std::printf("  %-16s %ld\n", name.c_str(), n);
  }
  for (std::size_t i = live.size(); i-- > 0;) {
    std::ptrdiff_t const owner = worker_for(live[i]);
    if (owner >= 0) { free_block(static_cast<std::size_t>(owner), i); }
  }
  workers.clear();
  cache.reset();
  model::report_violations(seed);
  EXPECT_GT(st.hits, 0u);
  EXPECT_GT(ops["capture"], 0);
}

/** @brief The model pool seen through a type that does not say its device, as refs do. */
class deviceless_pool {
 public:
  explicit deviceless_pool(model_pool p) : p_{std::move(p)} {}
  [[nodiscard]] void* allocate(cuda::stream_ref s, std::size_t bytes, std::size_t a = 256)
  {
    return p_.allocate(s, bytes, a);
  }
  void deallocate(cuda::stream_ref s, void* ptr, std::size_t bytes, std::size_t a = 256) noexcept
  {
    p_.deallocate(s, ptr, bytes, a);
  }
  friend bool operator==(deviceless_pool const& a, deviceless_pool const& b) noexcept
  {
    return a.p_ == b.p_;
  }
  friend constexpr void get_property(deviceless_pool const&, cuda::mr::device_accessible) noexcept
  {
  }

 private:
  model_pool p_;
};

TEST(ThreadCacheModel, AnAdaptorOfAnotherDeviceReleasesOnAStreamOfThatDevice)
{
  the().violations.clear();  // this test's own, not those of a test before it
  // Device 0 is current; the adaptor is told its upstream is device 1's (as enable_thread_cache(1)
  // does for the ref it wraps), and a block is freed on a stream of device 1.
  model::ctx_stack = {0};
  cudaStream_t stream{};
  {
    std::lock_guard lock{the().mutex};
    stream = reinterpret_cast<cudaStream_t>(the().create_stream(2, false, false));
  }
  std::size_t const made_before = the().created_in.size();
  {
    rmm_next::thread_cache_adaptor<deviceless_pool> cache{deviceless_pool{model_pool{1 << 20}}, 1};
    EXPECT_EQ(cache.device(), 1);
    void* p = cache.allocate(cuda::stream_ref{stream}, 4096);
    cache.deallocate(cuda::stream_ref{stream}, p, 4096);
    EXPECT_EQ(cache.flush(), 4096u);
  }
  ASSERT_EQ(the().created_in.size(), made_before + 1);  // the release stream
  EXPECT_EQ(the().created_in.back(), 2) << "not in device 1's primary context";
  EXPECT_EQ(model::current_ctx(), 0);
  {
    rmm_next::thread_cache_adaptor<deviceless_pool> cache{deviceless_pool{model_pool{1 << 20}}};
    EXPECT_EQ(cache.device(), 0);  // without a device: the current one
  }
  EXPECT_TRUE(the().violations.empty()) << the().violations.front();
}

// A thread caches blocks freed on its per-thread default stream of a second context, past the
// stream's last fence, goes back to the primary context, and the second context is destroyed before
// the thread exits. The exit fences the thread's per-thread streams: never by making the destroyed
// context current (the driver refuses it, or another context took its address), and the fences
// its list took while the context lived stay valid (they were relayed into the primary context):
// the cached blocks they prove go back, the primary context's list is fenced as before, and only
// the second context's frees after its last fence stay unproven.
TEST(ThreadCacheModel, AThreadWhoseSecondContextIsDestroyedExitsWithoutMakingItCurrent)
{
  the().violations.clear();  // this test's own, not those of a test before it
  model_pool pool{std::size_t{1} << 20};
  model_pool::state& ps = pool.get();
  rmm_next::thread_cache_options options;
  options.fence_interval = 64;  // the last frees of each list stay unfenced
  rmm_next::thread_cache_adaptor<model_pool> cache{pool, options};
  int second = 0;
  {
    std::lock_guard lock{the().mutex};
    second = the().create_context(0);
  }
  cuda::stream_ref const own{cudaStreamPerThread};
  auto use_own = [&] {
    for (int i = 0; i < 1000; ++i) {
      cache.deallocate(own, cache.allocate(own, 4096), 4096);
    }
  };
  {
    worker thread{0};
    thread.call([&] {
      model::ctx_stack = {second};
      use_own();
      model::ctx_stack = {0};
      use_own();
    });
    std::lock_guard lock{the().mutex};
    the().destroy_context(second);
  }  // the thread exits
  EXPECT_TRUE(the().violations.empty()) << the().violations.front();
  auto const st = cache.statistics();
  EXPECT_EQ(st.cached_bytes, 0u);
  // The second context's last frees, after its list's last fence, stay unproven and allocated;
  // everything else went back.
  EXPECT_GT(st.unproven_bytes, 0u);
  EXPECT_EQ(ps.in_use, st.unproven_bytes);
}

TEST(ThreadCacheModel, TheDeviceOfAContextThatTookADestroyedContextsAddressIsAskedAgain)
{
  std::thread{[] {
    model::ctx_stack = {1};  // a second context of device 0
    EXPECT_EQ(rmm_next::detail::current_device_or_none(), 0);
    {
      std::lock_guard lock{the().mutex};
      the().contexts[1].device = 1;  // destroyed; a context of device 1 made at its address
    }
    EXPECT_EQ(rmm_next::detail::current_device_or_none(), 1);
    {
      std::lock_guard lock{the().mutex};
      the().contexts[1].device = 0;
    }
    model::ctx_stack = {0};  // a primary context: its device is cached, and stays right
    EXPECT_EQ(rmm_next::detail::current_device_or_none(), 0);
    EXPECT_EQ(rmm_next::detail::current_device_or_none(), 0);
  }}.join();
}

// A child forked while a thread of the parent was inside the adaptor's registry (a flush returning
// blocks upstream, under the registry's lock) has no thread that will ever leave it. Destroying
// the adaptor there must not wait for that lock, and asks the driver nothing.
TEST(ThreadCacheModel, AnAdaptorDestroyedInAForkedChildWhileAParentThreadWasInsideItDoesNotWait)
{
  rmm_next::detail::watch_runtime_teardown();
  auto park  = std::make_shared<model::parking>();
  auto cache = std::make_unique<rmm_next::thread_cache_adaptor<model::parking_pool>>(
    model::parking_pool{std::size_t{1} << 20, park});
  worker owner{0};
  worker flusher{0};
  cuda::stream_ref const zero{cudaStream_t{}};
  owner.call([&] { cache->deallocate(zero, cache->allocate(zero, 4096), 4096); });
  ASSERT_EQ(cache->statistics().cached_bytes, 4096U);
  park->armed = true;
  std::thread inside{[&] { flusher.call([&] { (void)cache->synchronize_and_flush(); }); }};
  park->wait_inside();
  // Without the fix the child waits for the lock (statistics, then the destructor) until its
  // alarm kills it.
  EXPECT_EQ(model::destroyed_in_forked_child(cache), "");
  park->release = true;
  inside.join();
  EXPECT_EQ(cache->statistics().cached_bytes, 0U);  // the parent's flush went on
  owner.call([&] { cache->deallocate(zero, cache->allocate(zero, 4096), 4096); });
  cache.reset();
  model::report_violations(0);
}

// An adaptor made while nothing else holds its device's primary context (a process whose runtime
// has not touched the device yet, over an upstream that has not either): its release stream lives
// in that context, which the adaptor keeps while it lives and lets go of after destroying the
// stream. Last in this program: the model's primary context of device 0 goes at its end, as it
// would in such a process.
TEST(ThreadCacheModel, AnAdaptorKeepsThePrimaryContextOfItsReleaseStreamUntilItGoes)
{
  model::start_with_primary_unheld(0);
  model::ctx_stack = {0};
  {
    rmm_next::thread_cache_adaptor<deviceless_pool> cache{deviceless_pool{model_pool{1 << 20}}};
    EXPECT_TRUE(model::primary_active(0)) << "the context went while the adaptor lived";
    cuda::stream_ref const zero{cudaStream_t{}};
    cache.deallocate(zero, cache.allocate(zero, 4096), 4096);
    EXPECT_EQ(cache.flush(), 4096u);
  }
  EXPECT_FALSE(model::primary_active(0)) << "the adaptor kept the context after it went";
  EXPECT_TRUE(the().violations.empty()) << the().violations.front();
}

// A device id the driver does not know (the model's driver has devices 0 and 1): the constructor
// throws std::out_of_range naming the adaptor, the id and the visible devices, and retains no
// primary context, without a driver call that fails; an adaptor of a known device works after it.
TEST(ThreadCacheModel, AnUnknownDeviceIsRefusedAndRetainsNothing)
{
  the().violations.clear();  // this test's own, not those of a test before it
  model::ctx_stack         = {0};
  int const retained[2]    = {the().primary_retains[0], the().primary_retains[1]};
  int const refused_before = the().refused_device_gets;
  rmm_next::test::expect_unknown_devices_refused(
    [](int device) {
      rmm_next::thread_cache_adaptor<deviceless_pool> cache{deviceless_pool{model_pool{1 << 20}},
                                                            device};
    },
    "thread_cache_adaptor",
    2);
  EXPECT_EQ(the().refused_device_gets, refused_before)
    << "an unknown id was refused by asking the driver for it, an error the driver reports";
  EXPECT_EQ(the().primary_retains[0], retained[0]);
  EXPECT_EQ(the().primary_retains[1], retained[1]);
  {
    rmm_next::thread_cache_adaptor<deviceless_pool> cache{deviceless_pool{model_pool{1 << 20}}, 0};
    cuda::stream_ref const zero{cudaStream_t{}};
    void* const p = cache.allocate(zero, 4096);
    cache.deallocate(zero, p, 4096);
    EXPECT_EQ(cache.allocate(zero, 4096), p) << "the freed block is not the next hit";
    cache.deallocate(zero, p, 4096);
    EXPECT_EQ(cache.flush(), 4096u);
  }
  EXPECT_TRUE(the().violations.empty()) << the().violations.front();
}

}  // namespace
