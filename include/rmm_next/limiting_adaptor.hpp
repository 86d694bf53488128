/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

namespace detail {

/** @brief The bytes in use under a limit, shared by the copies of one `limiting_adaptor`. */
class byte_limit {
 public:
  explicit byte_limit(std::size_t limit) noexcept : limit_{limit} {}

  /**
   * @brief Adds `bytes` to the bytes in use if the sum stays within the limit (lock-free).
   * @return true if reserved; false, with the values that refused it in `in_use` and `limit`.
   */
  bool try_reserve(std::size_t bytes, std::size_t& in_use, std::size_t& limit) noexcept
  {
    in_use = in_use_.load(std::memory_order_relaxed);
    do {
      limit = limit_.load(std::memory_order_relaxed);
      if (bytes > limit || in_use > limit - bytes) { return false; }
    } while (!in_use_.compare_exchange_weak(in_use, in_use + bytes, std::memory_order_relaxed));
    return true;
  }

  void release(std::size_t bytes) noexcept { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

  [[nodiscard]] std::size_t in_use() const noexcept
  {
    return in_use_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] std::size_t limit() const noexcept
  {
    return limit_.load(std::memory_order_relaxed);
  }

  std::size_t set_limit(std::size_t limit) noexcept
  {
    return limit_.exchange(limit, std::memory_order_relaxed);
  }

 private:
  static_assert(std::atomic<std::size_t>::is_always_lock_free);

  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> limit_;
};

}  // namespace detail

/**
 * @brief Caps the bytes in use through it: an allocation that would take them past `limit()`
 * throws `out_of_memory` without reaching the upstream, and everything keeps working.
 *
 * Each allocation counts as its size rounded up to a multiple of the adaptor's `alignment()` (the
 * constructor's argument, as RMM's: 256 bytes, the granularity of rmm-next's resources, unless
 * given), or of its own alignment when that is above 256 and larger: 1000 bytes count 1024, 256
 * bytes with alignment 4096 count 4096, and with `alignment()` 1 every allocation of at most 256
 * alignment counts its size. It counts from the moment it is reserved, just before the upstream
 * is called, until `deallocate` is called (the caller's view, also for stream-ordered frees); a
 * failed allocation counts nothing afterwards, and 0 bytes count nothing. The limit bounds what
 * the callers hold, not what the upstream reserves: padding or caching below the adaptor
 * (`aligned_adaptor`, `thread_cache_adaptor`) is not counted unless the adaptor sits below them.
 *
 * Allocation throws `out_of_memory` past the limit (its message names the limit, the bytes in use
 * and the request, and the upstream is not asked), `bad_alloc` if the alignment is not a power of
 * two, and whatever the upstream throws (the reservation is given back then).
 *
 * `Upstream` is a resource (held by copy) or a resource ref (its resource must outlive the
 * adaptor). The adaptor offers the stream-ordered and synchronous members the upstream offers,
 * and the upstream's properties. Copies share the count and the limit, and compare equal; each
 * adaptor constructed separately has its own, so each library can cap its own use of a shared
 * resource. Thread-safe and lock-free: threads racing to the limit never take the count past it.
 */
template <class Upstream>
class limiting_adaptor : public cuda::forward_property<limiting_adaptor<Upstream>, Upstream>,
                         public detail::forwarding_members<limiting_adaptor<Upstream>, Upstream> {
 public:
  /**
   * @brief Lets at most `limit_bytes` be in use through the adaptor, each allocation counted as
   * its size rounded up to a multiple of `alignment` (or of its own alignment, above 256).
   * @param alignment Any power of two: 256 (the default) counts what rmm-next's resources occupy,
   * 1 counts the sizes asked for, as RMM's `limiting_resource_adaptor(upstream, limit, 1)` does.
   * @throws std::invalid_argument if `alignment` is not a power of two.
   */
  template <detail::upstream_argument<limiting_adaptor, Upstream> Arg = Upstream>
  explicit limiting_adaptor(Arg&& upstream,
                            std::size_t limit_bytes,
                            std::size_t alignment = default_alignment)
    : upstream_(std::forward<Arg>(upstream)),
      alignment_{
        detail::checked_alignment_argument(name, alignment, "256 (the default), 1, 4096, ...")},
      state_{std::make_shared<detail::byte_limit>(limit_bytes)}
  {
  }

  /// `allocate(stream, bytes, alignment)`, `deallocate(stream, ptr, bytes, alignment)` when the
  /// upstream allocates in stream order, `allocate_sync` / `deallocate_sync` when it allocates
  /// synchronously (see the class for what they do and throw); CCCL 3.0's names before CCCL 3.1.
  using detail::forwarding_members<limiting_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<limiting_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief The bytes in use now, each allocation rounded as the class describes. */
  [[nodiscard]] std::size_t bytes_in_use() const noexcept { return state_->in_use(); }

  /** @brief The most bytes that may be in use. */
  [[nodiscard]] std::size_t limit() const noexcept { return state_->limit(); }

  /** @brief The granularity each allocation is counted in (the constructor's `alignment`). */
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }

  /**
   * @brief Changes the limit, also while allocations are live; a limit below the bytes in use
   * refuses new allocations until enough are freed. Copies see the new limit.
   * @return The previous limit.
   */
  std::size_t set_limit(std::size_t new_limit) noexcept { return state_->set_limit(new_limit); }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share the count and the limit, i.e. one is a copy of the other. */
  friend bool operator==(limiting_adaptor const& lhs, limiting_adaptor const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

 private:
  friend detail::forwarding_members<limiting_adaptor, Upstream>;

  static constexpr char const* name = "limiting_adaptor";

  /** @brief What `bytes` with `alignment` (a power of two) count; saturates at SIZE_MAX. */
  [[nodiscard]] std::size_t counted_bytes(std::size_t bytes, std::size_t alignment) const noexcept
  {
    std::size_t const unit =
      alignment > default_alignment ? std::max(alignment, alignment_) : alignment_;
    std::size_t counted = std::numeric_limits<std::size_t>::max();
    (void)detail::round_up(bytes, unit, counted);
    return counted;
  }

  [[noreturn]] static void throw_over_limit(std::size_t bytes,
                                            std::size_t counted,
                                            std::size_t in_use,
                                            std::size_t limit)
  {
    std::string const rounding =
      counted == bytes ? std::string{} : " (" + std::to_string(counted) + " counted)";
    detail::throw_error<out_of_memory>(
      name,
      "out_of_memory: allocating " + std::to_string(bytes) + " bytes" + rounding +
        " would pass the limit of " + std::to_string(limit) + " bytes, with " +
        std::to_string(in_use) + " bytes in use; free memory or raise the limit (set_limit)");
  }

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    detail::check_power_of_two_alignment(name, alignment);
    if (bytes == 0) { return upstream.allocate(bytes, alignment); }
    std::size_t const counted = counted_bytes(bytes, alignment);
    std::size_t in_use{};
    std::size_t limit{};
    if (!state_->try_reserve(counted, in_use, limit)) {
      throw_over_limit(bytes, counted, in_use, limit);
    }
    void* ptr{};
    try {
      ptr = upstream.allocate(bytes, alignment);
    } catch (...) {
      state_->release(counted);
      throw;
    }
    if (ptr == nullptr) { state_->release(counted); }
    return ptr;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    upstream.deallocate(ptr, bytes, alignment);
    if (ptr != nullptr && bytes != 0) { state_->release(counted_bytes(bytes, alignment)); }
  }

  Upstream upstream_;
  std::size_t alignment_;
  std::shared_ptr<detail::byte_limit> state_;
};

/** @brief `limiting_adaptor{upstream, limit_bytes}` holds a copy of `upstream`. */
template <class Upstream>
limiting_adaptor(Upstream, std::size_t) -> limiting_adaptor<Upstream>;

/** @brief `limiting_adaptor{upstream, limit_bytes, alignment}` holds a copy of `upstream`. */
template <class Upstream>
limiting_adaptor(Upstream, std::size_t, std::size_t) -> limiting_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<limiting_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<limiting_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, limiting_adaptor<device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
