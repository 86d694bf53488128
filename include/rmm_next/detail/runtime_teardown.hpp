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

/**
 * @file
 * @brief Exit-time tracking: whether the CUDA runtime is unloading, and how `noexcept` release
 * paths report failures (silently while it unloads).
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/** @brief Set once the process has begun exiting after the CUDA runtime was initialized. */
inline std::atomic<bool>& runtime_unloading() noexcept
{
  static std::atomic<bool> flag{false};
  return flag;
}

/**
 * @brief Registers, once, an exit handler that marks the runtime as unloading.
 *
 * Called after the first successful CUDA call of a resource, so that the handler runs before the
 * runtime's own teardown (exit handlers run in reverse order of registration). Objects destroyed
 * after it (statics created before the runtime) then skip their CUDA calls.
 */
inline void watch_runtime_teardown() noexcept
{
  static bool const registered = [] {
    return std::atexit([] { runtime_unloading().store(true, std::memory_order_relaxed); }) == 0;
  }();
  (void)registered;
}

/**
 * @brief Reports a failure in a `noexcept` release path: silent while the runtime unloads,
 * otherwise a message and a debug assertion. Clears the sticky error.
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

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
