/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/graph_frees.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The bookkeeping behind `segment_cache_adaptor`, independent of the upstream's type:
 * segments split into blocks and coalesced again, free blocks per stream lane in best-fit order,
 * the fences that let a block or a whole segment leave its lane, and the idle segments that may
 * go back upstream. Not thread-safe: the adaptor holds its mutex around every call.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief Every block is a multiple of this; so is every split. */
inline constexpr std::size_t segment_cache_granule = 512;
/** @brief Requests up to this size are small: they share segments of `small_segment_bytes`. */
inline constexpr std::size_t small_request_limit = std::size_t{1} << 20;
inline constexpr std::size_t small_segment_bytes = std::size_t{2} << 20;
/** @brief Larger requests up to this size share segments of `medium_segment_bytes`. */
inline constexpr std::size_t medium_request_limit = std::size_t{10} << 20;
inline constexpr std::size_t medium_segment_bytes = std::size_t{20} << 20;
/** @brief Larger ones get a segment of their own, rounded up to a multiple of this. */
inline constexpr std::size_t large_segment_granule = std::size_t{2} << 20;
/** @brief A large free block is split only when the rest is larger than this (as PyTorch does). */
inline constexpr std::size_t large_split_remainder = small_request_limit;

/** @brief An event that orders a block's reuse after a free on another lane; destroyed last. */
struct cross_lane_fence {
  CUevent event{};
  fence_event_pool* pool{};  ///< where the event goes back (null: destroyed)
  cross_lane_fence(CUevent e, fence_event_pool* p) noexcept : event{e}, pool{p} {}
  cross_lane_fence(cross_lane_fence const&)            = delete;
  cross_lane_fence& operator=(cross_lane_fence const&) = delete;
  ~cross_lane_fence()
  {
    if (pool != nullptr) {
      pool->give(event);
    } else {
      destroy_fence_event(event);
    }
  }
};

struct cache_segment;
struct cache_block;

/** @brief A free block's entry in its lane's free set: the key sits in the node itself. */
struct free_entry {
  std::size_t size{};
  std::uintptr_t address{};
  cache_block* block{};
};

/** @brief Best fit first: the smallest block, then the lowest address. */
struct by_size {
  bool operator()(free_entry const& a, free_entry const& b) const noexcept
  {
    return a.size != b.size ? a.size < b.size : a.address < b.address;
  }
};

/** @brief A lane's free blocks of one kind (small or large), best fit first. */
using free_set = std::set<free_entry, by_size>;

/** @brief A piece of a segment, live or free; neighbours in address order. */
struct cache_block {
  std::uintptr_t address{};
  std::size_t size{};
  cache_segment* segment{};
  cache_block* prev{};
  cache_block* next{};
  bool free{false};
  free_set::iterator where{};  ///< its place in its lane's free set, while it is listed there
  /** @brief Frees on other lanes this free block's reuse must wait for. */
  std::vector<std::shared_ptr<cross_lane_fence>> waits;
};

/** @brief One allocation from the upstream, split into blocks. */
struct cache_segment {
  std::uintptr_t address{};
  std::size_t size{};
  bool small{};
  std::uint64_t lane{};       ///< the lane whose free lists hold its free blocks
  std::uint64_t last_free{};  ///< that lane's free serial at the latest free into it
  std::size_t live{};         ///< live blocks; 0: idle
  cache_block* first{};
  bool idle{false};
  std::list<cache_segment*>::iterator idle_position{};  ///< in the idle list, when `idle`
};

/**
 * @brief The free blocks of one stream lane (see `stream_lane`), and its fence: an event recorded
 * on the stream during one of its calls, after the frees numbered up to `fenced`. Blocks freed on
 * the lane may be reused on it at once (stream order); they leave it only behind its fence.
 */
struct cache_lane {
  free_set small_free;
  free_set large_free;
  CUevent fence{};
  std::uint64_t frees{};   ///< frees on the lane so far (its free serial)
  std::uint64_t fenced{};  ///< the frees `fence` comes after
  std::size_t since_fence{};

  cache_lane()                             = default;
  cache_lane(cache_lane const&)            = delete;
  cache_lane& operator=(cache_lane const&) = delete;
  cache_lane(cache_lane&&)                 = delete;  // built in place in the lane map
  cache_lane& operator=(cache_lane&&)      = delete;
  ~cache_lane() { destroy_fence_event(fence); }

  [[nodiscard]] free_set& free_of(bool small) noexcept { return small ? small_free : large_free; }
};

/** @brief How many bytes a request of `bytes` takes (0: none fits), and its segment's size. */
struct segment_cache_sizes {
  std::size_t block{};
  std::size_t segment{};
  bool small{};
};

/** @brief The block and segment sizes of a request; `block` 0 when `bytes` cannot be rounded. */
constexpr segment_cache_sizes segment_cache_sizes_of(std::size_t bytes) noexcept
{
  segment_cache_sizes s{};
  if (!round_up(bytes, segment_cache_granule, s.block)) { return {}; }
  if (s.block <= small_request_limit) { return {s.block, small_segment_bytes, true}; }
  if (s.block <= medium_request_limit) { return {s.block, medium_segment_bytes, false}; }
  if (!round_up(s.block, large_segment_granule, s.segment)) { return {}; }
  return s;
}

/** @brief The part of the fence interval a lane has earned: 1 at first, `interval` at most. */
constexpr std::size_t lane_fence_interval(std::uint64_t frees, std::size_t interval) noexcept
{
  std::uint64_t const earned = 1 + frees / 256;
  return earned < interval ? static_cast<std::size_t>(earned) : interval;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
