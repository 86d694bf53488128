/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/throw_error.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The stream vocabulary: everything rmm-next asks the driver about a stream (its identity
 * and lane, whether it is a default stream, its context and device, its capture state) and every
 * fence it records or waits on. No other code asks the driver about a stream.
 *
 * What the driver accepts, measured on an H200 (driver 580), and what each function here does
 * about it:
 * - While a stream is being captured, asking it for its id (`cuStreamGetId`) or its device
 *   (`cuStreamGetDevice`) invalidates the capture, in every capture mode. Its capture state
 *   (`cuStreamIsCapturing`, `cuStreamGetCaptureInfo`) and its context (`cuStreamGetCtx`) are
 *   answered without harm. So `stream_id`, `stream_lane` and `stream_device` are for eager streams
 *   only: callers ask `stream_is_eager` or `capture_of` first.
 * - Events (create, record, wait, destroy) are accepted beside a capture on any thread, in any
 *   mode of the caller, as long as the stream named is not itself captured. An event recorded on a
 *   captured stream belongs to the capture: waiting on it outside the capture invalidates it. A
 *   block freed on a captured stream is therefore fenced by the graph itself (`release_in_graph`).
 * - An event of a context that has since been destroyed cannot be waited on, and its handle may be
 *   reused by a later event. Fences that outlive the call that made them are therefore events of a
 *   device's primary context, which lives as long as the process: `fence_relay` carries a fence
 *   of another context over to one.
 *
 * None of these calls touches the runtime's last-error state, so a caller's pending error
 * survives. Once the runtime is unloading, or in a forked child, the fence calls do nothing.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

// ---- Identity -------------------------------------------------------------------------------

/**
 * @brief True for the handles that name a default stream of whichever device is current when
 * work is ordered on them: 0, `cudaStreamLegacy` and `cudaStreamPerThread`.
 */
[[gnu::always_inline]] inline bool is_default_stream(cudaStream_t stream) noexcept
{
  return stream == cudaStream_t{} || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

/**
 * @brief The process-unique id of eager `stream` (`cuStreamGetId`; ids are never reused, unlike
 * handles), or 0 when the driver cannot tell. Never for a stream being captured (see the file).
 *
 * In a process without a CUDA driver no stream can exist; the handle's value is then its id.
 */
[[gnu::always_inline]] inline std::uint64_t stream_id(cudaStream_t stream) noexcept
{
  auto const fn = driver().stream_get_id;
  if (fn == nullptr) {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream));
  }
  unsigned long long id{};
  return fn(reinterpret_cast<CUstream>(stream), &id) == CUDA_SUCCESS ? id : 0;
}

/**
 * @brief True when handle 0 names the legacy default stream in this translation unit: code built
 * without per-thread default streams. With them, 0 names the calling thread's own default stream.
 */
#if !defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
inline constexpr bool zero_is_legacy_stream = true;
#else
inline constexpr bool zero_is_legacy_stream = false;
#endif

/**
 * @brief True for the handles of the calling thread's own default stream: `cudaStreamPerThread`,
 * and 0 in code built with per-thread default streams. Such a stream ends with its thread.
 */
[[gnu::always_inline]] inline bool is_per_thread_default_stream(cudaStream_t stream) noexcept
{
  return stream == cudaStreamPerThread || (!zero_is_legacy_stream && stream == cudaStream_t{});
}

/** @brief A made stream's handle and the lane `stream_lane` last answered for it on a thread. */
struct recent_lane {
  cudaStream_t handle{};
  std::uint64_t lane{0};
};

/** @brief What `thread_may_lack_context` knows of the calling thread. */
struct thread_context_state {
  bool had_one{false};  ///< seen with a context of its own
  int lent{0};          ///< `default_stream_context` scopes alive that made a context current
};

/**
 * @brief The calling thread's facts about streams and contexts that every call into a cache reads:
 * one thread-local object instead of one per fact. In a shared library each thread-local variable
 * is found through its own `__tls_get_addr` call and sits on a cache line of its own; together
 * they are found once per function and share a line, which matters where a call runs with the
 * host's caches cold (between the allocations of a training step). Trivially destructible, so it
 * stays readable while the thread's other thread-locals are destroyed.
 */
struct alignas(64) thread_stream_state {
  std::optional<cudaStream_t> vouched{};  ///< `vouched_eager_stream`
  recent_lane recent{};                   ///< `recent_stream_lane`
  thread_context_state context{};         ///< `this_thread_context`
  CUcontext legacy_context{};             ///< `stream_lane` of the legacy stream: its context
  std::uint64_t legacy_id{0};             ///< and the id asked in it
  CUcontext per_thread_context{};         ///< `stream_lane` of the per-thread stream: its context
  std::uint64_t per_thread_serial{0};     ///< and the thread's number in it
};
static_assert(std::is_trivially_destructible_v<thread_stream_state>);

[[gnu::always_inline]] inline thread_stream_state& this_thread_streams() noexcept
{
  thread_local thread_stream_state state{};
  return state;
}

/** @brief This thread's last answer of `stream_lane` for a made stream (see `stream_lane_hint`). */
[[gnu::always_inline]] inline recent_lane& recent_stream_lane() noexcept
{
  return this_thread_streams().recent;
}

/**
 * @brief What orders work queued on eager `stream` from the calling thread: equal lanes are one
 * stream, whose later events cover its earlier ones. The stream's unique id for a stream the
 * program made and for the legacy default stream (`cudaStreamLegacy`, and 0 in programs built
 * without per-thread default streams): one stream per context, shared by every thread of the
 * process, so a block freed on it by one thread (PyTorch's autograd thread) is reused by another
 * without a fence. Its id is asked once per thread and context (`cuStreamGetId` on the legacy
 * stream), and asked again when the thread's current context changes. `cudaStreamPerThread` (and
 * 0 with per-thread default streams) names a different stream on each thread and in each context:
 * its lane is the thread's, renumbered whenever the thread's current context has changed since its
 * last call (a context it returns to gets a new number, which only adds waits). 0 when the driver
 * cannot tell.
 */
inline std::uint64_t stream_lane(cudaStream_t stream) noexcept
{
  thread_stream_state& t = this_thread_streams();
  if (stream == cudaStreamLegacy || (zero_is_legacy_stream && stream == cudaStream_t{})) {
    // A context destroyed and another made at its address keeps the old id for this thread: the
    // old context's work is done, so that only ever adds a wait on another thread's lane.
    if (CUcontext const now = current_context_or_null();
        t.legacy_id == 0 || now != t.legacy_context) {
      t.legacy_context = now;
      t.legacy_id      = stream_id(cudaStreamLegacy);
    }
    return t.legacy_id;
  }
  if (is_per_thread_default_stream(stream)) {
    static std::atomic<std::uint64_t> next{0};
    if (CUcontext const now = current_context_or_null();
        t.per_thread_serial == 0 || now != t.per_thread_context) {
      t.per_thread_context = now;
      t.per_thread_serial  = ++next;
    }
    return (std::uint64_t{1} << 63) | (t.per_thread_serial << 1);
  }
  std::uint64_t const id = stream_id(stream);
  if (id != 0) { t.recent = {stream, id}; }
  return id;
}

/**
 * @brief The lane `stream_lane` last answered on this thread, for eager `stream`, without asking
 * the driver again when `stream` is the handle it answered for; otherwise `stream_lane(stream)`.
 *
 * A hint, not an identity: the stream it names may have been destroyed since and another made at
 * its handle. A lane read from it may pick which free list a block joins, or decide that a free
 * needs a fence of its own (a fence recorded on `stream` orders what `stream` did, whatever its
 * lane), but nothing that claims the lane's earlier work done: a fence of the lane, or a segment
 * given back on `stream` as its lane's. Those ask `stream_lane` first (`stream_lane_confirms`).
 */
inline std::uint64_t stream_lane_hint(cudaStream_t stream) noexcept
{
  if (is_default_stream(stream)) { return stream_lane(stream); }  // already answered per thread
  if (recent_lane const& r = recent_stream_lane(); r.handle == stream && r.lane != 0) {
    return r.lane;
  }
  return stream_lane(stream);
}

/** @brief True when eager `stream` is lane `lane` now: a `stream_lane_hint` confirmed. */
inline bool stream_lane_confirms(cudaStream_t stream, std::uint64_t lane) noexcept
{
  return lane != 0 && stream_lane(stream) == lane;
}

/**
 * @brief The context of `stream` (`cuStreamGetCtx`: one driver call, answered without harm to a
 * capture), or null when the driver cannot tell. Not for the default streams, whose context is the
 * current one (`ordering_context`).
 */
inline CUcontext stream_context(cudaStream_t stream) noexcept
{
  auto const fn = driver().stream_get_ctx;
  CUcontext context{};
  if (fn == nullptr || fn(reinterpret_cast<CUstream>(stream), &context) != CUDA_SUCCESS) {
    return nullptr;
  }
  return context;
}

/** @brief The context work queued on `stream` now runs in: the current one for default streams. */
inline CUcontext ordering_context(cudaStream_t stream) noexcept
{
  return is_default_stream(stream) ? current_context_or_null() : stream_context(stream);
}

/**
 * @brief The device whose work eager `stream` orders: the current device for the default streams,
 * else the device the stream was created on (`cuStreamGetDevice`, one driver call, on drivers
 * 12.8 and later; the stream's context on older ones). `no_device` when the driver cannot tell (no
 * driver, an invalid handle).
 */
inline int stream_device(cudaStream_t stream) noexcept
{
  if (is_default_stream(stream)) { return current_device_or_none(); }
  driver_api const& api = driver();
  auto const handle     = reinterpret_cast<CUstream>(stream);
  if (api.stream_get_device != nullptr) {
    CUdevice device{};
    return api.stream_get_device(handle, &device) == CUDA_SUCCESS ? static_cast<int>(device)
                                                                  : no_device;
  }
  // Before 12.8: the device of the stream's context, made current for the question.
  CUcontext const context = stream_context(stream);
  CUcontext const saved   = current_context_or_null();
  if (context == nullptr || api.ctx_set_current == nullptr) { return no_device; }
  if (context == saved) { return device_of_current_context(saved); }
  if (api.ctx_set_current(context) != CUDA_SUCCESS) { return no_device; }
  int const device = device_of_current_context(context);
  (void)api.ctx_set_current(saved);
  return device;
}

// ---- Capture state --------------------------------------------------------------------------

/** @brief The stream an `eager_stream_scope` of the calling thread vouches for, if any. */
[[gnu::always_inline]] inline std::optional<cudaStream_t>& vouched_eager_stream() noexcept
{
  return this_thread_streams().vouched;
}

/**
 * @brief For its lifetime, `stream_is_eager(stream)` on the calling thread answers true without
 * asking the driver: made by a caller that has just asked the driver itself (the allocator
 * plugin, which asks `capture_of` of every stream it allocates or frees on) around one call
 * into a resource that does nothing to the stream's capture state. The answer it vouches for is
 * as old as the caller's own query; a capture another thread begins on the stream meanwhile
 * races with the call either way. Scopes nest; the outer one's stream is vouched for again after.
 */
class eager_stream_scope {
 public:
  explicit eager_stream_scope(cudaStream_t stream) noexcept
    : vouched_{vouched_eager_stream()}, saved_{std::exchange(vouched_, stream)}
  {
  }
  eager_stream_scope(eager_stream_scope const&)            = delete;
  eager_stream_scope& operator=(eager_stream_scope const&) = delete;
  ~eager_stream_scope() { vouched_ = saved_; }

 private:
  std::optional<cudaStream_t>& vouched_;  ///< this thread's, found once
  std::optional<cudaStream_t> saved_;     ///< the outer scope's, given back at the end
};

/**
 * @brief True when work on `stream` runs eagerly: it is not being captured into a graph and the
 * driver could say so (`cuStreamIsCapturing`), or an `eager_stream_scope` of the calling thread
 * vouches for it. False while it is captured, or when the query fails.
 */
[[gnu::always_inline]] inline bool stream_is_eager(cudaStream_t stream) noexcept
{
  if (vouched_eager_stream() == stream) { return true; }
  auto const fn = driver().stream_is_capturing;
  if (fn == nullptr) { return true; }  // no driver: no capture
  CUstreamCaptureStatus status{};
  return fn(reinterpret_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_NONE;
}

/** @brief Whether a stream is being captured. */
enum class capture_status : unsigned char {
  none,         ///< eager: its work runs as it is queued
  active,       ///< being captured into `capture_info::graph`
  invalidated,  ///< its capture failed, and has not ended: the stream refuses what a capture does
  unknown,      ///< the driver could not say (a destroyed handle, a legacy stream beside a capture)
};

/** @brief A stream's capture: its status, the capture's process-unique id and its graph. */
struct capture_info {
  capture_status status{capture_status::none};
  unsigned long long id{0};
  CUgraph graph{};

  /** @brief True unless the stream is known to be eager. */
  [[nodiscard]] bool capturing() const noexcept { return status != capture_status::none; }
};

/** @brief The capture `stream` takes part in (`cuStreamGetCaptureInfo`), legal in every mode. */
inline capture_info capture_of(cudaStream_t stream) noexcept
{
  auto const fn = driver().stream_get_capture_info;
  if (fn == nullptr) {
    return {stream_is_eager(stream) ? capture_status::none : capture_status::unknown, 0, nullptr};
  }
  CUstreamCaptureStatus status{CU_STREAM_CAPTURE_STATUS_NONE};
  cuuint64_t id{0};
  CUgraph graph{};
  if (fn(reinterpret_cast<CUstream>(stream), &status, &id, &graph, nullptr, nullptr) !=
      CUDA_SUCCESS) {
    return {capture_status::unknown, 0, nullptr};
  }
  switch (status) {
    case CU_STREAM_CAPTURE_STATUS_NONE: return {capture_status::none, 0, nullptr};
    case CU_STREAM_CAPTURE_STATUS_ACTIVE: return {capture_status::active, id, graph};
    default: return {capture_status::invalidated, id, nullptr};
  }
}

// ---- Contexts -------------------------------------------------------------------------------

[[gnu::always_inline]] inline thread_context_state& this_thread_context() noexcept
{
  return this_thread_streams().context;
}

/**
 * @brief True while the calling thread may have no current context: one that has made no runtime
 * call yet (a Python thread dropping the last reference to a tensor). There the driver answers no
 * question about a default stream (CUDA_ERROR_INVALID_CONTEXT). Asks `cuCtxGetCurrent` until the
 * thread is first seen with a context of its own, then answers false from a thread-local flag: a
 * context unbound after that (`cuCtxSetCurrent(nullptr)`) is not noticed, and the questions on
 * that thread fail as they would without this check. False inside a `default_stream_context` that
 * made a context current.
 */
[[gnu::always_inline]] inline bool thread_may_lack_context() noexcept
{
  thread_context_state& t = this_thread_context();
  if (t.had_one || t.lent != 0) { return false; }
  t.had_one = current_context_or_null() != nullptr;
  return !t.had_one;
}

/**
 * @brief For its lifetime, `device`'s primary context is current on a thread that had no context,
 * when `stream` is a default stream (0, `cudaStreamLegacy`, `cudaStreamPerThread`): what the
 * runtime's first call on the thread would make current, so that the driver can answer questions
 * about that stream and order work on it. The thread is left without a context after. A nested
 * scope on the same thread (a resource under the allocator plugin) finds the context current and
 * does nothing. Elsewhere one thread-local read.
 */
class default_stream_context {
 public:
  default_stream_context(cudaStream_t stream, int device) noexcept
  {
    if (is_default_stream(stream) && thread_may_lack_context()) {
      guard_.emplace(device, primary_context, std::nothrow);
      ++this_thread_context().lent;
    }
  }
  default_stream_context(default_stream_context const&)            = delete;
  default_stream_context& operator=(default_stream_context const&) = delete;
  ~default_stream_context()
  {
    if (guard_) { --this_thread_context().lent; }
  }

 private:
  std::optional<device_guard> guard_;
};

/** @brief Makes `context` current for its lifetime (nothing when it already is, or is null). */
class context_scope {
 public:
  explicit context_scope(CUcontext context) noexcept
  {
    driver_api const& api = driver();
    if (context == nullptr || api.ctx_push_current == nullptr || api.ctx_pop_current == nullptr) {
      return;
    }
    if (current_context_or_null() == context) { return; }
    pushed_ = api.ctx_push_current(context) == CUDA_SUCCESS;
    ok_     = pushed_;
  }
  context_scope(context_scope const&)            = delete;
  context_scope& operator=(context_scope const&) = delete;
  ~context_scope()
  {
    if (pushed_) {
      CUcontext popped{};
      (void)driver().ctx_pop_current(&popped);
    }
  }
  /** @brief False when `context` could not be made current. */
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  bool pushed_{false};
  bool ok_{true};
};

// ---- Fences ---------------------------------------------------------------------------------

/** @brief True when the driver offers fences; without a driver no GPU work exists to wait for. */
inline bool fences_available() noexcept
{
  driver_api const& api = driver();
  return api.event_create != nullptr && api.event_record != nullptr &&
         api.event_destroy != nullptr && api.stream_wait_event != nullptr;
}

/** @brief A new event of `context` that records no timing, or null if the driver refused. */
inline CUevent make_fence_event(CUcontext context) noexcept
{
  if (runtime_unloading().load(std::memory_order_relaxed)) { return nullptr; }
  context_scope const scope{context};
  CUevent event{};
  if (!scope.ok() || driver().event_create(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    return nullptr;
  }
  return event;
}

/** @brief Destroys `event` (null: nothing). Work it was recorded behind goes on. */
inline void destroy_fence_event(CUevent event) noexcept
{
  if (event != nullptr && !runtime_unloading().load(std::memory_order_relaxed)) {
    (void)driver().event_destroy(event);
  }
}

/**
 * @brief Spare fence events of one context, handed out again instead of made anew: making and
 * destroying an event cost the driver more than recording one. An event goes back (`give`) only
 * once nothing will wait on it again; recording it again then moves it to its new point.
 * Not synchronized: its owner calls it under its own lock. Keeps at most `max_spare` events and
 * destroys the rest.
 */
class fence_event_pool {
 public:
  static constexpr std::size_t max_spare = 256;

  fence_event_pool()                                   = default;
  fence_event_pool(fence_event_pool const&)            = delete;
  fence_event_pool& operator=(fence_event_pool const&) = delete;
  ~fence_event_pool()
  {
    for (CUevent e : spare_) {
      destroy_fence_event(e);
    }
  }

  /** @brief A spare event, else a new one of `context` (null if the driver refused). */
  [[nodiscard]] CUevent take(CUcontext context) noexcept
  {
    if (spare_.empty()) { return make_fence_event(context); }
    CUevent const e = spare_.back();
    spare_.pop_back();
    return e;
  }

  /** @brief Takes back `event` (of the pool's context; null: nothing), which no one waits on. */
  void give(CUevent event) noexcept
  {
    if (event == nullptr) { return; }
    if (spare_.size() < max_spare) {
      try {
        spare_.push_back(event);
        return;
      } catch (...) {  // out of host memory: destroyed below
      }
    }
    destroy_fence_event(event);
  }

 private:
  std::vector<CUevent> spare_;
};

/**
 * @brief Records `event` on `stream` (a stream of the event's context): work that waits on the
 * event afterwards is ordered after everything queued on `stream` so far. On a stream being
 * captured the record is a node of that capture, which only streams of the same capture may wait
 * on (a wait outside it invalidates the capture).
 * For the default-stream handles, `stream` resolves against the calling thread's current
 * context, which must be the event's. False if the driver refused.
 */
inline bool record_fence(CUevent event, cudaStream_t stream) noexcept
{
  return event != nullptr && !runtime_unloading().load(std::memory_order_relaxed) &&
         driver().event_record(event, reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

/** @brief Orders the work queued on `waiter` from now on after `event`'s. False if refused. */
inline bool wait_for_fence(CUstream waiter, CUevent event) noexcept
{
  return event != nullptr && !runtime_unloading().load(std::memory_order_relaxed) &&
         driver().stream_wait_event(waiter, event, 0) == CUDA_SUCCESS;
}

/**
 * @brief Waits on the host until `event`'s work is done, in relaxed capture mode (it waits only
 * for uncaptured work, so a capture on any thread refuses nothing). False if the driver refused.
 */
inline bool wait_for_fence_on_host(CUevent event) noexcept
{
  if (event == nullptr || driver().event_synchronize == nullptr) { return event == nullptr; }
  relaxed_capture_mode const relaxed;
  return driver().event_synchronize(event) == CUDA_SUCCESS;
}

/**
 * @brief Waits on the host until the work queued on eager `stream` so far is done, in relaxed
 * capture mode. False if the driver refused.
 */
inline bool synchronize_stream(cudaStream_t stream) noexcept
{
  if (driver().stream_synchronize == nullptr) { return false; }
  relaxed_capture_mode const relaxed;
  return driver().stream_synchronize(reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

/**
 * @brief Records on eager `stream` a fence of `primary`, a primary context (which lives as long as
 * the process), whatever context `stream` belongs to. On a stream of `primary` that is one event
 * record; on a stream of another context (one made with `cuCtxCreate`, which its owner may
 * destroy) the fence is relayed: an event of the stream's context is recorded on it, `relay` (a
 * stream of `primary` that nothing else waits behind) waits for it, and the returned event is
 * recorded on `relay`; the stream's own event is destroyed at once. The returned event stays
 * valid, and waiting on it stays legal, after the stream's context is destroyed.
 * `into`, an event of `primary` (a spare from a `fence_event_pool`), is recorded instead of a new
 * one; it stays the caller's when a step fails.
 * @return The fence (owned by the caller, destroyed with `destroy_fence_event` or given back to
 * its pool), or null when the driver refused a step.
 */
inline CUevent record_lasting_fence(cudaStream_t stream,
                                    CUcontext primary,
                                    cudaStream_t relay,
                                    CUevent into = nullptr) noexcept
{
  CUcontext const context = ordering_context(stream);
  CUevent const lasting   = into != nullptr ? into : make_fence_event(primary);
  bool recorded           = false;
  if (context == nullptr || context == primary) {
    context_scope const scope{primary};
    recorded = scope.ok() && record_fence(lasting, stream);
  } else {
    CUevent const local = make_fence_event(context);
    bool local_recorded = false;
    {
      context_scope const scope{context};
      local_recorded = scope.ok() && record_fence(local, stream);
    }
    if (local_recorded && relay != nullptr && lasting != nullptr) {
      context_scope const scope{primary};
      recorded = scope.ok() && wait_for_fence(reinterpret_cast<CUstream>(relay), local) &&
                 record_fence(lasting, relay);
    }
    destroy_fence_event(local);
  }
  if (recorded) { return lasting; }
  if (into == nullptr) { destroy_fence_event(lasting); }
  return nullptr;
}

/**
 * @brief A retain of a device's primary context (`cuDevicePrimaryCtxRetain`), released when the
 * hold goes, or at `release()`. What a cache makes in that context (its stream, its events) lives
 * only as long as the context: without the hold, a process whose runtime had not yet made the
 * context (a cache built before any other CUDA call, over an upstream that had not touched the
 * device) would see it destroyed at once, and the cache's stream with it. Declared before what it
 * keeps alive, so that it is released after them. Nothing is released while the runtime unloads.
 */
class primary_context_hold {
 public:
  primary_context_hold()                                       = default;
  primary_context_hold(primary_context_hold const&)            = delete;
  primary_context_hold& operator=(primary_context_hold const&) = delete;
  ~primary_context_hold() { release(); }

  /** @brief Retains the primary context of `device` into `primary` (once); false on failure. */
  [[nodiscard]] bool retain(CUdevice device, CUcontext& primary) noexcept
  {
    driver_api const& api = driver();
    if (held_) { return true; }
    if (api.primary_ctx_retain == nullptr || api.primary_ctx_release == nullptr ||
        api.primary_ctx_retain(&primary, device) != CUDA_SUCCESS) {
      return false;
    }
    device_ = device;
    held_   = true;
    return true;
  }

  /** @brief Releases the retain, if any. */
  void release() noexcept
  {
    if (!held_) { return; }
    held_ = false;
    if (runtime_unloading().load(std::memory_order_relaxed)) { return; }
    (void)driver().primary_ctx_release(device_);
  }

 private:
  CUdevice device_{};
  bool held_{false};
};

/**
 * @brief Refuses a device id the driver does not know, for a cache made for device `device`:
 * `std::out_of_range` naming `what` (the cache), the id and the visible devices' count. A
 * negative id (no device) and a process without a driver pass: there the cache needs no device.
 */
inline void require_known_device(int device, std::string_view what)
{
  if (device < 0) { return; }
  driver_api const& api = driver();
  // The count first: an id past it is refused without a failing driver call, which a tool that
  // reports the driver's errors (compute-sanitizer) would count against the caller.
  int count{};
  if (api.device_get_count != nullptr && api.device_get_count(&count) == CUDA_SUCCESS) {
    if (device >= count) { throw_device_out_of_range(device, count, what); }
    return;
  }
  CUdevice dev{};
  if (api.device_get == nullptr || api.device_get(&dev, device) != CUDA_ERROR_INVALID_DEVICE) {
    return;
  }
  throw_error<std::out_of_range>(
    what, "device id " + std::to_string(device) + " is not a device of this process's driver");
}

/**
 * @brief A new non-blocking stream of `device`'s primary context, made in relaxed capture mode
 * (harmless to any capture), for a cache's releases and relayed fences; the context goes to
 * `primary`, retained by `hold` for as long as the caller keeps it (see `primary_context_hold`).
 * Null without a driver or device (then no GPU work exists), or when the driver refused; `hold`
 * then holds nothing.
 */
inline CUstream make_primary_stream(int device,
                                    CUcontext& primary,
                                    primary_context_hold& hold) noexcept
{
  driver_api const& api = driver();
  CUdevice dev{};
  if (device < 0 || !fences_available() || api.device_get == nullptr ||
      api.stream_create == nullptr || api.device_get(&dev, device) != CUDA_SUCCESS ||
      !hold.retain(dev, primary)) {
    return nullptr;
  }
  CUstream stream{};
  {
    relaxed_capture_mode const relaxed;
    context_scope const scope{primary};
    if (!scope.ok() || api.stream_create(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
      stream = nullptr;
    }
  }
  if (stream == nullptr) { hold.release(); }
  return stream;
}

// ---- Frees inside a capture -----------------------------------------------------------------

/**
 * @brief Calls `fn(data)` on the host when the graph being captured on `stream` (`capture`, as
 * `capture_of` returned it) runs past this point: a host node, all of whose predecessors in the
 * graph are done whenever it runs (each launch of the graph runs it again). `data` is taken in
 * every case and owned by the graph: `destroy(data)` runs when the graph and its instantiations are
 * gone (a user object), whether `fn` ran or not. Neither may make a CUDA call. Made in relaxed
 * capture mode, so a capture on another thread in any mode refuses nothing.
 * @return False when the driver refused: `fn` will never run (`destroy(data)` has run already, or
 * runs with the graph).
 */
inline bool call_in_graph(cudaStream_t stream,
                          capture_info const& capture,
                          CUhostFn fn,
                          CUhostFn destroy,
                          void* data) noexcept
{
  driver_api const& api = driver();
  if (capture.status != capture_status::active || capture.graph == nullptr ||
      api.launch_host_func == nullptr || api.user_object_create == nullptr ||
      api.user_object_release == nullptr || api.graph_retain_user_object == nullptr ||
      runtime_unloading().load(std::memory_order_relaxed)) {
    destroy(data);
    return false;
  }
  relaxed_capture_mode const relaxed;
  context_scope const scope{ordering_context(stream)};
  CUuserObject object{};
  if (!scope.ok() ||
      api.user_object_create(&object, data, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) !=
        CUDA_SUCCESS) {
    destroy(data);
    return false;
  }
  // The graph takes a reference of its own, the host node follows, and ours goes: `destroy` runs
  // once the graph no longer holds `data`, or at once when the graph took no reference.
  bool const held = api.graph_retain_user_object(capture.graph, object, 1, 0) == CUDA_SUCCESS;
  bool const called =
    held && api.launch_host_func(reinterpret_cast<CUstream>(stream), fn, data) == CUDA_SUCCESS;
  (void)api.user_object_release(object, 1);
  return called;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
