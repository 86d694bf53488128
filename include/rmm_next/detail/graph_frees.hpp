/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cuda.h>  // CUDA_CB

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

/**
 * @file
 * @brief Frees made inside a graph capture: the graph's host node reports the block's last use
 * done (see `call_in_graph` in stream.hpp), and the resource takes the block back later.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief Blocks freed inside a graph capture whose graph has run past the free: a host node of
 * the graph puts them here (no CUDA call, one lock), and the resource (`vmm_resource`,
 * `segment_cache_adaptor`) takes them back into its free list on its next call. A resource that
 * asks for them also hears of the frees whose graphs went without ever running past them
 * (`graph_free::report_unrun`). Shared by the resource and every graph that holds such a free, so
 * either may go first.
 */
class graph_frees {
 public:
  /** @brief Called from a host node: `address`'s last use in the graph is done. */
  void push(std::uintptr_t address) noexcept { push_to(done_, count_, address); }

  /** @brief Called when a graph went without running past `address`'s free. */
  void push_unrun(std::uintptr_t address) noexcept { push_to(unrun_, unrun_count_, address); }

  /** @brief The blocks pushed since the last call (one relaxed load when none was). */
  std::vector<std::uintptr_t> take() noexcept { return take_from(done_, count_); }

  /** @brief The blocks `push_unrun` reported since the last call. */
  std::vector<std::uintptr_t> take_unrun() noexcept { return take_from(unrun_, unrun_count_); }

 private:
  void push_to(std::vector<std::uintptr_t>& list,
               std::atomic<std::size_t>& count,
               std::uintptr_t address) noexcept
  {
    std::lock_guard const lock{mutex_};
    try {
      list.push_back(address);
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory: the block stays out
      return;
    }
    count.store(list.size(), std::memory_order_release);
  }

  std::vector<std::uintptr_t> take_from(std::vector<std::uintptr_t>& list,
                                        std::atomic<std::size_t>& count) noexcept
  {
    std::vector<std::uintptr_t> taken;
    if (count.load(std::memory_order_acquire) == 0) { return taken; }
    std::lock_guard const lock{mutex_};
    taken.swap(list);
    count.store(0, std::memory_order_relaxed);
    return taken;
  }

  std::mutex mutex_;
  std::vector<std::uintptr_t> done_;
  std::vector<std::uintptr_t> unrun_;
  std::atomic<std::size_t> count_{0};
  std::atomic<std::size_t> unrun_count_{0};
};

/** @brief One free inside a capture: the data of its host node, owned by the graph. */
struct graph_free {
  std::shared_ptr<graph_frees> into;
  std::uintptr_t address{};
  bool report_unrun{false};  ///< tell `into` when the graph goes without having run the free
  std::atomic<bool> ran{false};

  /** @brief The host node: the first run of the graph frees the block; later runs do nothing. */
  static void CUDA_CB run(void* data) noexcept
  {
    auto* const f = static_cast<graph_free*>(data);
    if (!f->ran.exchange(true, std::memory_order_acq_rel)) { f->into->push(f->address); }
  }
  /** @brief The user object's destructor: the graph and its instantiations are gone. */
  static void CUDA_CB destroy(void* data) noexcept
  {
    auto* const f = static_cast<graph_free*>(data);
    if (f->report_unrun && !f->ran.load(std::memory_order_acquire)) {
      f->into->push_unrun(f->address);
    }
    delete f;
  }
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
