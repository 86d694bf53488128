/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <atomic>
#include <cstdint>

/**
 * @file
 * @brief `peak_counter`: a level that rises and falls (bytes or allocations live now) and its high
 * watermark, lock-free.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief A level and the highest value it reached since construction or the last `reset_peak`.
 * A peak cannot be summed from per-thread counts, so threads share this one; give it a cache line
 * of its own where many threads count.
 */
class peak_counter {
 public:
  /** @brief Raises the level by `n` and the peak with it. */
  void add(std::int64_t n) noexcept
  {
    raise_peak(current_.fetch_add(n, std::memory_order_relaxed) + n);
  }

  /** @brief Lowers the level by `n`. */
  void sub(std::int64_t n) noexcept { current_.fetch_sub(n, std::memory_order_relaxed); }

  /** @brief The peak starts again from the level now. */
  void reset_peak() noexcept
  {
    peak_.store(current_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    raise_peak(current_.load(std::memory_order_relaxed));  // an `add` that raced with the store
  }

  [[nodiscard]] std::int64_t current() const noexcept
  {
    return current_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] std::int64_t peak() const noexcept { return peak_.load(std::memory_order_relaxed); }

  /** @brief Raises the peak to at least `value` (a level folded into this one). */
  void raise_peak(std::int64_t value) noexcept
  {
    std::int64_t seen = peak_.load(std::memory_order_relaxed);
    while (value > seen && !peak_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {}
  }

 private:
  std::atomic<std::int64_t> current_{0};
  std::atomic<std::int64_t> peak_{0};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
