/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `address_table`: entries keyed by a device address, in one array with linear probing: a
 * lookup reads one or two cache lines and an insert allocates nothing (the array grows by
 * doubling, at `reserve`). The segment cache's live blocks and `pointer_registry`'s shards.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief How an `address_table` reads its entries: `key(entry)` is the entry's address, 0 for an
 * empty slot (a value-initialized `Entry` is one).
 */
template <class Keys, class Entry>
concept address_keys = requires(Entry const& e) {
  { Keys::key(e) } -> std::same_as<std::uintptr_t>;
};

/**
 * @brief Entries with distinct nonzero addresses, at most a quarter of the slots full: runs of
 * full slots stay short, so that a lookup and an erase's backward shift read few slots (16 bytes
 * a slot for the live blocks: 64 KiB for 1,024 of them). Not thread-safe. Entries move when the
 * table grows and when an erase closes its gap (backward shift, no tombstones): a slot number is
 * valid until the next `reserve` or `erase`.
 */
template <class Entry, address_keys<Entry> Keys>
  requires std::is_nothrow_move_constructible_v<Entry> && std::is_nothrow_move_assignable_v<Entry>
class address_table {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /** @brief Room for `n` entries without growing. @throws std::bad_alloc (nothing changes) */
  void reserve(std::size_t n)
  {
    if (n * 4 <= capacity_) { return; }
    std::size_t capacity = capacity_ == 0 ? 16 : capacity_;
    while (n * 4 > capacity) {
      capacity *= 2;
    }
    auto grown = std::make_unique<Entry[]>(capacity);
    std::swap(grown, slots_);
    std::size_t const old_capacity = capacity_;
    capacity_                      = capacity;
    shift_                         = 64 - static_cast<unsigned>(std::countr_zero(capacity));
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (Keys::key(grown[i]) != 0) { place(std::move(grown[i])); }
    }
  }

  /** @brief Adds `e`, whose address is not listed yet; needs the room `reserve` made. */
  void insert(Entry e) noexcept
  {
    place(std::move(e));
    ++size_;
  }

  /** @brief The slot of the entry at `address`, or `npos`. */
  [[nodiscard]] std::size_t find(std::uintptr_t address) const noexcept
  {
    if (capacity_ == 0 || address == 0) { return npos; }
    for (std::size_t i = home(address);; i = (i + 1) & (capacity_ - 1)) {
      std::uintptr_t const k = Keys::key(slots_[i]);
      if (k == 0) { return npos; }
      if (k == address) { return i; }
    }
  }

  [[nodiscard]] Entry& at(std::size_t slot) noexcept { return slots_[slot]; }
  [[nodiscard]] Entry const& at(std::size_t slot) const noexcept { return slots_[slot]; }

  /** @brief Removes the entry in `slot`, moving later ones of its run back into the gap. */
  void erase(std::size_t slot) noexcept
  {
    std::size_t const mask = capacity_ - 1;
    std::size_t gap        = slot;
    for (std::size_t i = (gap + 1) & mask; Keys::key(slots_[i]) != 0; i = (i + 1) & mask) {
      // The entry at i moves into the gap unless its home lies after the gap (cyclically).
      std::size_t const h = home(Keys::key(slots_[i]));
      if (((i - h) & mask) >= ((i - gap) & mask)) {
        slots_[gap] = std::move(slots_[i]);
        gap         = i;
      }
    }
    slots_[gap] = Entry{};
    --size_;
  }

  /** @brief Calls `visit(entry)` for every entry, in slot order. */
  template <class Visit>
  void for_each(Visit&& visit)
  {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (Keys::key(slots_[i]) != 0) { visit(slots_[i]); }
    }
  }

  /** @brief As the other `for_each`, with the entries read only. */
  template <class Visit>
  void for_each(Visit&& visit) const
  {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (Keys::key(slots_[i]) != 0) { visit(std::as_const(slots_[i])); }
    }
  }

 private:
  [[nodiscard]] std::size_t home(std::uintptr_t address) const noexcept
  {
    // Allocations are at least 256-byte aligned: Fibonacci hashing of the bits above.
    return static_cast<std::size_t>(((address >> 8) * std::uint64_t{0x9E3779B97F4A7C15}) >> shift_);
  }

  void place(Entry&& e) noexcept
  {
    std::size_t i = home(Keys::key(e));
    while (Keys::key(slots_[i]) != 0) {
      i = (i + 1) & (capacity_ - 1);
    }
    slots_[i] = std::move(e);
  }

  std::unique_ptr<Entry[]> slots_;
  std::size_t capacity_{};
  std::size_t size_{};
  unsigned shift_{64};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
