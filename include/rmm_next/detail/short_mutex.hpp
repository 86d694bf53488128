/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#endif

/**
 * @file
 * @brief `short_mutex`: the lock of a state whose calls are short and mostly uncontended (the
 * segment cache). Taken with one atomic exchange and released with a plain store, both inlined,
 * where `std::mutex` makes two read-modify-writes inside two calls into the C library. A thread
 * that finds it taken spins briefly, then sleeps on it (a futex on Linux) in slices that double
 * from `short_mutex::first_slice_ns` up to `short_mutex::last_slice_ns`, so a holder that waits on
 * the driver (a segment cache's miss) costs the waiting threads next to no CPU.
 *
 * The releasing store is not ordered before its check for sleepers (that would take a full fence,
 * the cost saved), so in a narrow race a sleeper misses its wake-up: it then wakes at the end of
 * its slice. A lost wake-up delays by at most a slice, and never deadlocks.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief A Lockable mutex for short critical sections (see the file). */
class short_mutex {
 public:
  /** @brief A waiting thread's first sleep, before it looks at the lock again. */
  static constexpr long first_slice_ns = 16'000;
  /** @brief Its longest sleep: what a lost wake-up can cost. */
  static constexpr long last_slice_ns = 1'000'000;

  short_mutex()                              = default;
  short_mutex(short_mutex const&)            = delete;
  short_mutex& operator=(short_mutex const&) = delete;

  [[gnu::always_inline]] void lock() noexcept
  {
    if (state_.exchange(1, std::memory_order_acquire) == 0) [[likely]] { return; }
    lock_contended();
  }

  /** @brief Takes it if it is free now, without waiting. */
  [[nodiscard]] bool try_lock() noexcept
  {
    return state_.load(std::memory_order_relaxed) == 0 &&
           state_.exchange(1, std::memory_order_acquire) == 0;
  }

  [[gnu::always_inline]] void unlock() noexcept
  {
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) [[unlikely]] { wake_one(); }
  }

 private:
  [[gnu::noinline]] void lock_contended() noexcept
  {
    for (int spins = 0; spins < 256; ++spins) {
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.exchange(1, std::memory_order_acquire) == 0) {
        return;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    long slice = first_slice_ns;
    while (state_.exchange(1, std::memory_order_acquire) != 0) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      sleep_while_taken(slice);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      slice = std::min(slice * 2, last_slice_ns);
    }
  }

  /** @brief Sleeps up to `ns`, or until woken, or at once when the lock is free now. */
  void sleep_while_taken(long ns) noexcept
  {
#if defined(__linux__)
    timespec const slice{0, ns};
    (void)syscall(SYS_futex, &state_, FUTEX_WAIT_PRIVATE, 1, &slice, nullptr, 0);
#else
    std::this_thread::sleep_for(std::chrono::nanoseconds{ns});
#endif
  }

  [[gnu::noinline]] void wake_one() noexcept
  {
#if defined(__linux__)
    (void)syscall(SYS_futex, &state_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
#endif
  }

  std::atomic<std::uint32_t> state_{0};  ///< 1 while taken
  std::atomic<std::uint32_t> sleepers_{0};
  static_assert(sizeof(std::atomic<std::uint32_t>) == 4);  // what the futex reads
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
