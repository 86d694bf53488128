/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The driver model of driver_model.hpp: the driver entry points it hands out through
// cudaGetDriverEntryPointByVersion, and the runtime calls the library makes (which take the place
// of libcudart's in the program that links this file).

#include "driver_model.hpp"
#include "entry_points.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace model {

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

bool vmm_model::accessible(CUdeviceptr p, std::size_t bytes, int device) const
{
  auto it = mapped.upper_bound(p);
  if (it == mapped.begin()) { return false; }
  --it;
  return p - it->first <= it->second.bytes && bytes <= it->second.bytes - (p - it->first) &&
         std::find(it->second.access.begin(), it->second.access.end(), device) !=
           it->second.access.end();
}

namespace {

thread_local bool user_calls{false};
thread_local bool in_host_fn{false};  // a host node or a user object's destructor runs

/** Runs `fn(data)` as the driver runs host functions: no CUDA call may be made from it. */
void run_host_fn(CUhostFn fn, void* data)
{
  bool const saved = in_host_fn;
  in_host_fn       = true;
  fn(data);
  in_host_fn = saved;
}

}  // namespace

void world::violation(std::string what)
{
  if (violations.size() < 20) { violations.push_back(std::move(what)); }
}

bool world::any_capture() const
{
  return std::any_of(
    streams.begin(), streams.end(), [](auto const& s) { return s->alive && s->capturing; });
}

void world::invalidate(stream& s, std::string const& why)
{
  if (s.invalidated) { return; }
  s.invalidated = true;
  ++invalidated_captures;
  violation("a capture was invalidated by " + why);
}

void world::invalidate_captures(char const* why)
{
  for (auto& s : streams) {
    if (s->alive && s->capturing) { invalidate(*s, why); }
  }
}

bool world::refuses(char const* call)
{
  cudaStreamCaptureMode const mine = thread_capture_mode();
  if (mine == cudaStreamCaptureModeRelaxed) { return false; }
  bool refused        = false;
  auto const this_one = std::this_thread::get_id();
  for (auto& s : streams) {
    if (!s->alive || !s->capturing || s->invalidated) { continue; }
    bool const hit = s->capture_thread == this_one ? s->mode != cudaStreamCaptureModeRelaxed
                                                   : mine == cudaStreamCaptureModeGlobal &&
                                                       s->mode == cudaStreamCaptureModeGlobal;
    if (hit) {
      invalidate(*s, std::string{call} + " from a thread in a capture mode the capture refuses");
      refused = true;
    }
  }
  return refused;
}

stream* world::make_stream(int ctx, bool blocking)
{
  auto s      = std::make_unique<stream>();
  s->uid      = next_uid++;
  s->ctx      = ctx;
  s->blocking = blocking;
  streams.push_back(std::move(s));
  return streams.back().get();
}

stream* world::create_stream(int ctx, bool blocking, bool reuse)
{
  if (reuse) {
    for (auto& s : streams) {
      bool const special =
        std::any_of(
          legacy.begin(), legacy.end(), [&](auto const& l) { return l.second == s.get(); }) ||
        std::any_of(
          per_thread.begin(), per_thread.end(), [&](auto const& p) { return p.second == s.get(); });
      if (!s->alive && !special) { return remake_stream(*s, ctx, blocking); }
    }
  }
  return make_stream(ctx, blocking);
}

stream* world::remake_stream(stream& dead, int ctx, bool blocking)
{
  if (dead.alive) { violation("the test remade a stream that is alive"); }
  dead          = stream{};
  dead.uid      = next_uid++;
  dead.ctx      = ctx;
  dead.blocking = blocking;
  return &dead;
}

int world::create_context(int device)
{
  contexts.push_back({device});
  return static_cast<int>(contexts.size()) - 1;
}

void world::destroy_context(int ctx)
{
  for (auto& s : streams) {
    if (s->ctx == ctx && s->alive) {
      merge(completed, s->clock);
      s->alive = false;
    }
  }
  merge(completed, graveyard[ctx]);
  legacy.erase(ctx);
  for (auto it = per_thread.begin(); it != per_thread.end();) {
    it = it->first.second == ctx ? per_thread.erase(it) : std::next(it);
  }
  for (auto& g : graphs) {
    if (g->ctx == ctx) { destroy_graph(*g); }
  }
  for (auto& e : events) {
    if (e->ctx == ctx) { e->alive = false; }
  }
  contexts[static_cast<std::size_t>(ctx)].alive = false;
}

void world::begin_capture(stream& s, cudaStreamCaptureMode mode, std::thread::id by)
{
  graphs.push_back(std::make_unique<graph>());
  graphs.back()->ctx    = s.ctx;
  graphs.back()->before = s.clock;
  s.capturing           = true;
  s.invalidated         = false;
  s.mode                = mode;
  s.capture_thread      = by;
  s.capture_id          = next_capture_id++;
  s.into                = graphs.back().get();
}

graph* world::end_capture(stream& s)
{
  graph* g      = s.into;
  s.capturing   = false;
  s.into        = nullptr;
  s.capture_id  = 0;
  bool const ok = !s.invalidated;
  s.invalidated = false;
  if (!ok) {
    destroy_graph(*g);
    return nullptr;
  }
  return g;
}

void world::enqueue_captured(stream& s) { s.into->nodes.push_back({}); }

void world::launch_graph(graph& g, stream& on, std::function<void(std::size_t)> const& visit)
{
  ++g.launches;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    visit(i);
    if (g.nodes[i].fn == nullptr) {
      enqueue(on);
    } else {
      merge(completed, done_before(on));  // its predecessors are done when it runs
      run_host_fn(g.nodes[i].fn, g.nodes[i].data);
    }
  }
  visit(g.nodes.size());
}

void world::destroy_graph(graph& g)
{
  if (!g.alive) { return; }
  g.alive = false;
  for (auto const& [o, n] : g.held) {
    release_user_object(*o, n);
  }
  g.held.clear();
}

void world::release_user_object(user_object& o, unsigned count)
{
  if (count == 0 || count > o.refs) {
    violation("a user object was released more often than it was held");
    return;
  }
  o.refs -= count;
  if (o.refs == 0) { run_host_fn(o.destroy, o.data); }
}

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

cudaStreamCaptureMode& thread_capture_mode()
{
  thread_local cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  return mode;
}

as_user::as_user() : saved_{user_calls} { user_calls = true; }
as_user::~as_user() { user_calls = saved_; }
bool by_user() { return user_calls; }

stream* resolve(CUstream h, char const* call)
{
  world& w     = the();
  auto const v = reinterpret_cast<std::uintptr_t>(h);
  if ((v == 0 || v == 1 || v == 2) && current_ctx() == no_context) {
    if (!by_user()) {
      w.violation(std::string{call} + " of the legacy or per-thread stream on a thread without a " +
                  "current context");
    }
    return nullptr;
  }
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

namespace {

/** Every entry point: the model's lock, and no call from a host function. */
#define ENTER(call)                   \
  std::lock_guard lock_{the().mutex}; \
  entered(call)

void entered(char const* call)
{
  if (in_host_fn) {
    the().violation(std::string{call} + " was called from a host function or a destructor");
  }
}

/**
 * The event `e` names for `call`, or null when its context was destroyed (a violation unless the
 * test made the call); a destroyed event is a violation.
 */
event* event_for(CUevent e, char const* call)
{
  auto* ev = reinterpret_cast<event*>(e);
  if (!the().contexts[static_cast<std::size_t>(ev->ctx)].alive) {
    if (!by_user()) { the().violation(std::string{call} + " of an event of a destroyed context"); }
    return nullptr;
  }
  if (!ev->alive) { the().violation(std::string{call} + " of a destroyed event"); }
  return ev;
}

/** True (the capture is invalidated) when `h` is the legacy stream beside a blocking capture. */
bool implicit_beside_capture(CUstream h, char const* call)
{
  if (!is_legacy(h) || !blocking_capture_in(current_ctx())) { return false; }
  for (auto& s : the().streams) {
    if (s->alive && s->capturing && s->blocking && s->ctx == current_ctx()) {
      the().invalidate(*s, std::string{call} + " on the legacy stream");
    }
  }
  return true;
}

}  // namespace

namespace {

/** What a question about a stream asks, besides the stream itself. */
enum class question {
  harmless,             // answered without harm to a capture
  of_capture,           // the capture state: the legacy stream beside a blocking capture refuses it
  invalidates_capture,  // asked of a capturing stream, it invalidates the capture
};

/** Answers `call` about the stream `h` names with `answer(stream&)`. */
template <class Answer>
CUresult ask(CUstream h, char const* call, question q, Answer&& answer)
{
  ENTER(call);
  if (current_ctx() == no_context && reinterpret_cast<std::uintptr_t>(h) <= 2) {
    (void)resolve(h, call);  // the violation
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (q == question::of_capture && is_legacy(h) && blocking_capture_in(current_ctx())) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;  // answered without harm to the capture
  }
  stream* s = resolve(h, call);
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (q == question::invalidates_capture && s->capturing) {
    the().invalidate(*s, std::string{call} + " on the capturing stream");
  }
  answer(*s);
  return CUDA_SUCCESS;
}

CUstreamCaptureStatus capture_status(stream const& s)
{
  return !s.capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
         : s.invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                         : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

}  // namespace

CUresult thread_exchange_stream_capture_mode(CUstreamCaptureMode* mode)
{
  auto runtime = static_cast<cudaStreamCaptureMode>(*mode);
  if (cudaThreadExchangeStreamCaptureMode(&runtime) != cudaSuccess) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *mode = static_cast<CUstreamCaptureMode>(runtime);
  return CUDA_SUCCESS;
}

CUresult stream_is_capturing(CUstream h, CUstreamCaptureStatus* st)
{
  return ask(
    h, "cuStreamIsCapturing", question::of_capture, [&](stream& s) { *st = capture_status(s); });
}

CUresult stream_get_capture_info(CUstream h,
                                 CUstreamCaptureStatus* st,
                                 cuuint64_t* id,
                                 CUgraph* g,
                                 CUgraphNode const** deps,
                                 std::size_t* count)
{
  return ask(h, "cuStreamGetCaptureInfo", question::of_capture, [&](stream& s) {
    *st = capture_status(s);
    if (id != nullptr) { *id = s.capture_id; }
    if (g != nullptr) {
      *g = *st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? reinterpret_cast<CUgraph>(s.into) : nullptr;
    }
    if (deps != nullptr) { *deps = nullptr; }
    if (count != nullptr) { *count = 0; }
  });
}

CUresult stream_get_id(CUstream h, unsigned long long* id)
{
  return ask(h, "cuStreamGetId", question::invalidates_capture, [&](stream& s) { *id = s.uid; });
}

CUresult stream_get_device(CUstream h, CUdevice* d)
{
  return ask(h, "cuStreamGetDevice", question::invalidates_capture, [&](stream& s) {
    *d = the().contexts[static_cast<std::size_t>(s.ctx)].device;
  });
}

CUresult stream_get_ctx(CUstream h, CUcontext* c)
{
  return ask(h, "cuStreamGetCtx", question::harmless, [&](stream& s) { *c = ctx_handle(s.ctx); });
}

CUresult ctx_get_current(CUcontext* c)
{
  *c = current_ctx() == no_context ? nullptr : ctx_handle(current_ctx());
  return CUDA_SUCCESS;
}

namespace {

/** False (a violation unless the test made the call) when context `c` was destroyed. */
bool usable_context(int c, char const* call)
{
  ENTER(call);
  if (c >= 0 && static_cast<std::size_t>(c) < the().contexts.size() &&
      the().contexts[static_cast<std::size_t>(c)].alive) {
    return true;
  }
  if (!by_user()) { the().violation(std::string{call} + " of a destroyed context"); }
  return false;
}

}  // namespace

CUresult ctx_set_current(CUcontext c)
{
  if (c == nullptr) {
    ctx_stack.back() = no_context;
    return CUDA_SUCCESS;
  }
  if (!usable_context(ctx_of(c), "cuCtxSetCurrent")) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
  ctx_stack.back() = ctx_of(c);
  return CUDA_SUCCESS;
}

CUresult ctx_push_current(CUcontext c)
{
  if (!usable_context(ctx_of(c), "cuCtxPushCurrent")) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
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
  ENTER("cuCtxGetDevice");
  if (current_ctx() == no_context) { return CUDA_ERROR_INVALID_CONTEXT; }
  *d = the().contexts[static_cast<std::size_t>(current_ctx())].device;
  return CUDA_SUCCESS;
}

CUresult ctx_synchronize()
{
  ENTER("cuCtxSynchronize");
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
  if (ordinal >= 0 && ordinal < 2) { return CUDA_SUCCESS; }
  ++the().refused_device_gets;
  return CUDA_ERROR_INVALID_DEVICE;
}

CUresult device_get_count(int* count)
{
  *count = 2;
  return CUDA_SUCCESS;
}

/** The index of `d`'s primary context. */
int primary_of(CUdevice d) { return d == 0 ? 0 : 2; }

CUresult primary_retain(CUcontext* c, CUdevice d)
{
  std::lock_guard lock{the().mutex};
  if (d < 0 || d > 1) { return CUDA_ERROR_INVALID_DEVICE; }
  the().contexts[static_cast<std::size_t>(primary_of(d))].alive = true;  // made again if it went
  ++the().primary_retains[d];
  *c = ctx_handle(primary_of(d));
  return CUDA_SUCCESS;
}

CUresult primary_release(CUdevice d)
{
  std::lock_guard lock{the().mutex};
  if (d < 0 || d > 1) { return CUDA_ERROR_INVALID_DEVICE; }
  if (the().primary_retains[d] == 0) {
    the().violation("cuDevicePrimaryCtxRelease without a retain");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (--the().primary_retains[d] == 0 && !the().runtime_holds_primary[d]) {
    the().destroy_context(primary_of(d));  // its last holder let go
  }
  return CUDA_SUCCESS;
}

CUresult primary_state(CUdevice d, unsigned int* flags, int* active)
{
  std::lock_guard lock{the().mutex};
  if (d < 0 || d > 1) { return CUDA_ERROR_INVALID_DEVICE; }
  *flags  = 0;
  *active = the().contexts[static_cast<std::size_t>(primary_of(d))].alive &&
                (the().runtime_holds_primary[d] || the().primary_retains[d] > 0)
              ? 1
              : 0;
  return CUDA_SUCCESS;
}

CUresult event_create(CUevent* e, unsigned int)
{
  ENTER("cuEventCreate");
  the().events.push_back(std::make_unique<event>());
  the().events.back()->ctx     = current_ctx();
  the().events.back()->library = !by_user();
  *e                           = reinterpret_cast<CUevent>(the().events.back().get());
  return CUDA_SUCCESS;
}

CUresult event_destroy(CUevent e)
{
  ENTER("cuEventDestroy");
  event* ev = event_for(e, "cuEventDestroy");
  if (ev == nullptr) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
  ev->alive = false;
  return CUDA_SUCCESS;
}

CUresult event_record(CUevent e, CUstream h)
{
  ENTER("cuEventRecord");
  event* ev = event_for(e, "cuEventRecord");
  if (ev == nullptr) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
  if (implicit_beside_capture(h, "an event recorded")) {
    return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  }
  stream* s = resolve(h, "cuEventRecord");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->ctx != ev->ctx) {
    the().violation("cuEventRecord of an event on a stream of another context");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ev->captured   = s->capturing;
  ev->capture_id = s->capture_id;
  ev->clock      = s->clock;
  return CUDA_SUCCESS;
}

CUresult stream_wait_event(CUstream h, CUevent e, unsigned int)
{
  ENTER("cuStreamWaitEvent");
  event* ev = event_for(e, "cuStreamWaitEvent");
  if (ev == nullptr) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
  if (implicit_beside_capture(h, "a wait")) { return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; }
  stream* s = resolve(h, "cuStreamWaitEvent");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (ev->captured && (!s->capturing || s->capture_id != ev->capture_id)) {
    the().invalidate_captures("a wait outside a capture on an event recorded in it");
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  merge(s->clock, ev->clock);
  return CUDA_SUCCESS;
}

CUresult event_synchronize(CUevent e)
{
  ENTER("cuEventSynchronize");
  event* ev = event_for(e, "cuEventSynchronize");
  if (ev == nullptr) { return CUDA_ERROR_CONTEXT_IS_DESTROYED; }
  if (the().refuses("cuEventSynchronize")) { return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
  if (ev->captured) {
    the().invalidate_captures("a host wait on an event recorded in a capture");
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  merge(the().completed, ev->clock);
  return CUDA_SUCCESS;
}

CUresult stream_create(CUstream* h, unsigned int flags)
{
  ENTER("cuStreamCreate");
  stream* s  = the().make_stream(current_ctx(), (flags & CU_STREAM_NON_BLOCKING) == 0);
  s->library = !by_user();
  *h         = reinterpret_cast<CUstream>(s);
  the().created_in.push_back(current_ctx());
  return CUDA_SUCCESS;
}

CUresult stream_destroy(CUstream h)
{
  ENTER("cuStreamDestroy");
  if (stream* s = resolve(h, "cuStreamDestroy")) {
    s->alive = false;
    merge(the().graveyard[s->ctx], s->clock);  // its work goes on; a context wait covers it
  }
  return CUDA_SUCCESS;
}

CUresult stream_synchronize(CUstream h)
{
  ENTER("cuStreamSynchronize");
  if (implicit_beside_capture(h, "a host wait")) { return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; }
  stream* s = resolve(h, "cuStreamSynchronize");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->capturing) { return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
  if (the().refuses("cuStreamSynchronize")) { return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
  merge(the().completed, s->clock);
  return CUDA_SUCCESS;
}

// ---- Host functions and user objects ------------------------------------------------------

CUresult launch_host_func(CUstream h, CUhostFn fn, void* data)
{
  ENTER("cuLaunchHostFunc");
  if (implicit_beside_capture(h, "a host function")) { return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; }
  stream* s = resolve(h, "cuLaunchHostFunc");
  if (s == nullptr) { return CUDA_ERROR_INVALID_HANDLE; }
  if (s->capturing) {
    if (s->invalidated) { return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; }
    s->into->nodes.push_back({fn, data});
    return CUDA_SUCCESS;
  }
  enqueue(*s);
  merge(the().completed, s->clock);  // it runs once the stream's work so far is done: now
  run_host_fn(fn, data);
  return CUDA_SUCCESS;
}

CUresult user_object_create(
  CUuserObject* o, void* data, CUhostFn destroy, unsigned int refs, unsigned int flags)
{
  ENTER("cuUserObjectCreate");
  if (flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC || refs == 0 || destroy == nullptr) {
    the().violation("cuUserObjectCreate with arguments the driver refuses");
    return CUDA_ERROR_INVALID_VALUE;
  }
  the().user_objects.push_back(std::make_unique<user_object>(user_object{data, destroy, refs}));
  *o = reinterpret_cast<CUuserObject>(the().user_objects.back().get());
  return CUDA_SUCCESS;
}

CUresult user_object_release(CUuserObject o, unsigned int count)
{
  ENTER("cuUserObjectRelease");
  the().release_user_object(*reinterpret_cast<user_object*>(o), count);
  return CUDA_SUCCESS;
}

CUresult graph_retain_user_object(CUgraph g, CUuserObject o, unsigned int count, unsigned int flags)
{
  ENTER("cuGraphRetainUserObject");
  auto* gr = reinterpret_cast<graph*>(g);
  auto* uo = reinterpret_cast<user_object*>(o);
  if (!gr->alive || uo->refs == 0 || count == 0 || flags != 0) {
    the().violation("cuGraphRetainUserObject with arguments the driver refuses");
    return CUDA_ERROR_INVALID_VALUE;
  }
  gr->held[uo] += count;
  uo->refs += count;
  return CUDA_SUCCESS;
}

// ---- Devices and virtual memory -----------------------------------------------------------

namespace {

bool valid_device(int d) { return d == 0 || d == 1; }

/** A violation naming `call`, and the error the driver answers for a bad argument. */
CUresult refused(char const* call, char const* why)
{
  the().violation(std::string{call} + ": " + why);
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice d)
{
  ENTER("cuDeviceGetAttribute");
  if (!valid_device(d)) { return CUDA_ERROR_INVALID_DEVICE; }
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
      *value = the().vmm.fabric_supported ? 1 : 0;
      break;
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}

CUresult device_can_access_peer(int* can, CUdevice d, CUdevice peer)
{
  if (!valid_device(d) || !valid_device(peer)) { return CUDA_ERROR_INVALID_DEVICE; }
  *can = d != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult get_error_name(CUresult r, char const** name)
{
  static std::map<CUresult, char const*> const names{
    {CUDA_SUCCESS, "CUDA_SUCCESS"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
  };
  auto const it = names.find(r);
  *name         = it == names.end() ? nullptr : it->second;
  return it == names.end() ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult mem_get_allocation_granularity(std::size_t* granularity,
                                        CUmemAllocationProp const* prop,
                                        CUmemAllocationGranularity_flags option)
{
  ENTER("cuMemGetAllocationGranularity");
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(prop->location.id)) {
    return refused("cuMemGetAllocationGranularity", "not a device's location");
  }
  *granularity = option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED ? the().vmm.recommended_granularity
                                                                : the().vmm.minimum_granularity;
  return CUDA_SUCCESS;
}

CUresult mem_create(CUmemGenericAllocationHandle* handle,
                    std::size_t bytes,
                    CUmemAllocationProp const* prop,
                    unsigned long long flags)
{
  ENTER("cuMemCreate");
  vmm_model& m        = the().vmm;
  int const device    = prop->location.id;
  unsigned const want = static_cast<unsigned>(prop->requestedHandleTypes);
  unsigned const have =
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | (m.fabric_supported ? CU_MEM_HANDLE_TYPE_FABRIC : 0);
  if (flags != 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(device)) {
    return refused("cuMemCreate", "properties the driver refuses");
  }
  if (bytes == 0 || bytes % m.minimum_granularity != 0) {
    return refused("cuMemCreate", "a size that is not a multiple of the granularity");
  }
  if ((want & ~have) != 0) {
    the().violation("cuMemCreate of a handle type the device does not support");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (m.refuse_fabric && (want & CU_MEM_HANDLE_TYPE_FABRIC) != 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  std::size_t& used = m.in_use[device];
  if (bytes > m.capacity - used) {
    ++m.refusals;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  used += bytes;
  *handle                = m.allocations.size() + 1;
  m.allocations[*handle] = {bytes, device};
  return CUDA_SUCCESS;
}

namespace {

/** The physical memory of an allocation is given back once it is released and unmapped. */
void give_back_if_unused(vmm_model::allocation& a)
{
  if (a.released && a.maps == 0) { the().vmm.in_use[a.device] -= a.bytes; }
}

}  // namespace

CUresult mem_release(CUmemGenericAllocationHandle handle)
{
  ENTER("cuMemRelease");
  auto const it = the().vmm.allocations.find(handle);
  if (it == the().vmm.allocations.end() || it->second.released) {
    return refused("cuMemRelease", "not a live allocation");
  }
  it->second.released = true;
  give_back_if_unused(it->second);
  return CUDA_SUCCESS;
}

CUresult mem_address_reserve(
  CUdeviceptr* ptr, std::size_t bytes, std::size_t alignment, CUdeviceptr, unsigned long long)
{
  ENTER("cuMemAddressReserve");
  vmm_model& m = the().vmm;
  if (bytes == 0 || bytes % m.minimum_granularity != 0 ||
      (alignment != 0 && !std::has_single_bit(alignment))) {
    return refused("cuMemAddressReserve", "a size or alignment the driver refuses");
  }
  std::size_t const align = std::max(alignment, m.minimum_granularity);
  CUdeviceptr const at    = (m.next_address + align - 1) / align * align;
  m.next_address          = at + bytes + m.minimum_granularity;  // a gap: no two ranges touch
  m.reserved[at]          = bytes;
  *ptr                    = at;
  return CUDA_SUCCESS;
}

CUresult mem_address_free(CUdeviceptr ptr, std::size_t bytes)
{
  ENTER("cuMemAddressFree");
  vmm_model& m  = the().vmm;
  auto const it = m.reserved.find(ptr);
  if (it == m.reserved.end() || it->second != bytes) {
    return refused("cuMemAddressFree", "not a reserved range");
  }
  auto const inside = m.mapped.lower_bound(ptr);
  if (inside != m.mapped.end() && inside->first < ptr + bytes) {
    return refused("cuMemAddressFree", "a range still mapped");
  }
  m.reserved.erase(it);
  return CUDA_SUCCESS;
}

CUresult mem_map(CUdeviceptr ptr,
                 std::size_t bytes,
                 std::size_t offset,
                 CUmemGenericAllocationHandle handle,
                 unsigned long long flags)
{
  ENTER("cuMemMap");
  vmm_model& m  = the().vmm;
  auto const a  = m.allocations.find(handle);
  auto reserved = m.reserved.upper_bound(ptr);
  if (offset != 0 || flags != 0 || a == m.allocations.end() || a->second.released ||
      a->second.bytes != bytes || reserved == m.reserved.begin()) {
    return refused("cuMemMap", "arguments the driver refuses");
  }
  --reserved;
  auto const next = m.mapped.lower_bound(ptr);
  bool const overlaps =
    (next != m.mapped.end() && next->first < ptr + bytes) ||
    (next != m.mapped.begin() && std::prev(next)->first + std::prev(next)->second.bytes > ptr);
  if (ptr + bytes > reserved->first + reserved->second || overlaps) {
    return refused("cuMemMap", "a range outside a reservation, or mapped already");
  }
  m.mapped[ptr] = {bytes, handle, {}};
  ++a->second.maps;
  return CUDA_SUCCESS;
}

CUresult mem_unmap(CUdeviceptr ptr, std::size_t bytes)
{
  ENTER("cuMemUnmap");
  vmm_model& m  = the().vmm;
  auto const it = m.mapped.find(ptr);
  if (it == m.mapped.end() || it->second.bytes != bytes) {
    return refused("cuMemUnmap", "not a mapped range");
  }
  vmm_model::allocation& a = m.allocations[it->second.handle];
  m.mapped.erase(it);
  --a.maps;
  give_back_if_unused(a);
  return CUDA_SUCCESS;
}

CUresult mem_set_access(CUdeviceptr ptr,
                        std::size_t bytes,
                        CUmemAccessDesc const* desc,
                        std::size_t count)
{
  ENTER("cuMemSetAccess");
  auto const it = the().vmm.mapped.find(ptr);
  if (it == the().vmm.mapped.end() || it->second.bytes != bytes || count == 0) {
    return refused("cuMemSetAccess", "not a mapped range");
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !valid_device(desc[i].location.id) || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return refused("cuMemSetAccess", "an access descriptor the driver refuses");
    }
    it->second.access.push_back(desc[i].location.id);
  }
  return CUDA_SUCCESS;
}

#undef ENTER

void user_order(CUstream from, int from_ctx, stream& to)
{
  std::lock_guard lock{the().mutex};
  as_user const user;
  CUevent e{};
  ctx_push_current(ctx_handle(from_ctx));
  event_create(&e, 0);
  event_record(e, from);
  CUcontext popped{};
  ctx_pop_current(&popped);
  stream_wait_event(reinterpret_cast<CUstream>(&to), e, 0);
  event_destroy(e);
}

// ---- Workers --------------------------------------------------------------------------------

worker::worker(int ctx) : ctx_{ctx}, thread_{[this] { run(); }} {}

worker::~worker()
{
  std::thread::id const id = thread_.get_id();
  {
    std::lock_guard lock{mutex_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // what it holds in thread-local storage is released now, on its own thread
  std::lock_guard lock{the().mutex};
  for (auto it = the().per_thread.begin(); it != the().per_thread.end();) {
    if (it->first.first == id) {  // its per-thread default streams end with it
      it->second->alive = false;
      merge(the().graveyard[it->second->ctx], it->second->clock);
      it = the().per_thread.erase(it);
    } else {
      ++it;
    }
  }
}

void worker::call(std::function<void()> job)
{
  std::unique_lock lock{mutex_};
  job_ = std::move(job);
  cv_.notify_all();
  cv_.wait(lock, [&] { return !job_; });
}

void worker::run()
{
  ctx_stack = {ctx_};
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

run_settings settings_from_environment(char const* what, double fallback_seconds)
{
  run_settings r{};
  char const* seed = std::getenv("RMM_NEXT_MODEL_SEED");
  r.seed           = seed != nullptr ? std::strtoull(seed, nullptr, 10) : std::random_device{}();
  char const* time = std::getenv("RMM_NEXT_MODEL_SECONDS");
  double const s   = time != nullptr ? std::atof(time) : 0.0;
  r.seconds        = s > 0 ? s : fallback_seconds;
  std::printf("%s: seed %llu (RMM_NEXT_MODEL_SEED), %.1f s\n",
              what,
              static_cast<unsigned long long>(r.seed),
              r.seconds);
  return r;
}

long run_steps(double seconds, std::function<void()> const& step)
{
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long steps          = 0;
  while (std::chrono::steady_clock::now() < deadline && the().violations.empty()) {
    ++steps;
    step();
  }
  return steps;
}

void report_violations(std::uint64_t seed)
{
  for (std::string const& v : the().violations) {
    ADD_FAILURE() << v << " (seed " << seed << ")";
  }
  EXPECT_EQ(the().invalidated_captures, 0) << "seed " << seed;
}

void start_with_primary_unheld(int device)
{
  std::lock_guard lock{the().mutex};
  the().violations.clear();
  the().runtime_holds_primary[device] = false;
  the().primary_retains[device]       = 0;
}

bool primary_active(int device)
{
  unsigned int flags{};
  int active{};
  return primary_state(device, &flags, &active) == CUDA_SUCCESS && active == 1;
}

stream* resolve_on(cudaStream_t h) { return resolve(reinterpret_cast<CUstream>(h), "test"); }

}  // namespace model

// ---- The runtime calls, and the entry points ------------------------------------------------

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

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags)
{
  return model::stream_create(reinterpret_cast<CUstream*>(stream), flags) == CUDA_SUCCESS
           ? cudaSuccess
           : cudaErrorUnknown;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
  return model::stream_destroy(reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS
           ? cudaSuccess
           : cudaErrorInvalidResourceHandle;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode)
{
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
      *mode != cudaStreamCaptureModeRelaxed) {
    return cudaErrorInvalidValue;
  }
  std::swap(*mode, model::thread_capture_mode());
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count)
{
  *count = 2;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
  if (device < 0 || device > 1) { return cudaErrorInvalidDevice; }
  model::ctx_stack.back() = device == 0 ? 0 : 2;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device)
{
  std::lock_guard lock{model::the().mutex};
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
    {"cuStreamGetDevice", reinterpret_cast<void*>(&model::stream_get_device)},
    {"cuStreamIsCapturing", reinterpret_cast<void*>(&model::stream_is_capturing)},
    {"cuThreadExchangeStreamCaptureMode",
     reinterpret_cast<void*>(&model::thread_exchange_stream_capture_mode)},
    {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&model::stream_get_capture_info)},
    {"cuCtxGetCurrent", reinterpret_cast<void*>(&model::ctx_get_current)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(&model::ctx_get_device)},
    {"cuCtxSetCurrent", reinterpret_cast<void*>(&model::ctx_set_current)},
    {"cuStreamGetCtx", reinterpret_cast<void*>(&model::stream_get_ctx)},
    {"cuEventCreate", reinterpret_cast<void*>(&model::event_create)},
    {"cuEventRecord", reinterpret_cast<void*>(&model::event_record)},
    {"cuEventDestroy", reinterpret_cast<void*>(&model::event_destroy)},
    {"cuEventSynchronize", reinterpret_cast<void*>(&model::event_synchronize)},
    {"cuStreamWaitEvent", reinterpret_cast<void*>(&model::stream_wait_event)},
    {"cuStreamCreate", reinterpret_cast<void*>(&model::stream_create)},
    {"cuStreamSynchronize", reinterpret_cast<void*>(&model::stream_synchronize)},
    {"cuStreamDestroy", reinterpret_cast<void*>(&model::stream_destroy)},
    {"cuCtxPushCurrent", reinterpret_cast<void*>(&model::ctx_push_current)},
    {"cuCtxPopCurrent", reinterpret_cast<void*>(&model::ctx_pop_current)},
    {"cuCtxSynchronize", reinterpret_cast<void*>(&model::ctx_synchronize)},
    {"cuDeviceGet", reinterpret_cast<void*>(&model::device_get)},
    {"cuDeviceGetCount", reinterpret_cast<void*>(&model::device_get_count)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&model::primary_retain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&model::primary_release)},
    {"cuDevicePrimaryCtxGetState", reinterpret_cast<void*>(&model::primary_state)},
    {"cuLaunchHostFunc", reinterpret_cast<void*>(&model::launch_host_func)},
    {"cuUserObjectCreate", reinterpret_cast<void*>(&model::user_object_create)},
    {"cuUserObjectRelease", reinterpret_cast<void*>(&model::user_object_release)},
    {"cuGraphRetainUserObject", reinterpret_cast<void*>(&model::graph_retain_user_object)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(&model::device_get_attribute)},
    {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&model::device_can_access_peer)},
    {"cuGetErrorName", reinterpret_cast<void*>(&model::get_error_name)},
    {"cuMemGetAllocationGranularity",
     reinterpret_cast<void*>(&model::mem_get_allocation_granularity)},
    {"cuMemCreate", reinterpret_cast<void*>(&model::mem_create)},
    {"cuMemRelease", reinterpret_cast<void*>(&model::mem_release)},
    {"cuMemAddressReserve", reinterpret_cast<void*>(&model::mem_address_reserve)},
    {"cuMemAddressFree", reinterpret_cast<void*>(&model::mem_address_free)},
    {"cuMemMap", reinterpret_cast<void*>(&model::mem_map)},
    {"cuMemUnmap", reinterpret_cast<void*>(&model::mem_unmap)},
    {"cuMemSetAccess", reinterpret_cast<void*>(&model::mem_set_access)},
  };
  return rmm_next::test::answer_entry_point(entries, symbol, function, status);
}

}  // extern "C"
