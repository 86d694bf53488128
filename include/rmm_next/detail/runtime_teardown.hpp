/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#if defined(__unix__)
#include <pthread.h>
#endif

/**
 * @file
 * @brief Exit-time tracking: whether the CUDA runtime is unloading (or, in a forked child,
 * unusable), and how `noexcept` release paths report failures (silently in both cases).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief Set once CUDA calls must stop: when the process has begun exiting after the CUDA runtime
 * was initialized, and in a child forked after that, whose inherited CUDA state is unusable (the
 * driver answers `cudaErrorInitializationError`). Releases are then skipped, or their failures
 * ignored.
 */
inline std::atomic<bool>& runtime_unloading() noexcept
{
  static std::atomic<bool> flag{false};
  return flag;
}

/**
 * @brief Set, with `runtime_unloading`, in a child forked after `watch_runtime_teardown` was first
 * called; never at exit. The child holds its parent's state (resources, pools, streams, and locks
 * that threads absent from the child may hold), which nothing in it may use: a call that would use
 * it is refused, and says why.
 */
inline std::atomic<bool>& forked_after_cuda() noexcept
{
  static std::atomic<bool> flag{false};
  return flag;
}

/**
 * @brief `m`, locked; in a child forked after CUDA was used (`forked_after_cuda`), only when it is
 * free now: a thread of the parent inside it at the fork does not exist in the child, so nothing
 * there will ever unlock it. The caller checks `owns_lock()` and, without it, leaves what `m`
 * guards alone (it may be half changed).
 */
template <class Mutex>
[[nodiscard]] std::unique_lock<Mutex> lock_unless_orphaned(Mutex& m) noexcept
{
  std::unique_lock lock{m, std::defer_lock};
  if (forked_after_cuda().load(std::memory_order_relaxed)) {
    (void)lock.try_lock();
  } else {
    lock.lock();
  }
  return lock;
}

/** @brief Marks the runtime as unloading or unusable (`runtime_unloading`). */
inline void stop_cuda_calls() noexcept
{
  runtime_unloading().store(true, std::memory_order_relaxed);
}

/**
 * @brief Registers, once, an exit handler that marks the runtime as unloading, and a fork handler
 * that marks it unusable in the child (and the child as forked: `forked_after_cuda`).
 *
 * Called after the first successful CUDA call of a resource, so that the exit handler runs before
 * the runtime's own teardown (exit handlers run in reverse order of registration). Objects
 * destroyed after it (statics created before the runtime) then skip their CUDA calls. A child
 * forked from then on holds the parent's resources but cannot use CUDA at all: everything it
 * destroys, statics at its exit included, skips its CUDA calls from the start.
 */
inline void watch_runtime_teardown() noexcept
{
  static bool const registered = [] {
    bool ok = std::atexit([] { stop_cuda_calls(); }) == 0;
#if defined(__unix__)
    ok = pthread_atfork(nullptr,
                        nullptr,
                        [] {
                          forked_after_cuda().store(true, std::memory_order_relaxed);
                          stop_cuda_calls();
                        }) == 0 &&
         ok;
#endif
    return ok;
  }();
  (void)registered;
}

/**
 * @brief Reports a failure in a `noexcept` release path: silent while the runtime unloads and in a
 * forked child (`runtime_unloading`), otherwise a message and a debug assertion. Clears the sticky
 * error.
 */
inline void report_release_failure(cudaError_t status, [[maybe_unused]] char const* what) noexcept
{
  (void)cudaGetLastError();
  if (status == cudaErrorCudartUnloading || status == cudaErrorContextIsDestroyed ||
      runtime_unloading().load(std::memory_order_relaxed)) {
    return;
  }
#ifndef NDEBUG
  std::fprintf(stderr,
               "rmm_next::release: %s returned %s (%s)\n",
               what,
               cudaGetErrorName(status),
               cudaGetErrorString(status));
  assert(false && "rmm_next::release: a CUDA release call failed");
#endif
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
