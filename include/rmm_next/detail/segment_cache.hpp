/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/address_table.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/graph_frees.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The bookkeeping behind `segment_cache_adaptor`, independent of the upstream's type:
 * segments split into blocks and coalesced again, free blocks per stream lane in size bins for
 * best-fit lookups, the live blocks by address,
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
inline constexpr std::size_t medium_segment_bytes = std::size_t{16} << 20;
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

/** @brief Free blocks below this size each have a bin of their own size (512 B apart). */
inline constexpr std::size_t exact_free_bins = small_request_limit / segment_cache_granule;
/** @brief Above it, sixteen bins split each power of two. */
inline constexpr unsigned free_bins_per_octave = 16;

/**
 * @brief The bin of a free block of `size` bytes (a multiple of the granule): its own size below
 * 1 MiB, one sixteenth of a power of two above. A higher bin holds only larger blocks.
 */
constexpr std::size_t free_bin_of(std::size_t size) noexcept
{
  std::size_t const granules = size / segment_cache_granule;
  if (granules < exact_free_bins) { return granules; }
  constexpr auto first_octave =
    static_cast<unsigned>(std::bit_width(exact_free_bins)) - 1;  // 1 MiB
  unsigned const octave  = static_cast<unsigned>(std::bit_width(granules)) - 1;
  std::size_t const step = (granules >> (octave - 4)) & (free_bins_per_octave - 1);
  return exact_free_bins + (octave - first_octave) * free_bins_per_octave + step;
}

/** @brief A piece of a segment, live or free; neighbours in address order. */
struct cache_block {
  std::uintptr_t address{};
  std::size_t size{};
  cache_segment* segment{};
  cache_block* prev{};
  cache_block* next{};
  bool free{false};
  std::uint32_t bin{};      ///< its bin in its lane's free bins, while it is listed there
  cache_block* bin_prev{};  ///< its neighbours in that bin
  cache_block* bin_next{};
  /** @brief Frees on other lanes this free block's reuse must wait for. */
  std::vector<std::shared_ptr<cross_lane_fence>> waits;
};

/**
 * @brief A lane's free blocks of one kind (small or large), for best-fit lookups without a search
 * tree: a list per bin (`free_bin_of`) and a two-level bitmap of the bins that hold a block.
 * Listing and unlisting are a few pointer writes and never allocate. `best_fit` returns the
 * smallest block that fits; among blocks of one size, in a bin of one size the one listed last,
 * in a bin of a size range the lowest address. The bins covered are `[first, last]`: the small
 * blocks' (one granule up to a 2 MiB segment) or the large ones' (above 1 MiB). A size past the
 * last is looked up in the last bin, a range searched by size; none is below the first.
 */
class free_bins {
 public:
  /** @throws std::bad_alloc */
  free_bins(std::size_t first, std::size_t last)
    : first_{first},
      count_{last - first + 1},
      heads_{std::make_unique<cache_block*[]>(count_)},
      words_{std::make_unique<std::uint64_t[]>((count_ + 63) / 64)}
  {
  }

  /** @brief Lists free `b` (listed nowhere). */
  void insert(cache_block& b) noexcept
  {
    std::size_t const i = index_of(b.size);
    b.bin               = static_cast<std::uint32_t>(i);
    b.bin_prev          = nullptr;
    b.bin_next          = heads_[i];
    if (b.bin_next != nullptr) { b.bin_next->bin_prev = &b; }
    heads_[i] = &b;
    words_[i / 64] |= std::uint64_t{1} << (i % 64);
    summary_ |= std::uint64_t{1} << (i / 64);
  }

  /** @brief Unlists `b` (listed here). */
  void erase(cache_block& b) noexcept
  {
    std::size_t const i = b.bin;
    if (b.bin_prev != nullptr) {
      b.bin_prev->bin_next = b.bin_next;
    } else {
      heads_[i] = b.bin_next;
    }
    if (b.bin_next != nullptr) { b.bin_next->bin_prev = b.bin_prev; }
    b.bin_prev = nullptr;
    b.bin_next = nullptr;
    if (heads_[i] != nullptr) { return; }
    words_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
    if (words_[i / 64] == 0) { summary_ &= ~(std::uint64_t{1} << (i / 64)); }
  }

  /** @brief Lists `b` (listed here) in the bin of its size now, if that is another one. */
  void resized(cache_block& b) noexcept
  {
    if (index_of(b.size) == b.bin) { return; }
    erase(b);
    insert(b);
  }

  /** @brief The smallest listed block of `size` bytes or more (see the class), or nullptr. */
  [[nodiscard]] cache_block* best_fit(std::size_t size) const noexcept
  {
    std::size_t const i = index_of(size);
    if (heads_[i] != nullptr) {
      if (one_size(i)) { return heads_[i]; }
      if (cache_block* b = smallest_in(i, size)) { return b; }
    }
    std::size_t const j = next_listed(i + 1);
    if (j == count_) { return nullptr; }
    return one_size(j) ? heads_[j] : smallest_in(j, 0);
  }

 private:
  [[nodiscard]] std::size_t index_of(std::size_t size) const noexcept
  {
    std::size_t const bin = free_bin_of(size);
    return bin < first_ ? 0 : std::min(bin - first_, count_ - 1);
  }

  /** @brief True when every block bin `i` holds has one size. */
  [[nodiscard]] bool one_size(std::size_t i) const noexcept { return first_ + i < exact_free_bins; }

  /** @brief The smallest block of bin `i` of `size` bytes or more, the lowest address first. */
  [[nodiscard]] cache_block* smallest_in(std::size_t i, std::size_t size) const noexcept
  {
    cache_block* best = nullptr;
    for (cache_block* b = heads_[i]; b != nullptr; b = b->bin_next) {
      if (b->size >= size && (best == nullptr || b->size < best->size ||
                              (b->size == best->size && b->address < best->address))) {
        best = b;
      }
    }
    return best;
  }

  /** @brief The first bin from `i` on that holds a block; `count_` when none does. */
  [[nodiscard]] std::size_t next_listed(std::size_t i) const noexcept
  {
    if (i >= count_) { return count_; }
    std::size_t word = i / 64;
    if (std::uint64_t const bits = words_[word] & (~std::uint64_t{0} << (i % 64)); bits != 0) {
      return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
    }
    std::uint64_t const later = word + 1 < 64 ? summary_ & (~std::uint64_t{0} << (word + 1)) : 0;
    if (later == 0) { return count_; }
    word = static_cast<std::size_t>(std::countr_zero(later));
    return word * 64 + static_cast<std::size_t>(std::countr_zero(words_[word]));
  }

  std::size_t first_;
  std::size_t count_;
  std::unique_ptr<cache_block*[]> heads_;
  std::unique_ptr<std::uint64_t[]> words_;
  std::uint64_t summary_{};  ///< bit w: word w of `words_` is not 0
};

/** @brief The bins of small blocks: every size up to a small segment's. */
inline free_bins small_free_bins() { return free_bins{1, free_bin_of(small_segment_bytes)}; }

/** @brief The bins of large blocks: above 1 MiB, which the small bins do not hold. */
inline free_bins large_free_bins()
{
  return free_bins{exact_free_bins, free_bin_of(~(segment_cache_granule - 1))};
}

/** @brief A live block and its address, kept beside it so that a probe reads no block. */
struct live_entry {
  std::uintptr_t address{};  ///< 0: an empty slot
  cache_block* block{};
};

/** @brief How `live_block_table` keys its entries. */
struct live_entry_address {
  static std::uintptr_t key(live_entry const& e) noexcept { return e.address; }
};

/**
 * @brief The live blocks by address, so that a free finds its block in a load or two. `reserve`
 * may allocate; `insert` after it, `find` and `erase` never do.
 */
using live_block_table = address_table<live_entry, live_entry_address>;

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
  cache_segment* idle_prev{};  ///< its neighbours in the idle list, when `idle`
  cache_segment* idle_next{};
};

/**
 * @brief The idle segments, oldest first: a list through the segments themselves, so that a
 * segment becomes idle and busy again without a host allocation.
 */
class idle_segments {
 public:
  /** @brief Appends `s` (not listed) as the newest. */
  void push_back(cache_segment& s) noexcept
  {
    s.idle      = true;
    s.idle_prev = newest_;
    s.idle_next = nullptr;
    if (newest_ != nullptr) {
      newest_->idle_next = &s;
    } else {
      oldest_ = &s;
    }
    newest_ = &s;
  }

  /** @brief Unlists `s` (listed). */
  void erase(cache_segment& s) noexcept
  {
    (s.idle_prev != nullptr ? s.idle_prev->idle_next : oldest_) = s.idle_next;
    (s.idle_next != nullptr ? s.idle_next->idle_prev : newest_) = s.idle_prev;
    s.idle                                                      = false;
    s.idle_prev                                                 = nullptr;
    s.idle_next                                                 = nullptr;
  }

  /** @brief The oldest idle segment, or nullptr; `->idle_next` is the next one. */
  [[nodiscard]] cache_segment* oldest() const noexcept { return oldest_; }

 private:
  cache_segment* oldest_{};
  cache_segment* newest_{};
};

/**
 * @brief The free blocks of one stream lane (see `stream_lane`), and its fence: an event recorded
 * on the stream during one of its calls, after the frees numbered up to `fenced`. Blocks freed on
 * the lane may be reused on it at once (stream order); they leave it only behind its fence.
 */
struct cache_lane {
  free_bins small_free{small_free_bins()};
  free_bins large_free{large_free_bins()};
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

  [[nodiscard]] free_bins& free_of(bool small) noexcept { return small ? small_free : large_free; }
};

/**
 * @brief A cache with lanes of per-thread default streams, told when a thread that used one
 * exits: the stream ends with its thread, so only then, on that thread, can the lane's last frees
 * be fenced. Without that fence its idle segments could never be proven free again.
 */
class per_thread_lane_keeper {
 public:
  /** @brief The exiting calling thread used `lane`, its per-thread default stream of `context`. */
  virtual void thread_exiting(std::uint64_t lane, CUcontext context) noexcept = 0;

 protected:
  ~per_thread_lane_keeper() = default;  // never destroyed through this base
};

/**
 * @brief The per-thread lanes the calling thread gave segments to, by cache; each cache still alive
 * hears of them when the thread exits (this object's thread-local destructor).
 */
class exiting_thread_lanes {
 public:
  exiting_thread_lanes()                            = default;  // one per thread, never copied
  exiting_thread_lanes(exiting_thread_lanes const&) = delete;
  exiting_thread_lanes& operator=(exiting_thread_lanes const&) = delete;
  ~exiting_thread_lanes()
  {
    gone() = true;  // a cache used later in this thread's exit notes nothing more
    for (entry const& e : entries_) {
      if (auto const keeper = e.keeper.lock()) { keeper->thread_exiting(e.lane, e.context); }
    }
  }

  /** @brief Set once the calling thread's lanes have been handed over (it is exiting). */
  static bool& gone() noexcept
  {
    thread_local bool exited = false;  // trivially destroyed: readable to the thread's very end
    return exited;
  }

  /**
   * @brief Notes that `keeper` has segments of `lane`, this thread's per-thread default stream of
   * `context`; once per cache and lane.
   * @throws std::bad_alloc
   */
  void note(std::weak_ptr<per_thread_lane_keeper> keeper, std::uint64_t lane, CUcontext context)
  {
    for (entry const& e : entries_) {
      bool const same_cache = !e.keeper.owner_before(keeper) && !keeper.owner_before(e.keeper);
      if (same_cache && e.lane == lane) { return; }
    }
    std::erase_if(entries_, [](entry const& e) { return e.keeper.expired(); });
    entries_.push_back({std::move(keeper), lane, context});
  }

 private:
  struct entry {
    std::weak_ptr<per_thread_lane_keeper> keeper;
    std::uint64_t lane;
    CUcontext context;
  };
  std::vector<entry> entries_;
};

/** @brief The calling thread's `exiting_thread_lanes`; null once the thread has begun to exit. */
inline exiting_thread_lanes* this_threads_lanes()
{
  if (exiting_thread_lanes::gone()) { return nullptr; }
  thread_local exiting_thread_lanes lanes;
  return &lanes;
}

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
