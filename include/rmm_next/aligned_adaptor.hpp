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

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

namespace detail {

/**
 * @brief Which upstream pointer each padded allocation of an `aligned_adaptor` came from, keyed
 * by the aligned pointer handed out; shared by the adaptor's copies. Sharded by address, one
 * mutex a shard, so threads freeing different blocks seldom wait for each other.
 */
class aligned_pointer_map {
 public:
  /** @brief Remembers that `aligned` was cut from `original`. @throws std::bad_alloc */
  void insert(void* aligned, void* original)
  {
    shard& s = shard_of(aligned);
    std::lock_guard const lock{s.mutex};
    s.originals.insert_or_assign(aligned, original);
  }

  /** @brief Forgets `aligned`; returns the pointer it was cut from, `aligned` when none was. */
  void* take(void* aligned) noexcept
  {
    shard& s = shard_of(aligned);
    std::lock_guard const lock{s.mutex};
    auto const it = s.originals.find(aligned);
    if (it == s.originals.end()) { return aligned; }
    void* const original = it->second;
    s.originals.erase(it);
    return original;
  }

 private:
  static constexpr std::size_t shard_bits = 4;

  struct alignas(64) shard {
    std::mutex mutex;
    std::unordered_map<void*, void*> originals;
  };

  shard& shard_of(void* aligned) noexcept
  {
    // Aligned pointers are multiples of 512 at least: drop those bits, then mix (Fibonacci hash).
    auto const key = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(aligned) >> 9);
    return shards_[static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> (64 - shard_bits))];
  }

  std::array<shard, std::size_t{1} << shard_bits> shards_;
};

}  // namespace detail

/**
 * @brief Hands out memory aligned to more than the 256 bytes of the upstream: `alignment` for
 * allocations of at least `threshold` bytes, and the alignment a request asks for when that is
 * above 256 bytes, whatever its size (so `allocate(stream, bytes, 4096)` works through it).
 *
 * What the upstream is asked for, with `A` the larger of the request's alignment and, when
 * `bytes >= threshold`, the adaptor's `alignment`:
 * - `A <= 256`: the request as it is (`bytes`, alignment `A`);
 * - `A > 256`: `bytes + A - 256` bytes with alignment 256 (`upstream_bytes()` says how many), and
 *   the adaptor returns the first multiple of `A` in that block. The pointer the upstream gave is
 *   remembered (when it differs from the one returned) and is what the upstream gets back.
 *
 * Allocation throws `bad_alloc` if the request's alignment is not a power of two,
 * `out_of_memory` if the padded size does not fit in a `std::size_t` (the upstream is not asked
 * then), and whatever the upstream throws; the adaptor keeps working after each.
 *
 * The upstream must align to 256 bytes when asked to (every rmm-next resource does). A free must
 * pass the size and alignment the allocation was made with: they decide which of the two cases
 * it was. 0 bytes returns nullptr without asking the upstream; freeing nullptr does nothing.
 *
 * `Upstream` is a resource (held by copy) or a resource ref (its resource must outlive the
 * adaptor). The adaptor offers the stream-ordered and synchronous members the upstream offers,
 * and the upstream's properties. Copies share the record of padded blocks and compare equal; a
 * block must be freed through the adaptor that allocated it or a copy. Thread-safe.
 */
template <class Upstream>
class aligned_adaptor : public cuda::forward_property<aligned_adaptor<Upstream>, Upstream>,
                        public detail::forwarding_members<aligned_adaptor<Upstream>, Upstream> {
 public:
  /** @brief The default `threshold`: allocations of 64 KiB and more get the adaptor's alignment. */
  static constexpr std::size_t default_threshold = std::size_t{64} << 10;

  /**
   * @brief Aligns to `alignment` the allocations of at least `threshold` bytes from `upstream`.
   * @param alignment Any power of two (4 KiB, 64 KiB, 2 MiB, ...); 256 or less changes nothing
   * for requests that ask for less.
   * @param threshold Requests smaller than this get only the alignment they ask for (0: all).
   * @throws std::invalid_argument if `alignment` is not a power of two.
   */
  template <detail::upstream_argument<aligned_adaptor, Upstream> Arg = Upstream>
  explicit aligned_adaptor(Arg&& upstream,
                           std::size_t alignment,
                           std::size_t threshold = default_threshold)
    : upstream_(std::forward<Arg>(upstream)),
      alignment_{checked_alignment(alignment)},
      threshold_{threshold},
      pointers_{std::make_shared<detail::aligned_pointer_map>()}
  {
  }

  /// `allocate(stream, bytes, alignment)`, `deallocate(stream, ptr, bytes, alignment)` when the
  /// upstream allocates in stream order, `allocate_sync` / `deallocate_sync` when it allocates
  /// synchronously (see the class for what they do and throw); CCCL 3.0's names before CCCL 3.1.
  using detail::forwarding_members<aligned_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<aligned_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief The alignment of allocations of at least `threshold()` bytes. */
  [[nodiscard]] std::size_t alignment() const noexcept { return alignment_; }

  /** @brief The smallest allocation that gets `alignment()`. */
  [[nodiscard]] std::size_t threshold() const noexcept { return threshold_; }

  /**
   * @brief The bytes the upstream is asked for when `bytes` are allocated with `alignment`
   * (0 for 0 bytes).
   * @throws out_of_memory if they do not fit in a `std::size_t`.
   */
  [[nodiscard]] std::size_t upstream_bytes(std::size_t bytes,
                                           std::size_t alignment = default_alignment) const
  {
    if (bytes == 0) { return 0; }
    std::size_t const a = alignment_for(bytes, alignment);
    return a <= default_alignment ? bytes : padded_bytes(bytes, a);
  }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share their record of padded blocks, i.e. one is a copy of the other. */
  friend bool operator==(aligned_adaptor const& lhs, aligned_adaptor const& rhs) noexcept
  {
    return lhs.pointers_ == rhs.pointers_;
  }

 private:
  friend detail::forwarding_members<aligned_adaptor, Upstream>;

  static constexpr char const* name = "aligned_adaptor";

  static std::size_t checked_alignment(std::size_t alignment)
  {
    return detail::checked_alignment_argument(name, alignment, "4096, 65536, 2097152, ...");
  }

  /** @brief The alignment a request of `bytes` with `alignment` gets. */
  [[nodiscard]] std::size_t alignment_for(std::size_t bytes, std::size_t alignment) const noexcept
  {
    return bytes >= threshold_ && alignment_ > alignment ? alignment_ : alignment;
  }

  /** @brief `bytes + alignment - 256`, for `alignment` above 256. @throws out_of_memory */
  static std::size_t padded_bytes(std::size_t bytes, std::size_t alignment)
  {
    std::size_t const padding = alignment - default_alignment;
    if (bytes > std::numeric_limits<std::size_t>::max() - padding) {
      detail::throw_error<out_of_memory>(
        name,
        "out_of_memory: " + std::to_string(bytes) + " bytes aligned to " +
          std::to_string(alignment) + " need " + std::to_string(padding) +
          " bytes of padding, more than a std::size_t can count; allocate fewer bytes");
    }
    return bytes + padding;
  }

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    detail::check_power_of_two_alignment(name, alignment);
    if (bytes == 0) { return nullptr; }
    std::size_t const a = alignment_for(bytes, alignment);
    if (a <= default_alignment) { return upstream.allocate(bytes, a); }

    std::size_t const n  = padded_bytes(bytes, a);
    void* const original = upstream.allocate(n, default_alignment);
    void* const aligned  = detail::align_pointer_up(original, a);
    if (aligned != original) {
      try {
        pointers_->insert(aligned, original);
      } catch (...) {
        upstream.deallocate(original, n, default_alignment);
        throw;
      }
    }
    return aligned;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    if (ptr == nullptr) { return; }
    std::size_t const a = alignment_for(bytes, alignment);
    if (a <= default_alignment) {
      upstream.deallocate(ptr, bytes, a);
      return;
    }
    // Forgotten before the upstream may hand the block out again (a new entry for the same
    // aligned pointer could otherwise be erased here). The allocation proved the sum fits.
    upstream.deallocate(pointers_->take(ptr), bytes + (a - default_alignment), default_alignment);
  }

  Upstream upstream_;
  std::size_t alignment_;
  std::size_t threshold_;
  std::shared_ptr<detail::aligned_pointer_map> pointers_;
};

/** @brief `aligned_adaptor{upstream, alignment}` holds a copy of `upstream`. */
template <class Upstream>
aligned_adaptor(Upstream, std::size_t) -> aligned_adaptor<Upstream>;

/** @brief `aligned_adaptor{upstream, alignment, threshold}` holds a copy of `upstream`. */
template <class Upstream>
aligned_adaptor(Upstream, std::size_t, std::size_t) -> aligned_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<aligned_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<aligned_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, aligned_adaptor<device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
