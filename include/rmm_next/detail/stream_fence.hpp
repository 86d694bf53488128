/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

/**
 * @file
 * @brief Fences: CUDA events recorded on a stream, through the driver entry points, so that work
 * elsewhere can be ordered after that stream's work without synchronizing a device or a context.
 *
 * Every call here (`cuEventCreate`, `cuEventRecord`, `cuStreamWaitEvent`, `cuEventDestroy`) is
 * one the driver accepts while any stream of the process is being captured, in any capture mode
 * of the caller, as long as the stream named is not itself captured (detail/capture_mode.hpp says
 * which calls a capture makes the driver refuse). None of them touches the runtime's last-error
 * state, so a caller's pending error survives. Once the runtime is unloading, or in a forked child,
 * they do nothing.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief True when the driver offers fences; without a driver no GPU work exists to wait for. */
inline bool fences_available() noexcept
{
  driver_api const& api = driver();
  return api.event_create != nullptr && api.event_record != nullptr &&
         api.event_destroy != nullptr && api.stream_wait_event != nullptr;
}

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
 * @brief Records `event` on `stream` (a stream of the event's context, not being captured): work
 * that waits on the event afterwards is ordered after everything queued on `stream` so far.
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
  return driver().stream_wait_event(waiter, event, 0) == CUDA_SUCCESS;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
