/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A model-based randomized test of vmm_resource, on the CPU, over the driver model of
// support/driver_model.hpp: contexts (a second context of device 0 that is destroyed and made
// again), streams with vector clocks, events, captures in every mode, the graphs they make
// (launched once or more, or destroyed), user objects and virtual memory with a capacity. Worker
// threads, driven one operation at a time from a seeded sequence, allocate and free on streams of
// every context and on the default streams, allocate and free synchronously, use blocks, hand them
// across streams with events, free blocks inside captures, launch and destroy graphs, switch
// context and capture mode, and ask for sizes near SIZE_MAX and alignments the resource refuses.
// The test checks throughout: (a) every block handed out is ordered after every use of its memory
// and the free before, and
//     memory freed in a capture is handed out only once its graph has run past the free;
// (b) no call is made that the driver would refuse or that would invalidate a capture;
// (c) no two live blocks overlap, and each lies in a mapped segment every access device may use;
// (d) allocated_bytes() and graph_pending_bytes() agree with the model;
// (e) each call ends as the model expects (a block, bad_alloc, out_of_memory, not_supported);
// and at the end that the resource gives back every segment, event, stream and user object.
// RMM_NEXT_MODEL_SEED picks the seed (printed) and RMM_NEXT_MODEL_SECONDS the time (default 3).

#include "support/driver_model.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using model::the;

/** @brief What an on_segment_map hook that was told to throws. */
struct hook_refusal {};

/** @brief A block the test holds. */
struct held_block {
  std::size_t bytes{};       ///< as asked for
  std::size_t size{};        ///< rounded up to 256, as the resource counts it
  cudaStream_t handle{};     ///< the stream the test uses it on (and frees it on)
  model::stream* on{};       ///< the stream `handle` named when the block came there
  std::ptrdiff_t owner{-1};  ///< the worker whose default stream `handle` is; -1 for a regular one
  model::vclock last_use;
};

/** @brief Memory freed since its last hand-out: what its next user must be ordered after. */
struct freed_range {
  std::size_t bytes{};
  model::vclock last_use;
  /// Freed in a capture whose graph has not run past the free (or never will).
  bool pending{false};
  std::string how;  ///< how it was freed, for the report of a violation
};

/** @brief A free inside a capture: the block's address and the graph nodes before the free. */
struct graph_free {
  std::uintptr_t address{};
  std::size_t position{};
  bool passed{false};
};

/** @brief A capture under way: its worker, stream and the frees made in it. */
struct capture_run {
  std::size_t worker{};
  cudaStream_t handle{};
  model::stream* s{};
  std::vector<graph_free> frees;
};

/** @brief A graph a capture made, and the frees it holds. */
struct graph_run {
  model::graph* g{};
  std::vector<graph_free> frees;
};

std::size_t round_256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/** How a trace names a stream: its id, context and capture. */
std::string name(model::stream const* s)
{
  if (s == nullptr) { return "no stream"; }
  return "stream " + std::to_string(s->uid) + " (context " + std::to_string(s->ctx) +
         (s->capturing ? ", captured" : "") + ")";
}

std::string name(cudaStream_t h)
{
  if (h == cudaStream_t{}) { return "0"; }
  if (h == cudaStreamLegacy) { return "cudaStreamLegacy"; }
  if (h == cudaStreamPerThread) { return "cudaStreamPerThread"; }
  return "a regular stream";
}

std::string hex(std::uintptr_t p)
{
  char text[32];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(p));
  return text;
}

/** @brief One randomized run: the workers, streams, blocks and graphs, and the checks. */
class harness {
 public:
  explicit harness(std::uint64_t seed) : rng_{seed} {}

  std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

  void run(double seconds);

  /** The last operations, oldest first: what led to a violation. */
  void print_trace() const
  {
    for (std::string const& t : failure_trace_) {
      std::printf("  | %s\n", t.c_str());
    }
  }

 private:
  void note(std::string what)
  {
    if (trace_.size() == 200) { trace_.pop_front(); }
    trace_.push_back(std::move(what));
  }

  // ---- Set-up -------------------------------------------------------------------------------
  void make_resource();
  cudaStream_t new_stream(int ctx)
  {
    std::lock_guard lock{the().mutex};
    auto* s = the().create_stream(ctx, pick(3) == 0, pick(2) == 0);
    streams_.push_back(reinterpret_cast<cudaStream_t>(s));
    return streams_.back();
  }

  // ---- What the test knows of streams --------------------------------------------------------
  /** The model stream `h` names on worker `w`'s thread. */
  model::stream* resolve_in(std::size_t w, cudaStream_t h)
  {
    if (!rmm_next::detail::is_default_stream(h)) {
      std::lock_guard lock{the().mutex};
      return model::resolve_on(h);
    }
    model::stream* s = nullptr;
    workers_[w]->call([&] {
      std::lock_guard lock{the().mutex};
      s = model::resolve_on(h);
    });
    return s;
  }
  /** True when the test may queue work on `s`: not captured, nor a legacy stream beside a
   * blocking capture. */
  static bool eager(model::stream const& s)
  {
    std::lock_guard lock{the().mutex};
    return !s.capturing && !(the().legacy.count(s.ctx) != 0 && the().legacy.at(s.ctx) == &s &&
                             model::blocking_capture_in(s.ctx));
  }
  /** A regular stream the test may queue work on, or nullopt. */
  std::optional<cudaStream_t> eager_regular_stream(int ctx = -1)
  {
    std::vector<cudaStream_t> fit;
    for (cudaStream_t h : streams_) {
      auto* s = reinterpret_cast<model::stream*>(h);
      if ((ctx < 0 || s->ctx == ctx) && eager(*s)) { fit.push_back(h); }
    }
    if (fit.empty()) { return std::nullopt; }
    return fit[pick(fit.size())];
  }
  /** A handle for a worker: a regular stream, or a default stream (the worker's own). */
  cudaStream_t handle_for()
  {
    std::size_t const k = pick(streams_.size() + 3);
    if (k < streams_.size()) { return streams_[k]; }
    cudaStream_t const defaults[] = {cudaStream_t{}, cudaStreamLegacy, cudaStreamPerThread};
    return defaults[k - streams_.size()];
  }
  capture_run* capture_of_worker(std::size_t w)
  {
    for (auto& c : captures_) {
      if (c.worker == w) { return &c; }
    }
    return nullptr;
  }
  capture_run* capture_on(model::stream const* s)
  {
    for (auto& c : captures_) {
      if (c.s == s) { return &c; }
    }
    return nullptr;
  }
  /** True when worker `w` may queue work on block `b`'s stream. */
  bool reaches(std::size_t w, held_block const& b)
  {
    if (b.owner >= 0 && static_cast<std::size_t>(b.owner) != w) { return false; }
    capture_run const* c = capture_on(b.on);
    return c == nullptr || c->worker == w;
  }

  // ---- Operations ----------------------------------------------------------------------------
  void allocate(std::size_t w, std::optional<cudaStream_t> h, std::size_t bytes, std::size_t align);
  void handed_out(std::uintptr_t p,
                  std::size_t bytes,
                  std::size_t align,
                  model::stream* ordered,
                  cudaStream_t h,
                  model::stream* home,
                  std::ptrdiff_t owner);
  void use(std::uintptr_t p);
  void free_block(std::size_t w, std::uintptr_t p);
  void free_block_sync(std::size_t w, std::uintptr_t p);
  void hand_over(std::uintptr_t p, cudaStream_t to, model::stream* t, std::ptrdiff_t owner);
  void hand_over_defaults(std::size_t w);
  void begin_capture(std::size_t w);
  void end_capture(std::size_t i);
  void launch(std::size_t w, std::size_t i);
  void destroy_graph(std::size_t i);
  void destroy_second_context();
  void switch_context(std::size_t w);
  void destroy_stream();
  void finish();
  void check_counts();

  std::uintptr_t any_live()
  {
    return std::next(live_.begin(), static_cast<std::ptrdiff_t>(pick(live_.size())))->first;
  }
  std::size_t pending_bytes() const
  {
    std::size_t n = 0;
    for (auto const& [a, r] : freed_) {
      n += r.pending ? r.bytes : 0;
    }
    return n;
  }

  std::mt19937_64 rng_;
  std::unique_ptr<rmm_next::vmm_resource> mr_;
  std::size_t granularity_{};
  bool all_peers_{};
  int second_{1};  // the index of the live second context of device 0
  std::vector<std::unique_ptr<model::worker>> workers_;
  std::vector<cudaStream_t> streams_;
  std::map<std::uintptr_t, held_block> live_;
  std::map<std::uintptr_t, freed_range> freed_;
  std::vector<capture_run> captures_;
  std::vector<graph_run> graphs_;
  std::map<std::string, long> ops_;
  // The segment hooks.
  bool throw_in_hook_{false};
  bool hook_threw_{false};
  long maps_{0};
  long unmaps_{0};
  std::deque<std::string> trace_;
  std::deque<std::string> failure_trace_;
};

void harness::make_resource()
{
  model::vmm_model& m = the().vmm;
  m.fabric_supported  = pick(2) == 0;
  m.refuse_fabric     = pick(2) == 0;
  rmm_next::vmm_options options;
  rmm_next::vmm_handle_types const types[] = {
    rmm_next::vmm_handle_types::posix_fd | rmm_next::vmm_handle_types::fabric,
    rmm_next::vmm_handle_types::posix_fd,
    rmm_next::vmm_handle_types::none,
    m.fabric_supported && !m.refuse_fabric ? rmm_next::vmm_handle_types::fabric
                                           : rmm_next::vmm_handle_types::posix_fd};
  options.handle_types    = types[pick(4)];
  options.gpu_direct_rdma = pick(2) == 0;
  options.granularity =
    pick(2) == 0 ? rmm_next::vmm_granularity::minimum : rmm_next::vmm_granularity::recommended;
  all_peers_     = pick(2) == 0;
  options.access = all_peers_ ? rmm_next::vmm_access::all_peers : rmm_next::vmm_access::this_device;
  std::size_t const sizes[] = {
    0, std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{1} << 20};
  options.segment_size   = sizes[pick(4)];
  options.on_segment_map = [this](void* base, std::size_t bytes) {
    {
      std::lock_guard lock{the().mutex};
      if (!the().vmm.accessible(reinterpret_cast<CUdeviceptr>(base), bytes, 0)) {
        the().violation("on_segment_map was called for memory not mapped and accessible");
      }
    }
    if (throw_in_hook_) {  // the resource undoes the segment: no on_segment_unmap for it
      throw_in_hook_ = false;
      hook_threw_    = true;
      throw hook_refusal{};
    }
    ++maps_;
  };
  options.on_segment_unmap = [this](void* base, std::size_t bytes) {
    std::lock_guard lock{the().mutex};
    if (!the().vmm.accessible(reinterpret_cast<CUdeviceptr>(base), bytes, 0)) {
      the().violation("on_segment_unmap was called for memory no longer mapped");
    }
    ++unmaps_;
  };
  std::printf("fabric %s%s, handle types %u, rdma %d, %s granularity, %s, segment_size %zu\n",
              m.fabric_supported ? "supported" : "unsupported",
              m.refuse_fabric ? " (refused by cuMemCreate)" : "",
              static_cast<unsigned>(options.handle_types),
              options.gpu_direct_rdma ? 1 : 0,
              options.granularity == rmm_next::vmm_granularity::minimum ? "minimum" : "recommended",
              all_peers_ ? "all peers" : "this device",
              options.segment_size);
  std::size_t const expected = options.granularity == rmm_next::vmm_granularity::minimum
                                 ? m.minimum_granularity
                                 : m.recommended_granularity;
  mr_                        = std::make_unique<rmm_next::vmm_resource>(std::move(options));
  granularity_               = mr_->granularity();
  EXPECT_EQ(granularity_, expected);
  std::vector<int> const access = all_peers_ ? std::vector<int>{0, 1} : std::vector<int>{0};
  EXPECT_EQ(mr_->access_devices(), access);
}

/**
 * One allocation by worker `w`: on stream `h`, or allocate_sync without one. Checks the outcome
 * the model expects, and the block against (a) and (c).
 */
void harness::allocate(std::size_t w,
                       std::optional<cudaStream_t> h,
                       std::size_t bytes,
                       std::size_t align)
{
  model::stream* s     = h ? resolve_in(w, *h) : nullptr;
  bool const captured  = s != nullptr && !eager(*s);
  bool const too_large = bytes > SIZE_MAX - 255 || round_256(bytes) > SIZE_MAX - granularity_ + 1 ||
                         bytes > the().vmm.capacity;
  long const refusals = the().vmm.refusals;
  throw_in_hook_      = pick(40) == 0;
  hook_threw_         = false;
  void* p             = nullptr;
  std::string outcome;
  std::string message;
  workers_[w]->call([&] {
    cudaStreamCaptureMode const mode = model::thread_capture_mode();
    try {
      p = h ? mr_->allocate(cuda::stream_ref{*h}, bytes, align) : mr_->allocate_sync(bytes, align);
      outcome = "a block";
    } catch (rmm_next::out_of_memory const& e) {
      outcome = "out_of_memory";
      message = e.what();
    } catch (rmm_next::bad_alloc const& e) {
      outcome = "bad_alloc";
      message = e.what();
    } catch (rmm_next::not_supported const& e) {
      outcome = "not_supported";
      message = e.what();
    } catch (hook_refusal const&) {
      outcome = "the hook's exception";
    } catch (std::exception const& e) {
      outcome = "an unexpected exception";
      message = e.what();
    }
    if (model::thread_capture_mode() != mode) {
      std::lock_guard lock{the().mutex};
      the().violation("the calling thread's capture mode was not given back");
    }
  });
  throw_in_hook_ = false;
  note("worker " + std::to_string(w) + ": " + (h ? "allocate(" : "allocate_sync(") +
       std::to_string(bytes) + ", " + std::to_string(align) + ")" +
       (h ? " on " + name(*h) + " = " + name(s) : "") + ": " + outcome + " " +
       hex(reinterpret_cast<std::uintptr_t>(p)));
  std::string expected;
  if (!std::has_single_bit(align) || align > granularity_) {
    expected = "bad_alloc";
  } else if (bytes == 0) {
    expected = "a block";
  } else if (captured) {
    expected = "not_supported";
  } else if (too_large || (outcome == "out_of_memory" && the().vmm.refusals > refusals)) {
    expected = "out_of_memory";
  } else if (hook_threw_) {
    expected = "the hook's exception";
  } else {
    expected = "a block";
  }
  if (outcome != expected) {
    std::lock_guard lock{the().mutex};
    the().violation((h ? "allocate(" : "allocate_sync(") + std::to_string(bytes) + ", " +
                    std::to_string(align) + ") gave " + outcome + " where the model expects " +
                    expected + " " + message);
    return;
  }
  ++ops_[h ? "allocate: " + outcome : "allocate_sync: " + outcome];
  if (outcome == "out_of_memory" && !too_large) { ++ops_["out_of_memory from cuMemCreate"]; }
  if (outcome == "out_of_memory" && message.find(std::to_string(bytes)) == std::string::npos &&
      message.find(std::to_string(round_256(bytes))) == std::string::npos) {
    std::lock_guard lock{the().mutex};
    the().violation("an out_of_memory that does not name the size: " + message);
  }
  if (outcome != "a block") { return; }
  if (bytes == 0) {
    if (p != nullptr) {
      std::lock_guard lock{the().mutex};
      the().violation("0 bytes gave a pointer");
    }
    return;
  }
  std::ptrdiff_t owner = -1;
  if (h && rmm_next::detail::is_default_stream(*h)) { owner = static_cast<std::ptrdiff_t>(w); }
  cudaStream_t home = h ? *h : cudaStream_t{};
  if (!h) {  // memory any stream may use: the test takes it to one
    auto const to = eager_regular_stream();
    home          = to ? *to : streams_.front();
  }
  std::size_t const pending = mr_->graph_pending_bytes();
  if (pending != pending_bytes()) {
    std::lock_guard lock{the().mutex};
    the().violation("graph_pending_bytes() is " + std::to_string(pending) +
                    " where the model has " + std::to_string(pending_bytes()));
  }
  handed_out(reinterpret_cast<std::uintptr_t>(p),
             bytes,
             align,
             s,
             home,
             h ? s : reinterpret_cast<model::stream*>(home),
             owner);
}

/** Checks a block the resource handed out to `s` (null: allocate_sync) and holds it. */
void harness::handed_out(std::uintptr_t p,
                         std::size_t bytes,
                         std::size_t align,
                         model::stream* ordered,
                         cudaStream_t h,
                         model::stream* home,
                         std::ptrdiff_t owner)
{
  std::lock_guard lock{the().mutex};
  model::world& w        = the();
  std::size_t const size = round_256(bytes);
  std::string const what = "a block of " + std::to_string(size) + " B at " + std::to_string(p);
  if (p % align != 0 || p % 256 != 0) {
    w.violation(what + " is not aligned to " + std::to_string(align));
  }
  if (!w.vmm.accessible(p, size, 0) || (all_peers_ && !w.vmm.accessible(p, size, 1))) {
    w.violation(what + " is not in a mapped segment every access device may use");
  }
  auto next = live_.lower_bound(p);
  if ((next != live_.end() && next->first < p + size) ||
      (next != live_.begin() && std::prev(next)->first + std::prev(next)->second.size > p)) {
    w.violation(what + " overlaps a live block");
  }
  model::vclock const have = ordered != nullptr ? model::done_before(*ordered) : w.completed;
  auto it                  = freed_.upper_bound(p);
  if (it != freed_.begin() && std::prev(it)->first + std::prev(it)->second.bytes > p) { --it; }
  while (it != freed_.end() && it->first < p + size) {
    freed_range const r    = it->second;
    std::uintptr_t const a = it->first;
    if (r.pending) {
      w.violation(what + " was freed in a capture whose graph has not run past the free");
    } else if (!model::covers(have, r.last_use)) {
      std::string missing;
      for (auto const& [uid, pos] : r.last_use) {
        auto const at = have.find(uid);
        if (at == have.end() || at->second < pos) {
          missing += " stream " + std::to_string(uid) + " at " + std::to_string(pos) + " (has " +
                     std::to_string(at == have.end() ? 0 : at->second) + ")";
        }
      }
      w.violation(what +
                  (ordered != nullptr
                     ? " on " + name(ordered) + " is not ordered after the last use of its memory:"
                     : " from allocate_sync is still in use:") +
                  missing + "; its memory at " + hex(a) + " was " + r.how);
    }
    it = freed_.erase(it);
    if (a < p) { freed_.emplace(a, freed_range{p - a, r.last_use, r.pending, r.how}); }
    if (a + r.bytes > p + size) {
      freed_.emplace(p + size, freed_range{a + r.bytes - p - size, r.last_use, r.pending, r.how});
    }
  }
  model::enqueue(*home);  // its first use, on the stream it came to
  live_[p] = held_block{bytes, size, h, home, owner, home->clock};
}

/** Work on the block's stream: queued, or captured into the graph being made there. */
void harness::use(std::uintptr_t p)
{
  std::lock_guard lock{the().mutex};
  held_block& b = live_.at(p);
  note("use " + hex(p) + " on " + name(b.on));
  if (b.on->capturing) {
    the().enqueue_captured(*b.on);
  } else {
    model::enqueue(*b.on);
    model::merge(b.last_use, b.on->clock);
  }
}

/** Worker `w` frees block `p` on its stream: eagerly, in a capture, or beside one. */
void harness::free_block(std::size_t w, std::uintptr_t p)
{
  held_block const b = live_.at(p);
  note("worker " + std::to_string(w) + ": deallocate " + hex(p) + " (" + std::to_string(b.size) +
       " B) on " + name(b.handle) + " = " + name(b.on));
  live_.erase(p);
  workers_[w]->call(
    [&] { mr_->deallocate(cuda::stream_ref{b.handle}, reinterpret_cast<void*>(p), b.bytes); });
  std::lock_guard lock{the().mutex};
  if (b.on->capturing) {  // the graph frees it, once it runs past this point
    freed_[p] = {b.size, b.last_use, true, "freed in a capture of " + name(b.on)};
    capture_on(b.on)->frees.push_back({p, b.on->into->nodes.size()});
    ++ops_["free in a capture"];
  } else if (!eager(*b.on)) {  // the legacy stream beside a blocking capture: nothing proves it
    freed_[p] = {b.size, b.last_use, true, "freed on the legacy stream beside a capture"};
    ++ops_["free on the legacy stream beside a capture"];
  } else {
    model::vclock last = b.last_use;
    model::merge(last, b.on->clock);
    freed_[p] = {b.size, last, false, "freed on " + name(b.on)};
    ++ops_["free"];
  }
}

/** deallocate_sync, after the test waited on the host for the block's last use. */
void harness::free_block_sync(std::size_t w, std::uintptr_t p)
{
  held_block const b = live_.at(p);
  note("worker " + std::to_string(w) + ": the host waits for " + name(b.on) + ", deallocate_sync " +
       hex(p));
  {
    std::lock_guard lock{the().mutex};
    model::merge(the().completed, b.on->clock);
  }
  live_.erase(p);
  workers_[w]->call([&] { mr_->deallocate_sync(reinterpret_cast<void*>(p), b.bytes); });
  freed_[p] = {b.size, b.last_use, false, "freed by deallocate_sync"};
  ++ops_["deallocate_sync"];
}

/** The user's event from the block's stream to `t` (named `to`), and a use there. */
void harness::hand_over(std::uintptr_t p, cudaStream_t to, model::stream* t, std::ptrdiff_t owner)
{
  std::lock_guard lock{the().mutex};
  held_block& b = live_.at(p);
  note("hand " + hex(p) + " from " + name(b.on) + " to " + name(to) + " = " + name(t));
  model::user_order(reinterpret_cast<CUstream>(b.on), b.on->ctx, *t);
  model::enqueue(*t);
  model::merge(b.last_use, t->clock);
  b.handle = to;
  b.on     = t;
  b.owner  = owner;
}

/** Blocks on worker `w`'s default streams move to regular streams before it leaves them. */
void harness::hand_over_defaults(std::size_t w)
{
  for (auto& [p, b] : live_) {
    if (b.owner != static_cast<std::ptrdiff_t>(w)) { continue; }
    auto const to = eager_regular_stream();
    if (!to || !eager(*b.on)) { continue; }
    hand_over(p, *to, reinterpret_cast<model::stream*>(*to), -1);
  }
}

void harness::begin_capture(std::size_t w)
{
  if (captures_.size() >= 2 || capture_of_worker(w) != nullptr) { return; }
  cudaStream_t const h = pick(4) == 0 ? cudaStreamPerThread : streams_[pick(streams_.size())];
  model::stream* s     = resolve_in(w, h);
  if (s->capturing) { return; }
  std::lock_guard lock{the().mutex};
  auto const mode = static_cast<cudaStreamCaptureMode>(pick(3));
  the().begin_capture(*s, mode, workers_[w]->id());
  captures_.push_back({w, h, s, {}});
  note("worker " + std::to_string(w) + ": capture " + name(h) + " = " + name(s) + " in mode " +
       std::to_string(static_cast<int>(mode)));
  ++ops_["capture"];
}

/** Ends capture i: its worker frees the blocks still on the stream into it first. */
void harness::end_capture(std::size_t i)
{
  for (auto it = live_.begin(); it != live_.end();) {
    std::uintptr_t const p = it->first;
    bool const there       = it->second.on == captures_[i].s;
    ++it;
    if (there) { free_block(captures_[i].worker, p); }
  }
  std::lock_guard lock{the().mutex};
  note("end the capture of " + name(captures_[i].s));
  model::graph* g = the().end_capture(*captures_[i].s);
  if (g != nullptr) { graphs_.push_back({g, std::move(captures_[i].frees)}); }
  captures_.erase(captures_.begin() + static_cast<std::ptrdiff_t>(i));
}

/** Worker `w` launches graph i on a stream ordered after the work before its capture. */
void harness::launch(std::size_t w, std::size_t i)
{
  graph_run& g         = graphs_[i];
  cudaStream_t const h = handle_for();
  model::stream* on    = resolve_in(w, h);
  if (on->ctx != g.g->ctx || !eager(*on)) { return; }  // a graph runs in its own context
  std::lock_guard lock{the().mutex};
  note("worker " + std::to_string(w) + ": launch graph " +
       hex(reinterpret_cast<std::uintptr_t>(g.g)) + " on " + name(h) + " = " + name(on));
  model::merge(on->clock, g.g->before);  // the user's event from before the capture began
  the().launch_graph(*g.g, *on, [&](std::size_t node) {
    for (graph_free& f : g.frees) {
      if (f.passed || f.position != node) { continue; }
      f.passed      = true;
      auto const it = freed_.find(f.address);
      if (it == freed_.end()) { continue; }  // handed out already: reported
      it->second.pending = false;
      model::merge(it->second.last_use, on->clock);
      it->second.how += ", node " + std::to_string(node) + " of graph " +
                        hex(reinterpret_cast<std::uintptr_t>(g.g)) + " launched on " + name(on);
    }
  });
  ++ops_[g.g->launches == 1 ? "graph launched" : "graph launched again"];
}

void harness::destroy_graph(std::size_t i)
{
  std::lock_guard lock{the().mutex};
  note("destroy graph " + hex(reinterpret_cast<std::uintptr_t>(graphs_[i].g)));
  if (graphs_[i].g->launches == 0 && !graphs_[i].frees.empty()) {
    ++ops_["graph with frees destroyed unlaunched"];
  }
  the().destroy_graph(*graphs_[i].g);
  graphs_.erase(graphs_.begin() + static_cast<std::ptrdiff_t>(i));
}

/**
 * The owner of the second context synchronizes it and destroys it: its streams and graphs go, its
 * blocks move to streams of the primary context, its threads to the primary context, and a new
 * second context takes its place.
 */
void harness::destroy_second_context()
{
  for (auto const& c : captures_) {
    if (c.s->ctx == second_ || workers_[c.worker]->ctx_ == second_) { return; }
  }
  auto const to = eager_regular_stream(0);
  if (!to) { return; }
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    if (workers_[w]->ctx_ != second_) { continue; }
    workers_[w]->call([] { model::ctx_stack = {0}; });
    workers_[w]->ctx_ = 0;
  }
  std::lock_guard lock{the().mutex};
  int const dying = second_;
  note("destroy context " + std::to_string(dying));
  the().destroy_context(dying);
  for (auto& [p, b] : live_) {
    if (b.on->ctx != dying) { continue; }
    b.handle = *to;  // all its work is done: any stream may go on with it
    b.on     = reinterpret_cast<model::stream*>(*to);
    b.owner  = -1;
  }
  std::erase_if(streams_,
                [&](cudaStream_t h) { return reinterpret_cast<model::stream*>(h)->ctx == dying; });
  std::erase_if(graphs_, [](graph_run const& g) { return !g.g->alive; });
  second_ = the().create_context(0);
  new_stream(second_);
  new_stream(second_);
  ++ops_["second context destroyed"];
}

void harness::switch_context(std::size_t w)
{
  if (capture_of_worker(w) != nullptr) { return; }
  hand_over_defaults(w);
  for (auto const& [p, b] : live_) {
    if (b.owner == static_cast<std::ptrdiff_t>(w)) { return; }  // a block it could not move
  }
  int const ctx = pick(8) == 0 ? 2 : (pick(2) == 0 ? 0 : second_);
  workers_[w]->call([ctx] { model::ctx_stack = {ctx}; });
  workers_[w]->ctx_ = ctx;
  note("worker " + std::to_string(w) + ": to context " + std::to_string(ctx));
  ++ops_["context switch"];
}

/** A regular stream is destroyed after its blocks moved on; a new stream (maybe at its handle). */
void harness::destroy_stream()
{
  std::size_t const k  = pick(streams_.size());
  cudaStream_t const h = streams_[k];
  auto* s              = reinterpret_cast<model::stream*>(h);
  if (!eager(*s)) { return; }
  for (auto& [p, b] : live_) {
    if (b.on != s) { continue; }
    std::optional<cudaStream_t> to;
    for (int tries = 0; tries < 4 && (!to || *to == h); ++tries) {
      to = eager_regular_stream();
    }
    if (!to || *to == h) { return; }
    hand_over(p, *to, reinterpret_cast<model::stream*>(*to), -1);
  }
  int const ctx = s->ctx;
  note("destroy " + name(s));
  {
    std::lock_guard lock{the().mutex};
    model::as_user const user;
    model::stream_destroy(reinterpret_cast<CUstream>(h));
  }
  streams_.erase(streams_.begin() + static_cast<std::ptrdiff_t>(k));
  new_stream(ctx);
  ++ops_["stream destroyed"];
}

/** (d): the bytes the resource counts are the bytes the test holds. */
void harness::check_counts()
{
  std::size_t held = 0;
  for (auto const& [p, b] : live_) {
    held += b.size;
  }
  if (std::size_t const counted = mr_->allocated_bytes(); counted != held) {
    std::lock_guard lock{the().mutex};
    the().violation("allocated_bytes() is " + std::to_string(counted) + " where the test holds " +
                    std::to_string(held));
  }
}

void harness::run(double seconds)
{
  for (int i = 0; i < 4; ++i) {
    workers_.push_back(std::make_unique<model::worker>(pick(2) == 0 ? 0 : second_));
  }
  for (int c : {0, 0, 0, second_, second_, 2}) {
    new_stream(c);
  }
  make_resource();
  std::size_t const near_max[] = {SIZE_MAX,
                                  SIZE_MAX - 1,
                                  SIZE_MAX - 255,
                                  SIZE_MAX - 256,
                                  SIZE_MAX / 2 + 1,
                                  std::size_t{1} << 63,
                                  the().vmm.capacity + 1};
  long const steps             = model::run_steps(seconds, [&] {
    std::size_t const w = pick(workers_.size());
    std::size_t const r = pick(100);
    if (r < 28 || (r < 60 && live_.empty())) {  // allocate on a stream
      if (live_.size() > 40) { return; }
      cudaStream_t h = handle_for();
      if (capture_run const* c = capture_of_worker(w); c != nullptr && pick(4) == 0) {
        h = c->handle;  // refused: the stream is being captured
      }
      std::size_t const bytes = pick(100) == 0  ? 0
                                            : pick(50) == 0 ? pick(std::size_t{400} << 10)
                                            : pick(3) == 0  ? 1 + pick(70000)
                                                            : 256 * (1 + pick(64));
      std::size_t const k     = pick(40);
      std::size_t const align = k < 30 ? 256
                                            : k < 37 ? std::size_t{1} << pick(std::bit_width(granularity_))
                                            : k < 38 ? granularity_ * 2
                                                     : std::size_t{3} * (1 + pick(100));
      allocate(w, h, bytes, align);
    } else if (r < 31) {  // allocate_sync
      if (live_.size() > 40) { return; }
      allocate(w, std::nullopt, 256 * (1 + pick(256)), 256);
    } else if (r < 32) {  // sizes near SIZE_MAX, on a stream or synchronously
      std::size_t const bytes = near_max[pick(std::size(near_max))];
      allocate(
        w, pick(2) == 0 ? std::optional<cudaStream_t>{handle_for()} : std::nullopt, bytes, 256);
    } else if (r < 48) {  // use a block on its stream
      if (live_.empty()) { return; }
      std::uintptr_t const p = any_live();
      if (!reaches(w, live_.at(p)) || (!live_.at(p).on->capturing && !eager(*live_.at(p).on))) {
        return;
      }
      use(p);
      ++ops_["use"];
    } else if (r < 68) {  // free a block on its stream (in a capture, if it is captured)
      if (live_.empty()) { return; }
      std::uintptr_t const p = any_live();
      if (!reaches(w, live_.at(p))) { return; }
      free_block(w, p);
    } else if (r < 71) {  // deallocate_sync
      if (live_.empty()) { return; }
      std::uintptr_t const p = any_live();
      if (!reaches(w, live_.at(p)) || !eager(*live_.at(p).on)) { return; }
      free_block_sync(w, p);
    } else if (r < 78) {  // hand a block to another stream, or to a default stream of the worker
      if (live_.empty()) { return; }
      std::uintptr_t const p = any_live();
      if (!reaches(w, live_.at(p)) || !eager(*live_.at(p).on)) { return; }
      cudaStream_t const to = handle_for();
      model::stream* t      = resolve_in(w, to);
      if (!eager(*t)) { return; }
      hand_over(
        p, to, t, rmm_next::detail::is_default_stream(to) ? static_cast<std::ptrdiff_t>(w) : -1);
      ++ops_["hand over"];
    } else if (r < 83) {  // a capture begins, or one ends
      if (!captures_.empty() && pick(2) == 0) {
        end_capture(pick(captures_.size()));
      } else {
        begin_capture(w);
      }
    } else if (r < 88) {  // a graph is launched (again), or destroyed
      if (graphs_.empty()) { return; }
      std::size_t const i = pick(graphs_.size());
      if (graphs_[i].g->launches > 0 ? pick(3) == 0 : pick(12) == 0) {
        destroy_graph(i);
      } else {
        launch(w, i);
      }
    } else if (r < 89) {  // the second context is destroyed by its owner
      if (pick(3) == 0) { destroy_second_context(); }
    } else if (r < 92) {  // a thread switches context
      switch_context(w);
    } else if (r < 94) {  // a thread changes its capture interaction mode
      int const k     = static_cast<int>(pick(5));
      auto const mode = k < 3   ? cudaStreamCaptureModeGlobal
                                    : k < 4 ? cudaStreamCaptureModeThreadLocal
                                            : cudaStreamCaptureModeRelaxed;
      workers_[w]->call([mode] { model::thread_capture_mode() = mode; });
      note("worker " + std::to_string(w) + ": capture mode " +
           std::to_string(static_cast<int>(mode)));
      ++ops_["capture mode changed"];
    } else if (r < 97) {  // the host waits for a stream
      auto const h = eager_regular_stream();
      if (!h) { return; }
      std::lock_guard lock{the().mutex};
      note("the host waits for " + name(reinterpret_cast<model::stream*>(*h)));
      model::merge(the().completed, reinterpret_cast<model::stream*>(*h)->clock);
    } else if (r < 98) {  // a stream is destroyed, another made
      destroy_stream();
    }
    check_counts();
  });
  std::printf("%ld steps\n", steps);
  failure_trace_ = trace_;
  finish();
}

/** Ends every capture, frees every block, runs or destroys every graph, destroys the resource. */
void harness::finish()
{
  bool const clean = the().violations.empty();
  while (!captures_.empty()) {
    end_capture(0);
  }
  for (std::size_t w = 0; w < workers_.size(); ++w) {  // no capture mode refuses the frees now
    workers_[w]->call([] { model::thread_capture_mode() = cudaStreamCaptureModeGlobal; });
  }
  while (!live_.empty()) {
    std::uintptr_t const p = live_.begin()->first;
    std::ptrdiff_t const o = live_.begin()->second.owner;
    free_block(o >= 0 ? static_cast<std::size_t>(o) : pick(workers_.size()), p);
  }
  check_counts();
  while (!graphs_.empty()) {
    for (int tries = 0; tries < 8 && pick(3) != 0 && graphs_[0].g->launches == 0; ++tries) {
      launch(pick(workers_.size()), 0);
    }
    destroy_graph(0);
  }
  // Every block that a graph freed comes back: one allocation of all of it takes the free list's
  // fences, and no pending byte is left but those of graphs destroyed without running.
  if (clean) { allocate(0, std::nullopt, 256, 256); }
  for (auto it = live_.begin(); it != live_.end();) {
    std::uintptr_t const p = it->first;
    ++it;
    free_block(0, p);
  }
  check_counts();
  std::printf("%zu segments, %zu B graph-pending at the end\n",
              mr_->segments().size(),
              mr_->graph_pending_bytes());
  for (auto const& [name, n] : ops_) {
    std::printf("  %-44s %ld\n", name.c_str(), n);
  }
  mr_.reset();
  workers_.clear();
  std::lock_guard lock{the().mutex};
  model::world& w = the();
  if (!clean) { return; }  // what is left after a violation tells nothing more
  if (!w.vmm.mapped.empty() || !w.vmm.reserved.empty()) {
    w.violation("segments are still mapped or reserved after the resource went");
  }
  for (auto const& [handle, a] : w.vmm.allocations) {
    if (!a.released) { w.violation("a segment's allocation was never released"); }
  }
  for (auto const& e : w.events) {
    if (e->library && e->alive) { w.violation("an event the library made was never destroyed"); }
  }
  for (auto const& s : w.streams) {
    if (s->library && s->alive) { w.violation("a stream the library made was never destroyed"); }
  }
  for (auto const& o : w.user_objects) {
    if (o->refs != 0) { w.violation("a user object was never destroyed"); }
  }
  if (maps_ != unmaps_) { w.violation("on_segment_unmap did not run once per on_segment_map"); }
  if ((ops_["free in a capture"] == 0 || ops_["graph launched"] == 0 || ops_["free"] == 0)) {
    w.violation("the run freed nothing in a capture that a graph ran: too short to check");
  }
}

TEST(VmmResourceModel, EveryBlockIsOrderedAfterItsMemorysLastUseAndNoCaptureIsHarmed)
{
  auto const [seed, seconds] = model::settings_from_environment("vmm_resource model", 3.0);
  the().violations.clear();
  {
    harness h{seed};
    h.run(seconds);
    if (!the().violations.empty()) {
      std::printf("the last operations before the first violation (seed %llu):\n",
                  static_cast<unsigned long long>(seed));
      h.print_trace();
    }
  }
  model::report_violations(seed);
}

}  // namespace
