/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include "live_allocations.hpp"

#include <rmm_next/detail/stream.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <utility>
#include <vector>

/**
 * @file
 * @brief What keeps a free in order with the work that still uses the memory: streams a block was
 * recorded on (PyTorch's `record_stream`), allocations made during stream capture, and frees that
 * must wait for a capture to end. Every question about a stream and every fence goes through the
 * stream vocabulary (detail/stream.hpp).
 */

namespace rmm_next::plugin {

using detail::capture_info;
using detail::capture_status;

/**
 * @brief A free held back: it reached a capturing stream (or one whose capture state the driver
 * could not tell) but names memory the capture did not allocate, or the memory was recorded on a
 * stream that another capture holds.
 */
struct pending_free {
  void* ptr{};
  cudaStream_t stream{};  ///< the free's
  allocation_record record;
  cudaStream_t captured_user{};  ///< a recorded stream whose capture the free waits for, or null
};

/**
 * @brief The first of `users` (streams recorded for a block) that a capture other than `own` (that
 * of the stream freeing the block) holds, or whose state the driver cannot tell; null if none.
 * Such a stream cannot be waited on now: a wait would cross that capture's boundary, and the
 * driver's refusal invalidates the capture.
 */
inline cudaStream_t user_captured_elsewhere(std::vector<cudaStream_t> const& users,
                                            cudaStream_t free_stream,
                                            capture_info const& own) noexcept
{
  for (cudaStream_t const user : users) {
    if (user == free_stream) { continue; }
    capture_info const c = detail::capture_of(user);
    if (c.capturing() && !(own.status == capture_status::active && c.id == own.id)) { return user; }
  }
  return nullptr;
}

/** @brief Frees held back until the captures they wait for have ended. */
class deferred_frees {
 public:
  void push(pending_free f)
  {
    std::lock_guard lock{mutex_};
    pending_.push_back(std::move(f));
    count_.store(pending_.size(), std::memory_order_relaxed);
  }

  [[nodiscard]] std::size_t count() const noexcept
  {
    return count_.load(std::memory_order_relaxed);
  }

  /** @brief Removes and returns the frees whose streams (and captured users) are known eager. */
  std::vector<pending_free> take_ready() noexcept
  {
    std::vector<pending_free> ready;
    if (count() == 0) { return ready; }
    std::lock_guard lock{mutex_};
    try {
      auto const still = std::stable_partition(pending_.begin(), pending_.end(), [](auto const& f) {
        return detail::capture_of(f.stream).capturing() ||
               (f.captured_user != nullptr && detail::capture_of(f.captured_user).capturing());
      });
      ready.assign(std::make_move_iterator(still), std::make_move_iterator(pending_.end()));
      pending_.erase(still, pending_.end());
    } catch (...) {  // std::bad_alloc: try again on the next call
    }
    count_.store(pending_.size(), std::memory_order_relaxed);
    return ready;
  }

  /** @brief The held-back frees on `from` (a stream being destroyed) run on `to` instead. */
  void restream(cudaStream_t from, cudaStream_t to) noexcept
  {
    if (count() == 0) { return; }
    std::lock_guard lock{mutex_};
    for (pending_free& f : pending_) {
      if (f.stream == from) { f.stream = to; }
    }
  }

 private:
  std::mutex mutex_;
  std::vector<pending_free> pending_;
  std::atomic<std::size_t> count_{0};
};

/**
 * @brief Orders the work queued on `waiter` from now on after the work queued so far on `user`: a
 * fence of `user`'s context recorded on `user`, which `waiter` waits for. Within one capture (both
 * streams take part in it) the record and the wait are nodes of its graph. False if the driver
 * refused a step.
 */
inline bool order_after(cudaStream_t waiter, cudaStream_t user) noexcept
{
  CUcontext const context = detail::ordering_context(user);
  CUevent const fence     = detail::make_fence_event(context);
  bool recorded           = false;
  {
    detail::context_scope const scope{context};
    recorded = scope.ok() && detail::record_fence(fence, user);
  }
  bool const waited = recorded && detail::wait_for_fence(reinterpret_cast<CUstream>(waiter), fence);
  detail::destroy_fence_event(fence);  // the wait, once queued, holds what it needs
  return waited;
}

/**
 * @brief Makes `free_stream` wait for the work queued so far on each of `users`, as PyTorch's
 * `cudaMallocAsync` backend does for recorded streams. During a capture (`own`) only streams that
 * take part in the same capture can be waited on; the others are skipped, and so is a stream that
 * another capture holds (outside a capture `user_captured_elsewhere` keeps such frees from coming
 * here). If a fence cannot be used, an eager user stream is synchronized instead (relaxed mode).
 */
inline void wait_for_users(cudaStream_t free_stream,
                           std::vector<cudaStream_t> const& users,
                           capture_info const& own) noexcept
{
  bool const capturing = own.capturing();
  for (cudaStream_t const user : users) {
    if (user == free_stream) { continue; }
    capture_info const c = detail::capture_of(user);
    bool const same_side =
      capturing ? c.status == capture_status::active && c.id == own.id : !c.capturing();
    if (!same_side) { continue; }
    if (!order_after(free_stream, user) && !capturing) { (void)detail::synchronize_stream(user); }
  }
}

}  // namespace rmm_next::plugin
