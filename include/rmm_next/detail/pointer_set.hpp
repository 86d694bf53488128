/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

/**
 * @file
 * @brief `pointer_set`: a set of pointers whose membership test takes no lock, for a hot path that
 * must ask "is this one of the few special pointers?" while other threads add and remove some.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief A set of pointers: `contains` reads without a lock (a few loads of an open-addressing
 * table), `insert` and `erase` take a mutex.
 *
 * A pointer is looked up only by a thread that the pointer's insertion happens before (the thread
 * that was handed it), so a lookup never races with the insertion or removal of the pointer it
 * asks about; it may race with those of others, which it then sees or not. Tables outgrown are
 * kept until the set is destroyed (their sizes add up to less than twice the largest), so a
 * lookup that loaded one may finish on it.
 */
class pointer_set {
 public:
  pointer_set() : tables_{}, current_{nullptr} {}
  pointer_set(pointer_set const&)            = delete;
  pointer_set& operator=(pointer_set const&) = delete;
  ~pointer_set()                             = default;

  /** @brief True when no pointer is in the set (one relaxed load). */
  [[nodiscard]] bool empty() const noexcept { return size_.load(std::memory_order_relaxed) == 0; }

  /** @brief True when `p` is in the set; takes no lock. */
  [[nodiscard]] bool contains(void const* p) const noexcept
  {
    table const* t = current_.load(std::memory_order_acquire);
    return t != nullptr && t->find(key_of(p)) != npos;
  }

  /**
   * @brief Adds `p` (not null).
   * @throws std::bad_alloc if the table cannot grow.
   */
  void insert(void const* p)
  {
    std::lock_guard lock{mutex_};
    table* t = current_.load(std::memory_order_relaxed);
    if (t == nullptr || (t->used + 1) * 2 > t->slots.size()) { t = grow(); }
    std::uintptr_t const key = key_of(p);
    std::size_t reuse        = npos;  // the first removed slot on the way: filled again
    std::size_t i            = t->home(key);
    for (;; i = (i + 1) & t->mask) {
      std::uintptr_t const v = t->slots[i].load(std::memory_order_relaxed);
      if (v == key) { return; }
      if (v == removed_slot && reuse == npos) { reuse = i; }
      if (v == empty_slot) { break; }
    }
    if (reuse == npos) {
      reuse = i;
      ++t->used;
    }
    t->slots[reuse].store(key, std::memory_order_release);
    ++t->live;
    size_.store(t->live, std::memory_order_relaxed);
  }

  /** @brief Removes `p` if it is in the set; true if it was. */
  bool erase(void const* p) noexcept
  {
    if (!contains(p)) { return false; }
    std::lock_guard lock{mutex_};
    table* t               = current_.load(std::memory_order_relaxed);
    std::size_t const slot = t->find(key_of(p));
    if (slot == npos) { return false; }
    t->slots[slot].store(removed_slot, std::memory_order_release);
    --t->live;
    size_.store(t->live, std::memory_order_relaxed);
    return true;
  }

 private:
  static constexpr std::uintptr_t empty_slot   = 0;
  static constexpr std::uintptr_t removed_slot = 1;
  static constexpr std::size_t npos            = ~std::size_t{0};

  struct table {
    explicit table(std::size_t capacity) : slots(capacity), mask{capacity - 1} {}
    std::vector<std::atomic<std::uintptr_t>> slots;
    std::size_t mask;
    std::size_t used{0};  ///< slots not empty: live and removed; guarded by the set's mutex
    std::size_t live{0};  ///< guarded by the set's mutex

    [[nodiscard]] std::size_t home(std::uintptr_t key) const noexcept
    {
      return static_cast<std::size_t>((key >> 4) * 0x9E3779B97F4A7C15ULL >> 20) & mask;
    }
    [[nodiscard]] std::size_t find(std::uintptr_t key) const noexcept
    {
      for (std::size_t i = home(key), n = 0; n <= mask; i = (i + 1) & mask, ++n) {
        std::uintptr_t const v = slots[i].load(std::memory_order_acquire);
        if (v == key) { return i; }
        if (v == empty_slot) { return npos; }
      }
      return npos;
    }
  };

  /** @brief Pointers at addresses 0 and 1 cannot be stored; every allocation is above them. */
  static std::uintptr_t key_of(void const* p) noexcept
  {
    return reinterpret_cast<std::uintptr_t>(p);
  }

  /** @brief A table twice the live count (at least 64 slots), refilled, made current. */
  table* grow()
  {
    table const* old           = current_.load(std::memory_order_relaxed);
    std::size_t const live     = old == nullptr ? 0 : old->live;
    std::size_t const wanted   = std::bit_ceil(std::max<std::size_t>(64, (live + 1) * 4));
    std::size_t const capacity = old == nullptr ? wanted : std::max(wanted, old->slots.size());
    tables_.reserve(tables_.size() + 1);
    auto fresh = std::make_unique<table>(capacity);
    if (old != nullptr) {
      for (auto const& slot : old->slots) {
        std::uintptr_t const v = slot.load(std::memory_order_relaxed);
        if (v == empty_slot || v == removed_slot) { continue; }
        std::size_t i = fresh->home(v);
        while (fresh->slots[i].load(std::memory_order_relaxed) != empty_slot) {
          i = (i + 1) & fresh->mask;
        }
        fresh->slots[i].store(v, std::memory_order_relaxed);
        ++fresh->used;
        ++fresh->live;
      }
    }
    table* const t = fresh.get();
    tables_.push_back(std::move(fresh));
    current_.store(t, std::memory_order_release);
    return t;
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<table>> tables_;  ///< guarded by mutex_; the last is current
  std::atomic<table*> current_;
  std::atomic<std::size_t> size_{0};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
