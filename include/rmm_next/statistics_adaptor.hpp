/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/peak_counter.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/resource_ref.hpp>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief One statistic of a `statistics_adaptor`: its value now, its peak and its running total.
 */
struct allocation_counter {
  std::int64_t current;  ///< value now (bytes or allocations not yet freed; RMM's `value`)
  std::int64_t peak;     ///< highest `current` since construction, the push or `reset_peak()`
  std::int64_t total;    ///< sum of everything allocated since construction or the push
};

/** @brief What a `statistics_adaptor` has counted. */
struct allocation_statistics {
  allocation_counter bytes;        ///< bytes asked for
  allocation_counter allocations;  ///< number of allocations
};

namespace detail {

/**
 * @brief The counters shared by the copies of one `statistics_adaptor`: lock-free running values
 * for every allocation and free, and under a mutex the stack of `push_counters()` levels, each
 * kept as the running values where it starts.
 *
 * A level's current and total are the running ones less those at its push; its peak is the
 * running peak since its push (or the last pop or `reset_peak()`) less the current value at its
 * push. Popping a level folds it into the one below as RMM does: the one below has the higher of
 * its own peak and the popped peak on top of its value at the push.
 */
class allocation_counters {
 public:
  void record_allocation(std::size_t bytes) noexcept
  {
    raise(bytes_, static_cast<std::int64_t>(bytes));
    raise(allocations_, 1);
  }

  void record_deallocation(std::size_t bytes) noexcept
  {
    bytes_.level.sub(static_cast<std::int64_t>(bytes));
    allocations_.level.sub(1);
  }

  [[nodiscard]] allocation_statistics snapshot() const noexcept
  {
    std::lock_guard const lock{levels_mutex_};
    return top();
  }

  void reset_peak() noexcept
  {
    std::lock_guard const lock{levels_mutex_};
    bytes_.level.reset_peak();
    allocations_.level.reset_peak();
  }

  /** @brief Starts a level at zero; returns the counters of the level below, as they were. */
  allocation_statistics push()
  {
    std::lock_guard const lock{levels_mutex_};
    allocation_statistics const below = top();
    levels_.push_back({start_of(bytes_), start_of(allocations_)});
    bytes_.level.reset_peak();
    allocations_.level.reset_peak();
    return below;
  }

  /** @brief Ends the top level (folded into the one below); returns its counters, as they were.
   * @throws std::out_of_range when no level was pushed. */
  allocation_statistics pop()
  {
    std::lock_guard const lock{levels_mutex_};
    if (levels_.empty()) {
      throw_error<std::out_of_range>("statistics_adaptor",
                                     "pop_counters() found no level to pop; call "
                                     "push_counters() first (the adaptor's own counters stay)");
    }
    allocation_statistics const popped = top();
    level const ended                  = levels_.back();
    levels_.pop_back();
    bytes_.level.raise_peak(ended.bytes.peak);
    allocations_.level.raise_peak(ended.allocations.peak);
    return popped;
  }

 private:
  struct counter {
    peak_counter level;
    std::atomic<std::int64_t> total{0};
  };

  /** @brief The running values where a level starts; `peak`: the running peak of the level below
   * at that moment. */
  struct start {
    std::int64_t current;
    std::int64_t total;
    std::int64_t peak;
  };

  struct level {
    start bytes;
    start allocations;
  };

  static void raise(counter& c, std::int64_t n) noexcept
  {
    c.total.fetch_add(n, std::memory_order_relaxed);
    c.level.add(n);
  }

  static start start_of(counter const& c) noexcept
  {
    return {c.level.current(), c.total.load(std::memory_order_relaxed), c.level.peak()};
  }

  static allocation_counter read(counter const& c, start const& from) noexcept
  {
    return {c.level.current() - from.current,
            c.level.peak() - from.current,
            c.total.load(std::memory_order_relaxed) - from.total};
  }

  /** @brief The counters of the top level; `levels_mutex_` held. */
  [[nodiscard]] allocation_statistics top() const noexcept
  {
    static constexpr level base{};
    level const& from = levels_.empty() ? base : levels_.back();
    return {read(bytes_, from.bytes), read(allocations_, from.allocations)};
  }

  counter bytes_;
  counter allocations_;
  mutable std::mutex levels_mutex_;
  std::vector<level> levels_;  ///< pushed levels, innermost last; empty: the adaptor's own
};

/** @brief Keys the NVTX range names of every `statistics_adaptor`. */
struct statistics_adaptor_nvtx;

}  // namespace detail

/**
 * @brief Counts the bytes and allocations that pass through it to `Upstream`: now, at the peak,
 * and in total.
 *
 * `Upstream` is a resource (held by copy: rmm-next's resources are cheap handles) or a resource
 * ref such as `device_async_resource_ref` (the resource it refers to must outlive the adaptor).
 * The adaptor offers what the upstream offers: stream-ordered `allocate(stream, bytes,
 * alignment)` / `deallocate(stream, ptr, bytes, alignment)` when the upstream allocates in stream
 * order, `allocate_sync` / `deallocate_sync` when it allocates synchronously, the CCCL 3.0 names
 * of both, and every property of the upstream (`device_accessible`, `host_accessible`, ...,
 * through `cuda::forward_property`), so it binds to the same ref types.
 *
 * A stream-ordered allocation counts from the moment `allocate` returns and stops counting when
 * `deallocate` is called: the caller's view, not the device's. As in RMM, every allocation that
 * returns counts, 0 bytes (nullptr) included, as one allocation of 0 bytes, and every
 * `deallocate` counts as one free, nullptr included; failed allocations count nothing. Frees
 * must name the size that was allocated.
 *
 * `push_counters()` starts a level of counters at zero, for measuring one phase of a program, and
 * `pop_counters()` ends it, adding it to the level below, as RMM's nested counters do;
 * `statistics()` and `reset_peak()` are about the top level.
 *
 * Copies share the counters and their levels (and compare equal); an adaptor constructed
 * separately counts on its own, so each library can wrap the resource it uses and see only its own
 * allocations. Thread-safe; allocation and free are lock-free (the levels are changed and read
 * under a mutex). Each value is exact, but a snapshot taken while other threads allocate reads the
 * values one after another, and a call in flight while a level is pushed or popped may land its
 * bytes and its count on different sides of it.
 */
template <class Upstream>
class RMM_NEXT_NVTX_ABI statistics_adaptor
  : public cuda::forward_property<statistics_adaptor<Upstream>, Upstream>,
    public detail::forwarding_members<statistics_adaptor<Upstream>, Upstream> {
 public:
  /** @brief Counts what goes to `upstream`, from zero. */
  template <detail::upstream_argument<statistics_adaptor, Upstream> Arg = Upstream>
  explicit statistics_adaptor(Arg&& upstream)
    : upstream_(std::forward<Arg>(upstream)),
      counters_{std::make_shared<detail::allocation_counters>()}
  {
  }

  /// `allocate(stream, bytes, alignment)` / `deallocate(stream, ptr, bytes, alignment)` when the
  /// upstream allocates in stream order, `allocate_sync` / `deallocate_sync` when it allocates
  /// synchronously; CCCL 3.0's names before CCCL 3.1. An allocation counts once the upstream
  /// returns it and stops counting when it is freed; whatever the upstream throws passes through,
  /// with nothing counted.
  using detail::forwarding_members<statistics_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<statistics_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief The counters now: bytes and allocations, each current, peak and total. */
  [[nodiscard]] allocation_statistics statistics() const noexcept { return counters_->snapshot(); }

  /** @brief Sets the peaks of bytes and allocations (of the top level) to their current values. */
  void reset_peak() noexcept { counters_->reset_peak(); }

  /**
   * @brief Starts a level of counters at zero (current, peak and total), which `statistics()`
   * reports until `pop_counters()`: RMM's nested statistics, for one phase of a program. Frees of
   * memory allocated before the push make the level's current values negative.
   * @return The counters of the level below, as they were just before the push.
   */
  allocation_statistics push_counters() { return counters_->push(); }

  /**
   * @brief Ends the level `push_counters()` started and adds it to the level below: current and
   * total are added, and the peak below becomes the higher of its own and its value at the push
   * plus the popped peak.
   * @return The counters of the popped level, as they were just before the pop.
   * @throws std::out_of_range when no level was pushed (nothing changes).
   */
  allocation_statistics pop_counters() { return counters_->pop(); }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share counters, i.e. one is a copy of the other. */
  friend bool operator==(statistics_adaptor const& lhs, statistics_adaptor const& rhs) noexcept
  {
    return lhs.counters_ == rhs.counters_;
  }

 private:
  friend detail::forwarding_members<statistics_adaptor, Upstream>;

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    detail::nvtx_range const range{nvtx_range_names().allocate};
    void* ptr = upstream.allocate(bytes, alignment);
    counters_->record_allocation(bytes);
    return ptr;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    detail::nvtx_range const range{nvtx_range_names().deallocate};
    counters_->record_deallocation(bytes);
    upstream.deallocate(ptr, bytes, alignment);
  }

  static decltype(auto) nvtx_range_names() noexcept
  {
    return detail::nvtx_names<detail::statistics_adaptor_nvtx>("statistics_adaptor");
  }

  Upstream upstream_;
  std::shared_ptr<detail::allocation_counters> counters_;
};

/** @brief `statistics_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
statistics_adaptor(Upstream) -> statistics_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<statistics_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<statistics_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(std::is_constructible_v<device_async_resource_ref,
                                      statistics_adaptor<device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
