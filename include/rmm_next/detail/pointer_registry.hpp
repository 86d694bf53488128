/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/address_table.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/short_mutex.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <mutex>  // std::lock_guard
#include <optional>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `pointer_registry`: the live allocations of an allocator, each with a record of what it
 * needs at the free (its size at least), sharded by address so that threads that allocate and free
 * at once rarely share a lock. What a free is checked against: a pointer absent from it was not
 * handed out, or was freed already.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief A record a `pointer_registry` keeps: it says the allocation's size in `bytes`. */
template <class Record>
concept sized_record = requires(Record const& r) {
  { r.bytes } -> std::convertible_to<std::size_t>;
};

/**
 * @brief Live pointers and their records, in 64 shards by address, each with its own lock, its own
 * sum of `Record::bytes` and its own `address_table` (records inline, no allocation per pointer:
 * the table grows by doubling and never shrinks). Every operation on one pointer takes one shard's
 * lock; the sums, counts and walks over every record take the 64 locks one after the other.
 * Pointers are not null.
 */
template <sized_record Record>
  requires std::is_nothrow_move_constructible_v<Record> &&
           std::is_nothrow_move_assignable_v<Record> && std::is_default_constructible_v<Record>
class pointer_registry {
 public:
  pointer_registry()                                   = default;
  pointer_registry(pointer_registry const&)            = delete;
  pointer_registry& operator=(pointer_registry const&) = delete;

  /**
   * @brief Adds `ptr` with `record`.
   * @return The record `ptr` had, when it was live already (handed out again without a free seen
   * here): the new record replaces it.
   * @throws std::bad_alloc when the shard cannot grow (nothing changes then).
   */
  std::optional<Record> insert(void* ptr, Record record)
  {
    shard& s = shard_of(ptr);
    std::lock_guard const lock{s.mutex};
    if (std::size_t const slot = s.live.find(address(ptr)); slot != table::npos) {
      Record& held = s.live.at(slot).record;
      std::optional<Record> replaced{std::move(held)};
      held = std::move(record);
      s.bytes += held.bytes - replaced->bytes;
      return replaced;
    }
    s.live.reserve(s.live.size() + 1);
    s.bytes += record.bytes;
    s.live.insert(entry{ptr, std::move(record)});
    return std::nullopt;
  }

  /** @brief Removes `ptr` and returns its record; nullopt when `ptr` is not live here. */
  std::optional<Record> take(void* ptr)
  {
    return take_if(ptr, [](Record const&) { return true; });
  }

  /**
   * @brief Removes `ptr` and returns its record when `accept(record)` is true (under the shard's
   * lock, so no other call sees the pointer in between); nullopt, and `ptr` left as it is, when
   * `ptr` is not live here or `accept` refused it.
   */
  template <class Accept>
  std::optional<Record> take_if(void* ptr, Accept&& accept)
  {
    shard& s = shard_of(ptr);
    std::lock_guard const lock{s.mutex};
    std::size_t const slot = s.live.find(address(ptr));
    if (slot == table::npos ||
        !std::forward<Accept>(accept)(std::as_const(s.live.at(slot).record))) {
      return std::nullopt;
    }
    std::optional<Record> record{std::move(s.live.at(slot).record)};
    s.bytes -= record->bytes;
    s.live.erase(slot);
    return record;
  }

  /** @brief Removes `ptr`; false when it was not live here. */
  bool erase(void* ptr) noexcept
  {
    shard& s = shard_of(ptr);
    std::lock_guard const lock{s.mutex};
    std::size_t const slot = s.live.find(address(ptr));
    if (slot == table::npos) { return false; }
    s.bytes -= s.live.at(slot).record.bytes;
    s.live.erase(slot);
    return true;
  }

  /**
   * @brief Calls `change(record)` on the record of `ptr` under its shard's lock; `change` must not
   * alter `bytes`, nor call into the registry.
   * @return False when `ptr` is not live here (`change` is not called).
   */
  template <class Change>
  bool update(void* ptr, Change&& change)
  {
    shard& s = shard_of(ptr);
    std::lock_guard const lock{s.mutex};
    std::size_t const slot = s.live.find(address(ptr));
    if (slot == table::npos) { return false; }
    std::forward<Change>(change)(s.live.at(slot).record);
    return true;
  }

  /**
   * @brief Calls `visit(ptr, record)` for every live pointer, one shard at a time under its lock;
   * `visit` must not alter `bytes`, nor call into the registry.
   */
  template <class Visit>
  void for_each(Visit&& visit)
  {
    for (shard& s : shards_) {
      std::lock_guard const lock{s.mutex};
      s.live.for_each([&](entry& e) { visit(e.ptr, e.record); });
    }
  }

  /** @brief As the other `for_each`, with the records read only. */
  template <class Visit>
  void for_each(Visit&& visit) const
  {
    for (shard const& s : shards_) {
      std::lock_guard const lock{s.mutex};
      s.live.for_each([&](entry const& e) { visit(e.ptr, e.record); });
    }
  }

  /** @brief How many pointers are live. */
  [[nodiscard]] std::size_t size() const noexcept
  {
    return sum([](shard const& s) { return s.live.size(); });
  }

  /** @brief The sum of the live records' `bytes`. */
  [[nodiscard]] std::size_t bytes() const noexcept
  {
    return sum([](shard const& s) { return s.bytes; });
  }

 private:
  struct entry {
    void* ptr{};
    Record record{};
  };
  struct entry_address {
    static std::uintptr_t key(entry const& e) noexcept { return address(e.ptr); }
  };
  using table = address_table<entry, entry_address>;

  struct alignas(64) shard {
    mutable short_mutex mutex;
    table live;
    std::size_t bytes = 0;
  };

  static std::uintptr_t address(void const* ptr) noexcept
  {
    return reinterpret_cast<std::uintptr_t>(ptr);  // NOLINT
  }

  static constexpr std::size_t shard_count = 64;

  shard& shard_of(void const* ptr) noexcept
  {
    // Allocations are at least 256-byte aligned and often far apart: mix the bits above.
    auto const bits = reinterpret_cast<std::uintptr_t>(ptr);  // NOLINT
    return shards_[((bits >> 8) ^ (bits >> 16) ^ (bits >> 24)) % shard_count];
  }

  template <class Of>
  std::size_t sum(Of of) const noexcept
  {
    std::size_t total = 0;
    for (shard const& s : shards_) {
      std::lock_guard const lock{s.mutex};
      total += of(s);
    }
    return total;
  }

  std::array<shard, shard_count> shards_{};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
