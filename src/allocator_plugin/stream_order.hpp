/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include "plugin_counters.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

/**
 * @file
 * @brief What keeps a free in order with the work that still uses the memory: streams a block was
 * recorded on (PyTorch's `record_stream`), allocations made during stream capture, and frees that
 * must wait for a capture to end.
 */

namespace rmm_next::plugin {

/** @brief Whether a stream is being captured into a graph, and the capture's id. */
struct capture_state {
  bool capturing{false};
  unsigned long long id{0};
};

inline capture_state capture_of(cudaStream_t stream) noexcept
{
  cudaStreamCaptureStatus status{cudaStreamCaptureStatusNone};
  unsigned long long id{0};
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  // An invalidated capture has not ended: its stream still refuses what a capture refuses.
  return {status != cudaStreamCaptureStatusNone, id};
}

/**
 * @brief Pointers tagged with a value, for the rare pointers that need one. Reads cost one
 * relaxed load while the set is empty, which is almost always.
 */
template <class Value>
class rare_pointer_map {
 public:
  void put(void* ptr, Value value)
  {
    std::lock_guard lock{mutex_};
    entries_.insert_or_assign(ptr, std::move(value));
    count_.store(entries_.size(), std::memory_order_relaxed);
  }

  /** @brief Calls `update(value&)` on the value of `ptr`, inserting `Value{}` first if absent. */
  template <class Update>
  void update(void* ptr, Update&& update)
  {
    std::lock_guard lock{mutex_};
    update(entries_[ptr]);
    count_.store(entries_.size(), std::memory_order_relaxed);
  }

  /** @brief `inspect(value)` for the value of `ptr`, or `R{}` when it has none. */
  template <class Inspect, class R = std::invoke_result_t<Inspect&, Value const&>>
  R inspect(void* ptr, Inspect&& inspect)
  {
    if (count_.load(std::memory_order_relaxed) == 0) { return R{}; }
    std::lock_guard lock{mutex_};
    auto const it = entries_.find(ptr);
    return it == entries_.end() ? R{} : inspect(std::as_const(it->second));
  }

  std::optional<Value> take(void* ptr)
  {
    if (count_.load(std::memory_order_relaxed) == 0) { return std::nullopt; }
    std::lock_guard lock{mutex_};
    auto it = entries_.find(ptr);
    if (it == entries_.end()) { return std::nullopt; }
    Value value = std::move(it->second);
    entries_.erase(it);
    count_.store(entries_.size(), std::memory_order_relaxed);
    return value;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, Value> entries_;
  std::atomic<std::size_t> count_{0};
};

/**
 * @brief A free held back: it reached a capturing stream but names memory the capture did not
 * allocate, or the memory was recorded on a stream that another capture holds.
 */
struct pending_free {
  void* ptr;
  std::size_t bytes;
  int device;
  cudaStream_t stream;
  source from;
  cudaStream_t captured_user{};  ///< a recorded stream whose capture the free waits for, or null
};

/**
 * @brief The first of `users` (streams recorded for a block) that a capture other than `own` (that
 * of the stream freeing the block) holds, or null. Such a stream cannot be waited on now: a wait
 * would cross that capture's boundary, and the driver's refusal invalidates the capture.
 */
inline cudaStream_t user_captured_elsewhere(std::vector<cudaStream_t> const& users,
                                            cudaStream_t free_stream,
                                            capture_state own) noexcept
{
  for (cudaStream_t const user : users) {
    if (user == free_stream) { continue; }
    capture_state const c = capture_of(user);
    if (c.capturing && !(own.capturing && c.id == own.id)) { return user; }
  }
  return nullptr;
}

/** @brief Frees held back until the captures they wait for have ended. */
class deferred_frees {
 public:
  void push(pending_free const& f)
  {
    std::lock_guard lock{mutex_};
    pending_.push_back(f);
    count_.store(pending_.size(), std::memory_order_relaxed);
  }

  [[nodiscard]] std::size_t count() const noexcept
  {
    return count_.load(std::memory_order_relaxed);
  }

  /** @brief Removes and returns the frees whose streams (and captured users) no longer capture. */
  std::vector<pending_free> take_ready() noexcept
  {
    std::vector<pending_free> ready;
    if (count() == 0) { return ready; }
    std::lock_guard lock{mutex_};
    try {
      auto const still = std::stable_partition(pending_.begin(), pending_.end(), [](auto const& f) {
        return capture_of(f.stream).capturing ||
               (f.captured_user != nullptr && capture_of(f.captured_user).capturing);
      });
      ready.assign(still, pending_.end());
      pending_.erase(still, pending_.end());
    } catch (...) {  // std::bad_alloc: try again on the next call
    }
    count_.store(pending_.size(), std::memory_order_relaxed);
    return ready;
  }

 private:
  std::mutex mutex_;
  std::vector<pending_free> pending_;
  std::atomic<std::size_t> count_{0};
};

/**
 * @brief Makes `free_stream` wait for the work queued so far on each of `users`, as PyTorch's
 * `cudaMallocAsync` backend does for recorded streams. During a capture (`own`) only streams that
 * take part in the same capture can be waited on; the others are skipped, and so is a stream that
 * another capture holds (outside a capture `user_captured_elsewhere` keeps such frees from coming
 * here). If an event cannot be used (a stream of another device), the user stream is synchronized
 * instead.
 */
inline void wait_for_users(cudaStream_t free_stream,
                           std::vector<cudaStream_t> const& users,
                           capture_state own) noexcept
{
  bool const capturing = own.capturing;
  for (cudaStream_t const user : users) {
    if (user == free_stream) { continue; }
    capture_state const c = capture_of(user);
    if (c.capturing != capturing || (capturing && c.id != own.id)) { continue; }
    cudaEvent_t event{};
    bool waited = cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess &&
                  cudaEventRecord(event, user) == cudaSuccess &&
                  cudaStreamWaitEvent(free_stream, event, 0) == cudaSuccess;
    if (event != nullptr) { (void)cudaEventDestroy(event); }
    if (!waited) {
      (void)cudaGetLastError();
      if (!capturing) { (void)cudaStreamSynchronize(user); }
      (void)cudaGetLastError();
    }
  }
}

}  // namespace rmm_next::plugin
