/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief The reader side of a Left-Right scheme (Ramalhete and Correia): readers announce
 * themselves around a read, and a writer that has just published a new copy waits until no
 * reader can still be reading the old one, after which it may overwrite it.
 *
 * The announcements are counters striped over cache lines (a thread keeps to one stripe), so that
 * readers on different cores do not bounce one line between them; there is no per-thread
 * registration. There are two sets of them, selected by a version index, as in Left-Right: a
 * writer waits for the set no new reader enters, so readers that keep coming cannot starve it.
 *
 * Readers never block. Writers must be serialized by the caller.
 */
class reader_indicators {
 public:
  /** @brief The counter a reader arrived on, to depart from. */
  using token = std::atomic<std::int64_t>*;

  reader_indicators() noexcept                           = default;
  reader_indicators(reader_indicators const&)            = delete;
  reader_indicators& operator=(reader_indicators const&) = delete;

  /** @brief Announces a reader; pair with `depart`. Everything read after it is protected. */
  [[nodiscard]] token arrive() noexcept
  {
    unsigned const version = version_.load(std::memory_order_seq_cst);
    token const counter    = &counters_[version][stripe()].value;
    counter->fetch_add(1, std::memory_order_seq_cst);
    return counter;
  }

  /** @brief Ends the read that `arrive` began. */
  static void depart(token counter) noexcept { counter->fetch_sub(1, std::memory_order_release); }

  /**
   * @brief Returns once every reader that arrived before the call has departed. Called after
   * publishing a new copy (with a `seq_cst` store), it guarantees that no reader still reads the
   * copy it replaced. Writers only, serialized.
   */
  void wait_for_readers() noexcept
  {
    unsigned const version = version_.load(std::memory_order_relaxed);
    wait_until_empty(version ^ 1U);  // readers left over from before the previous toggle
    version_.store(version ^ 1U, std::memory_order_seq_cst);  // new readers arrive there
    wait_until_empty(version);
  }

 private:
  static constexpr std::size_t stripes = 32;

  struct alignas(64) counter {
    std::atomic<std::int64_t> value{0};
  };

  /** @brief This thread's stripe, handed out round-robin on its first read. */
  static std::size_t stripe() noexcept
  {
    static std::atomic<std::size_t> next{0};
    thread_local std::size_t const mine = next.fetch_add(1, std::memory_order_relaxed) % stripes;
    return mine;
  }

  void wait_until_empty(unsigned version) const noexcept
  {
    for (counter const& c : counters_[version]) {
      while (c.value.load(std::memory_order_seq_cst) != 0) {
        std::this_thread::yield();
      }
    }
  }

  std::atomic<unsigned> version_{0};
  std::array<std::array<counter, stripes>, 2> counters_{};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
