/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/reader_indicators.hpp>

#include <atomic>
#include <cstdint>
#include <optional>

/**
 * @file
 * @brief The writer side of Left-Right (`left_right_value`): a value readers copy without a lock,
 * which a writer replaces by filling a spare copy, switching readers to it, and waiting until no
 * reader still copies the old one (see `reader_indicators`).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief A value of `T`, or none, published Left-Right: two copies, of which readers copy the
 * active one while announced on a `reader_indicators`.
 *
 * Readers never block. Writers (`current`, `publish`) must be serialized by the caller, and share
 * the `reader_indicators` with the readers; several values may share one.
 */
template <class T>
class left_right_value {
 public:
  /** @brief A copy of the value, made under an announcement on `readers`; empty while none. */
  [[nodiscard]] std::optional<T> read(reader_indicators& readers) const
  {
    std::optional<T> copy;
    auto const token = readers.arrive();
    if (int const active = active_.load(std::memory_order_seq_cst); active >= 0) {
      copy.emplace(*copies_[active]);
    }
    reader_indicators::depart(token);
    return copy;
  }

  /** @brief The value, or null while none. Writers only. */
  [[nodiscard]] T const* current() const noexcept
  {
    int const active = active_.load(std::memory_order_relaxed);
    return active >= 0 ? &*copies_[active] : nullptr;
  }

  /**
   * @brief Makes `*value` the value (null: none): fills the spare copy, switches readers to it,
   * counts the publication in `version`, and waits until no reader copies the old one, which
   * becomes the spare. Writers only.
   */
  void publish(T const* value, std::atomic<std::uint64_t>& version, reader_indicators& readers)
  {
    int next = -1;
    if (value != nullptr) {
      next = active_.load(std::memory_order_relaxed) == 0 ? 1 : 0;
      copies_[next].emplace(*value);
    }
    active_.store(next, std::memory_order_seq_cst);
    version.fetch_add(1, std::memory_order_release);
    readers.wait_for_readers();
  }

 private:
  std::atomic<int> active_{-1};  ///< the copy readers read; -1: none yet
  std::optional<T> copies_[2];   ///< the current value and a spare
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
