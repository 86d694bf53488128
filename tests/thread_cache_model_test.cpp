/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A model-based randomized test of thread_cache_adaptor, on the CPU. The program defines the CUDA
// driver entry points the adaptor reaches (cudaGetDriverEntryPointByVersion) and the runtime's
// synchronizing calls, and answers them from a model of contexts, streams, events and captures in
// which every stream carries a vector clock: what it is ordered after. A model pool stands
// upstream. Worker threads, driven one operation at a time from a seeded sequence, allocate and
// free on streams of two contexts, hand blocks across streams with events, exit, switch contexts,
// destroy streams (whose handles new streams then take), flush, capture in every mode and run out
// of memory. The model checks two things throughout:
// - every block the adaptor hands out is ordered after every earlier use of it;
// - no call is made that the driver would refuse, or that would invalidate a capture, while
//   another stream is being captured.
// RMM_NEXT_MODEL_SEED picks the seed (printed) and RMM_NEXT_MODEL_SECONDS the time (default 5).

#include "support/entry_points.hpp"

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace model {

/** @brief What a stream's work is ordered after: for each stream uid, a position on it. */
using vclock = std::map<std::uint64_t, std::uint64_t>;

void merge(vclock& into, vclock const& from)
{
  for (auto const& [s, p] : from) {
    auto& q = into[s];
    q       = std::max(q, p);
  }
}

bool covers(vclock const& have, vclock const& need)
{
  for (auto const& [s, p] : need) {
    auto const it = have.find(s);
    if (it == have.end() || it->second < p) { return false; }
  }
  return true;
}

struct context {
  int device;
};

struct stream {
  std::uint64_t uid{};  // the stream's id (cuStreamGetId), never reused
  int ctx{};
  bool alive{true};
  bool blocking{false};
  bool capturing{false};
  cudaStreamCaptureMode mode{};
  std::uint64_t pos{0};
  vclock clock;
};

struct event {
  int ctx{};
  vclock clock;
  bool captured{false};
  bool alive{true};
};

/** @brief The whole model; every entry point locks `mutex`. */
struct world {
  std::recursive_mutex mutex;
  std::vector<context> contexts{{0}, {0}, {1}};  // 0: primary of device 0, 1: a second context
                                                 // of device 0, 2: primary of device 1
  std::vector<std::unique_ptr<stream>> streams;  // handles are addresses of these records
  std::map<int, stream*> legacy;                 // per context
  std::map<std::pair<std::thread::id, int>, stream*> per_thread;
  std::vector<std::unique_ptr<event>> events;
  std::vector<int> created_in;      // the context of every stream made through cuStreamCreate
  vclock completed;                 // what the host has seen finish
  std::map<int, vclock> graveyard;  // per context: the work of its destroyed streams
  std::uint64_t next_uid{1};
  std::vector<std::string> violations;
  int invalidated_captures{0};

  void violation(std::string what)
  {
    if (violations.size() < 20) { violations.push_back(std::move(what)); }
  }
  bool any_capture() const
  {
    return std::any_of(
      streams.begin(), streams.end(), [](auto const& s) { return s->alive && s->capturing; });
  }
  void invalidate_captures(char const* why)
  {
    for (auto& s : streams) {
      if (s->alive && s->capturing) {
        ++invalidated_captures;
        violation(std::string{"a capture was invalidated by "} + why);
      }
    }
  }
  stream* make_stream(int ctx, bool blocking)
  {
    auto s      = std::make_unique<stream>();
    s->uid      = next_uid++;
    s->ctx      = ctx;
    s->blocking = blocking;
    streams.push_back(std::move(s));
    return streams.back().get();
  }
  /** A new regular stream, taking a destroyed stream's handle when `reuse` finds one. */
  stream* create_stream(int ctx, bool blocking, bool reuse)
  {
    if (reuse) {
      for (auto& s : streams) {
        bool const special =
          std::any_of(
            legacy.begin(), legacy.end(), [&](auto const& l) { return l.second == s.get(); }) ||
          std::any_of(per_thread.begin(), per_thread.end(), [&](auto const& p) {
            return p.second == s.get();
          });
        if (!s->alive && !special) {
          *s          = stream{};
          s->uid      = next_uid++;
          s->ctx      = ctx;
          s->blocking = blocking;
          return s.get();
        }
      }
    }
    return make_stream(ctx, blocking);
  }
};

world& the()
{
  static world w;
  return w;
}

thread_local std::vector<int> ctx_stack{0};

int current_ctx() { return ctx_stack.back(); }

CUcontext ctx_handle(int c)
{
  return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(c + 1) << 4);
}
int ctx_of(CUcontext h) { return static_cast<int>(reinterpret_cast<std::uintptr_t>(h) >> 4) - 1; }

/** The stream `h` names for the calling thread, or null (a destroyed handle: a violation). */
stream* resolve(CUstream h, char const* call)
{
  world& w     = the();
  auto const v = reinterpret_cast<std::uintptr_t>(h);
  if (v == 0 || v == 1) {
    auto& s = w.legacy[current_ctx()];
    if (s == nullptr) { s = w.make_stream(current_ctx(), true); }
    return s;
  }
  if (v == 2) {
    auto& s = w.per_thread[{std::this_thread::get_id(), current_ctx()}];
    if (s == nullptr) { s = w.make_stream(current_ctx(), false); }
    return s;
  }
  auto* s = reinterpret_cast<stream*>(h);
  if (!s->alive) {
    w.violation(std::string{call} + " was given a destroyed stream's handle");
    return nullptr;
  }
  return s;
}

bool is_legacy(CUstream h)
{
  auto const v = reinterpret_cast<std::uintptr_t>(h);
  return v == 0 || v == 1;
}

bool blocking_capture_in(int ctx)
{
  for (auto const& s : the().streams) {
    if (s->alive && s->capturing && s->blocking && s->ctx == ctx) { return true; }
  }
  return false;
}

/** What work newly queued on `s` is ordered after. */
vclock done_before(stream const& s)
{
  vclock c = s.clock;
  merge(c, the().completed);
  return c;
}

void enqueue(stream& s)
{
  ++s.pos;
  s.clock[s.uid] = s.pos;
}

// ---- Driver entry points -------------------------------------------------------------------

#define LOCK \
  std::lock_guard lock_ { the().mutex }

CUresult stream_is_capturing(CUstream h, CUstreamCaptureStatus* st)
{
  LOCK;
  if (is_legacy(h) && blocking_capture_in(current_ctx())) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;  // answered without harm to the capture
  }
  stream* s = resolve(h, "cuStreamIsCapturing");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  *st = s->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult stream_get_id(CUstream h, unsigned long long* id)
{
  LOCK;
  stream* s = resolve(h, "cuStreamGetId");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->capturing) {
    s->capturing = false;
    ++the().invalidated_captures;
    the().violation("cuStreamGetId on a capturing stream invalidated its capture");
  }
  *id = s->uid;
  return CUDA_SUCCESS;
}

CUresult stream_get_ctx(CUstream h, CUcontext* c)
{
  LOCK;
  stream* s = resolve(h, "cuStreamGetCtx");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  *c = ctx_handle(s->ctx);
  return CUDA_SUCCESS;
}

CUresult ctx_get_current(CUcontext* c)
{
  *c = ctx_handle(current_ctx());
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext c)
{
  if (c != nullptr) { ctx_stack.back() = ctx_of(c); }
  return CUDA_SUCCESS;
}
CUresult ctx_push_current(CUcontext c)
{
  ctx_stack.push_back(ctx_of(c));
  return CUDA_SUCCESS;
}
CUresult ctx_pop_current(CUcontext* c)
{
  if (ctx_stack.size() < 2) { return CUDA_ERROR_INVALID_CONTEXT; }
  *c = ctx_handle(ctx_stack.back());
  ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult ctx_get_device(CUdevice* d)
{
  LOCK;
  *d = the().contexts[static_cast<std::size_t>(current_ctx())].device;
  return CUDA_SUCCESS;
}
CUresult ctx_synchronize()
{
  LOCK;
  if (the().any_capture()) { the().invalidate_captures("cuCtxSynchronize"); }
  for (auto const& s : the().streams) {
    if (s->ctx == current_ctx()) { merge(the().completed, s->clock); }
  }
  merge(the().completed, the().graveyard[current_ctx()]);
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* d, int ordinal)
{
  *d = ordinal;
  return ordinal >= 0 && ordinal < 2 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
CUresult primary_retain(CUcontext* c, CUdevice d)
{
  *c = ctx_handle(d == 0 ? 0 : 2);
  return CUDA_SUCCESS;
}
CUresult primary_release(CUdevice) { return CUDA_SUCCESS; }
CUresult primary_state(CUdevice, unsigned int* flags, int* active)
{
  *flags  = 0;
  *active = 1;
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* e, unsigned int)
{
  LOCK;
  the().events.push_back(std::make_unique<event>());
  the().events.back()->ctx = current_ctx();
  *e                       = reinterpret_cast<CUevent>(the().events.back().get());
  return CUDA_SUCCESS;
}
CUresult event_destroy(CUevent e)
{
  LOCK;
  reinterpret_cast<event*>(e)->alive = false;
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent e, CUstream h)
{
  LOCK;
  auto* ev = reinterpret_cast<event*>(e);
  if (!ev->alive) { the().violation("cuEventRecord of a destroyed event"); }
  if (is_legacy(h) && blocking_capture_in(current_ctx())) {
    the().invalidate_captures("an event recorded on the legacy stream");
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  stream* s = resolve(h, "cuEventRecord");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->ctx != ev->ctx) {
    the().violation("cuEventRecord of an event on a stream of another context");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ev->captured = s->capturing;
  ev->clock    = s->clock;
  return CUDA_SUCCESS;
}
CUresult stream_wait_event(CUstream h, CUevent e, unsigned int)
{
  LOCK;
  auto* ev  = reinterpret_cast<event*>(e);
  stream* s = resolve(h, "cuStreamWaitEvent");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (ev->captured && !s->capturing) {
    the().invalidate_captures("a wait outside a capture on an event recorded in it");
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  merge(s->clock, ev->clock);
  return CUDA_SUCCESS;
}
CUresult stream_create(CUstream* h, unsigned int flags)
{
  LOCK;
  *h = reinterpret_cast<CUstream>(
    the().make_stream(current_ctx(), (flags & CU_STREAM_NON_BLOCKING) == 0));
  the().created_in.push_back(current_ctx());
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream h)
{
  LOCK;
  if (stream* s = resolve(h, "cuStreamDestroy")) {
    s->alive = false;
    merge(the().graveyard[s->ctx], s->clock);  // its work goes on; a context wait covers it
  }
  return CUDA_SUCCESS;
}
CUresult stream_synchronize(CUstream h)
{
  LOCK;
  stream* s = resolve(h, "cuStreamSynchronize");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->capturing) { return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
  merge(the().completed, s->clock);
  return CUDA_SUCCESS;
}

#undef LOCK

}  // namespace model

// ---- The runtime calls that synchronize, and the entry points --------------------------------

extern "C" {

cudaError_t cudaDeviceSynchronize()
{
  std::lock_guard lock{model::the().mutex};
  model::world& w = model::the();
  if (w.any_capture()) {
    w.invalidate_captures("cudaDeviceSynchronize");
    return cudaErrorStreamCaptureUnsupported;
  }
  for (auto const& s : w.streams) {  // the current context's streams only, as the driver does
    if (s->ctx == model::current_ctx()) { model::merge(w.completed, s->clock); }
  }
  model::merge(w.completed, w.graveyard[model::current_ctx()]);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
  return model::stream_synchronize(reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS
           ? cudaSuccess
           : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaSetDevice(int device)
{
  if (device < 0 || device > 1) { return cudaErrorInvalidDevice; }
  model::ctx_stack.back() = device == 0 ? 0 : 2;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device)
{
  *device = model::the().contexts[static_cast<std::size_t>(model::current_ctx())].device;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(char const* symbol,
                                             void** function,
                                             unsigned int /*version*/,
                                             unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* status)
{
  static rmm_next::test::entry_point_table const entries{
    {"cuStreamGetId", reinterpret_cast<void*>(&model::stream_get_id)},
    {"cuStreamIsCapturing", reinterpret_cast<void*>(&model::stream_is_capturing)},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(&model::ctx_get_current)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(&model::ctx_get_device)},
    {"cuCtxSetCurrent", reinterpret_cast<void*>(&model::ctx_set_current)},
    {"cuStreamGetCtx", reinterpret_cast<void*>(&model::stream_get_ctx)},
    {"cuEventCreate", reinterpret_cast<void*>(&model::event_create)},
    {"cuEventRecord", reinterpret_cast<void*>(&model::event_record)},
    {"cuEventDestroy", reinterpret_cast<void*>(&model::event_destroy)},
    {"cuStreamWaitEvent", reinterpret_cast<void*>(&model::stream_wait_event)},
    {"cuStreamCreate", reinterpret_cast<void*>(&model::stream_create)},
    {"cuStreamSynchronize", reinterpret_cast<void*>(&model::stream_synchronize)},
    {"cuStreamDestroy", reinterpret_cast<void*>(&model::stream_destroy)},
    {"cuCtxPushCurrent", reinterpret_cast<void*>(&model::ctx_push_current)},
    {"cuCtxPopCurrent", reinterpret_cast<void*>(&model::ctx_pop_current)},
    {"cuCtxSynchronize", reinterpret_cast<void*>(&model::ctx_synchronize)},
    {"cuDeviceGet", reinterpret_cast<void*>(&model::device_get)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&model::primary_retain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&model::primary_release)},
    {"cuDevicePrimaryCtxGetState", reinterpret_cast<void*>(&model::primary_state)},
  };
  return rmm_next::test::answer_entry_point(entries, symbol, function, status);
}

}  // extern "C"

namespace {

using model::the;

// ---- The model pool upstream -----------------------------------------------------------------

/** @brief What the model knows of one address the pool has handed out. */
struct block_record {
  std::size_t bytes{};
  bool live{false};
  bool graph{false};
  model::vclock last_use;    ///< every use so far
  model::vclock free_clock;  ///< what the last free was ordered after
};

/**
 * @brief A stream-ordered pool over the model: it reuses a freed block for another stream only
 * after making that stream wait for the free, as the driver's pools do; it refuses beyond its
 * capacity; allocations during capture are graph memory it never reuses.
 */
class model_pool {
 public:
  struct state {
    std::map<std::uintptr_t, block_record> blocks;
    std::uintptr_t next{0x100000};
    std::size_t capacity{};
    std::size_t in_use{0};
  };

  explicit model_pool(std::size_t capacity) : s_{std::make_shared<state>()}
  {
    s_->capacity = capacity;
  }

  [[nodiscard]] int device() const noexcept { return 0; }

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t = 256)
  {
    std::lock_guard lock{the().mutex};
    model::stream* s = model::resolve(reinterpret_cast<CUstream>(stream.get()), "pool allocate");
    if (s == nullptr) {
      throw rmm_next::cuda_error{cudaErrorInvalidResourceHandle, "model: a destroyed stream"};
    }
    if (s->capturing) {
      std::uintptr_t const a = s_->next;
      s_->next += (bytes + 4095) / 4096 * 4096 + 4096;
      s_->blocks[a] = block_record{bytes, true, true, {}, {}};
      return reinterpret_cast<void*>(a);
    }
    if (bytes > s_->capacity - s_->in_use) {
      throw rmm_next::out_of_memory{"rmm_next::out_of_memory: model pool: " +
                                    std::to_string(bytes)};
    }
    s_->in_use += bytes;
    for (auto& [a, b] : s_->blocks) {
      if (!b.live && !b.graph && b.bytes == bytes) {
        model::merge(s->clock, b.free_clock);  // the pool orders the new owner after the free
        b.live = true;
        return reinterpret_cast<void*>(a);
      }
    }
    std::uintptr_t const a = s_->next;
    s_->next += (bytes + 4095) / 4096 * 4096 + 4096;
    s_->blocks[a] = block_record{bytes, true, false, {}, {}};
    return reinterpret_cast<void*>(a);
  }

  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t = 256) noexcept
  {
    std::lock_guard lock{the().mutex};
    auto const it = s_->blocks.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == s_->blocks.end() || !it->second.live) {
      the().violation("the pool was given a block it does not hold");
      return;
    }
    block_record& b = it->second;
    if (b.bytes != bytes) { the().violation("a block went back with another size"); }
    model::stream* s = model::resolve(reinterpret_cast<CUstream>(stream.get()), "pool free");
    if (s == nullptr) { return; }
    b.live = false;
    if (b.graph) { return; }  // graph memory: never handed out again
    if (s->capturing) { the().violation("eager memory freed into a capture"); }
    model::enqueue(*s);
    b.free_clock = model::done_before(*s);
    s_->in_use -= bytes;
  }

  friend bool operator==(model_pool const& a, model_pool const& b) noexcept { return a.s_ == b.s_; }
  friend constexpr void get_property(model_pool const&, cuda::mr::device_accessible) noexcept {}

  [[nodiscard]] state& get() const noexcept { return *s_; }

 private:
  std::shared_ptr<state> s_;
};

// ---- Worker threads, driven one step at a time ------------------------------------------------

class worker {
 public:
  explicit worker(int ctx) : ctx_{ctx}, thread_{[this] { run(); }} {}
  worker(worker const&)            = delete;
  worker& operator=(worker const&) = delete;
  ~worker()
  {
    std::thread::id const id = thread_.get_id();
    {
      std::lock_guard lock{mutex_};
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // its caches are released now, on its own thread
    std::lock_guard lock{the().mutex};
    for (auto it = the().per_thread.begin(); it != the().per_thread.end();) {
      if (it->first.first == id) {  // its per-thread default streams end with it
        it->second->alive = false;
        model::merge(the().graveyard[it->second->ctx], it->second->clock);
        it = the().per_thread.erase(it);
      } else {
        ++it;
      }
    }
  }

  /** @brief Runs `job` on the worker's thread and waits for it. */
  void call(std::function<void()> job)
  {
    std::unique_lock lock{mutex_};
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !job_; });
  }

  int ctx_;
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void run()
  {
    model::ctx_stack = {ctx_};
    std::unique_lock lock{mutex_};
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || job_; });
      if (job_) {
        job_();
        job_ = nullptr;
        cv_.notify_all();
        continue;
      }
      if (stop_) { return; }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_{false};
  std::thread thread_;
};

/** @brief A block the test holds: where it was last used. */
struct live_block {
  void* ptr;
  std::size_t bytes;
  cudaStream_t handle;
  model::stream* on;  ///< the stream `handle` named when it was last used
  bool graph;
};

std::uint64_t seed_from_environment()
{
  if (char const* env = std::getenv("RMM_NEXT_MODEL_SEED")) {
    return std::strtoull(env, nullptr, 10);
  }
  return std::random_device{}();
}

double seconds_from_environment()
{
  char const* env = std::getenv("RMM_NEXT_MODEL_SECONDS");
  double const s  = env != nullptr ? std::atof(env) : 0.0;
  return s > 0 ? s : 5.0;
}

model::stream* resolve_on(cudaStream_t h)
{
  return model::resolve(reinterpret_cast<CUstream>(h), "test");
}

TEST(ThreadCacheModel, EveryBlockHandedOutIsOrderedAfterItsLastUseAndNoCaptureIsHarmed)
{
  std::uint64_t const seed = seed_from_environment();
  double const seconds     = seconds_from_environment();
  std::printf("thread cache model: seed %llu (RMM_NEXT_MODEL_SEED), %.1f s\n",
              static_cast<unsigned long long>(seed),
              seconds);
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
      CUevent e{};
      model::ctx_push_current(model::ctx_handle(b.on->ctx));
      model::event_create(&e, 0);
      model::event_record(e, reinterpret_cast<CUstream>(b.handle));
      CUcontext popped{};
      model::ctx_pop_current(&popped);
      model::stream* t = resolve_on(to);
      model::stream_wait_event(reinterpret_cast<CUstream>(t), e, 0);
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

  auto const deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long steps          = 0;
  while (std::chrono::steady_clock::now() < deadline && the().violations.empty()) {
    ++steps;
    std::size_t const w = pick(workers.size());
    std::size_t const r = pick(100);
    if (r < 40 || (r < 80 && live.empty())) {  // allocate
      cudaStream_t h = handle_for(w);
      if (capture.on && w == capture.worker && pick(2) == 0) { h = capture.handle; }
      std::size_t constexpr common[] = {256, 1000, 4096, 8192};
      std::size_t const bytes        = pick(50) == 0  ? 16384 + pick(16384)
                                       : pick(4) == 0 ? 256 + pick(8192)
                                                      : common[pick(4)];
      if (live.size() > 48) { continue; }
      allocate_on(w, h, pick(500) == 0 ? SIZE_MAX : bytes);
      ++ops["allocate"];
    } else if (r < 75) {  // free
      std::size_t const i        = pick(live.size());
      std::ptrdiff_t const owner = worker_for(live[i]);
      if (owner < 0) { continue; }
      if (capture.on && live[i].on == capture.s &&
          static_cast<std::size_t>(owner) != capture.worker) {
        continue;
      }
      free_block(static_cast<std::size_t>(owner), i);
      ++ops["free"];
    } else if (r < 80) {  // hand a block to another stream with an event
      std::size_t const i        = pick(live.size());
      std::ptrdiff_t const owner = worker_for(live[i]);
      if (owner < 0 || live[i].graph || (capture.on && live[i].on == capture.s)) { continue; }
      cudaStream_t const to = streams[pick(streams.size())];
      if (capture.on && resolve_on(to) == capture.s) { continue; }
      hand_over(static_cast<std::size_t>(owner), i, to);
      ++ops["hand over"];
    } else if (r < 83) {  // flush from any thread and context
      workers[w]->call([&] { (void)cache->flush(); });
      ++ops["flush"];
    } else if (r < 86) {  // a thread exits; another starts
      if (capture.on && w == capture.worker) { continue; }
      hand_over_defaults(w);
      workers[w] = std::make_unique<worker>(static_cast<int>(pick(2)));
      ++ops["thread exit"];
    } else if (r < 89) {  // a thread switches context
      if (capture.on && w == capture.worker) { continue; }
      hand_over_defaults(w);
      int const ctx = static_cast<int>(pick(2));
      workers[w]->call([&] { model::ctx_stack = {ctx}; });
      workers[w]->ctx_ = ctx;
      ++ops["context switch"];
    } else if (r < 90) {  // a stream is destroyed after its blocks are freed; a new one is made
      if (pick(10) != 0) { continue; }
      std::size_t const k  = pick(streams.size());
      cudaStream_t const h = streams[k];
      if (capture.on && resolve_on(h) == capture.s) { continue; }
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
        if (busy || s->blocking) { continue; }
        std::lock_guard lock{the().mutex};
        s->capturing = true;
        s->mode      = static_cast<cudaStreamCaptureMode>(pick(3));
        capture      = {true, w, h, s};
        ++ops["capture"];
      } else {
        std::lock_guard lock{the().mutex};
        capture.s->capturing = false;
        capture.on           = false;
        // Graph memory left live is the graph's output: the test frees it eagerly later.
      }
    } else if (r < 96) {  // where no capture runs: everything back, unproven blocks too
      if (capture.on || pick(4) != 0) { continue; }
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
  }

  if (capture.on) {
    std::lock_guard lock{the().mutex};
    capture.s->capturing = false;
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
  for (std::string const& v : the().violations) {
    ADD_FAILURE() << v << " (seed " << seed << ")";
  }
  EXPECT_EQ(the().invalidated_captures, 0) << "seed " << seed;
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

}  // namespace
