/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/graph_frees.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/segment_cache.hpp>
#include <rmm_next/detail/short_mutex.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief Limits of a `segment_cache_adaptor`. */
struct segment_cache_options {
  /**
   * @brief Bytes of idle segments (no live block in them) the cache keeps at least. A free that
   * takes the idle bytes past the bound (this, or `max_idle_fraction` of the peak live bytes when
   * that is more) gives the oldest idle segments back upstream until they fit again. 0, with a
   * `max_idle_fraction` of 0, gives every segment back as soon as it is idle.
   */
  std::size_t max_idle_bytes = std::size_t{16} << 20;
  /**
   * @brief The idle bytes kept may also reach this fraction of the largest live bytes since the
   * last `trim()`, as long as the live bytes are at least that far below that peak: a workload
   * whose steps rise to a peak and fall back finds the segments of its next peak still cached
   * instead of asking the upstream for them again, and at the peak itself the cache keeps no more
   * than `max_idle_bytes` idle. 0: `max_idle_bytes` alone.
   */
  double max_idle_fraction = 0.25;
  /**
   * @brief The most frees on one stream between two of its fences (events, about 0.3 us each,
   * recorded on the stream during a free), behind which its idle segments may go back upstream
   * from any call. A new stream fences every free, and one more free in every 256 after that, up
   * to this limit.
   */
  std::size_t fence_interval = 64;
};

/** @brief What a `segment_cache_adaptor` holds and has done. */
struct segment_cache_statistics {
  std::uint64_t hits;           ///< allocations served from a cached block
  std::uint64_t misses;         ///< allocations that took a new segment from the upstream
  std::uint64_t bypasses;       ///< allocations the cache never serves: captured streams, bad input
  std::uint64_t segments;       ///< segments held now
  std::uint64_t segment_bytes;  ///< their bytes: what the cache holds of the upstream
  std::uint64_t live_bytes;     ///< bytes of live blocks (each request rounded to 512 bytes)
  std::uint64_t idle_bytes;     ///< bytes of segments with no live block
  std::uint64_t released_segments;  ///< segments given back upstream so far
  /**
   * @brief Idle bytes no fence proves free yet: their stream's last frees came after its last
   * fence. They go back at the next call on that stream (or `trim(stream)`); those of a stream
   * destroyed meanwhile stay until the adaptor goes.
   */
  std::uint64_t unproven_bytes;
  /** @brief Blocks freed inside captures whose graphs have not run past the free yet. */
  std::uint64_t graph_pending_bytes;
  /**
   * @brief Bytes of blocks nothing will prove free: freed in a graph that went without running
   * past the free, or whose fence the driver refused. Their segments stay until the adaptor goes.
   */
  std::uint64_t lost_bytes;
  std::uint64_t peak_live_bytes;  ///< the largest `live_bytes` since the last `trim()`
  /**
   * @brief The idle bytes kept now: `max_idle_bytes`, or `max_idle_fraction` of the peak up to
   * how far the live bytes are below it.
   */
  std::uint64_t idle_bound;
};

namespace detail {

/** @brief The state the copies of one `segment_cache_adaptor` share. */
template <class Upstream>
class alignas(64) segment_cache_state final
  : public per_thread_lane_keeper,
    public std::enable_shared_from_this<segment_cache_state<Upstream>> {
 public:
  segment_cache_state(Upstream upstream, segment_cache_options const& options, int device)
    : options_{options}, upstream_{std::move(upstream)}, device_{device}
  {
    require_known_device(device_, "segment_cache_adaptor");
    if (options_.fence_interval == 0) { options_.fence_interval = 1; }
    if (!(options_.max_idle_fraction >= 0.0)) {  // negative, or NaN
      throw_error<std::invalid_argument>(
        "segment_cache_adaptor",
        "max_idle_fraction " + std::to_string(options_.max_idle_fraction) +
          " is not a fraction of the peak live bytes; pass 0 or more (0.25 by default)");
    }
    relay_ = make_primary_stream(device_, primary_, primary_hold_);  // now, before any capture
  }
  segment_cache_state(segment_cache_state const&)            = delete;
  segment_cache_state& operator=(segment_cache_state const&) = delete;

  /**
   * @brief Gives back every idle segment a fence proves free, and those of the legacy stream of
   * the destroying thread's context, if it has one, on that stream (its order proves them); the
   * rest stays allocated. In a forked child whose parent had a thread inside the cache at the fork,
   * the lock is never released (that thread does not exist in the child) and what it guards may be
   * half changed: the cache's host bookkeeping is then left as it is, instead of waiting for ever.
   */
  ~segment_cache_state()
  {
    bool const unloading = runtime_unloading().load(std::memory_order_relaxed);
    if (auto const lock = lock_unless_orphaned(mutex); lock.owns_lock()) {
      if (!unloading) {
        // The legacy stream is one stream for every thread of a context, so it is this thread's
        // too; a stream the program made may be gone, and is not asked. A thread without a
        // current context has no legacy stream: asking the driver of one would only fail.
        bool const legacy_eager =
          current_context_or_null() != nullptr && stream_is_eager(cudaStreamLegacy);
        std::uint64_t const legacy = legacy_eager ? stream_lane(cudaStreamLegacy) : 0;
        release_idle_locked(legacy != 0 ? cudaStreamLegacy : nullptr, legacy, 0);
      }
      for (auto& [address, segment] : segments_) {
        for (cache_block* b = segment->first; b != nullptr;) {
          cache_block* const next = b->next;
          delete b;
          b = next;
        }
      }
      lanes_.clear();
      while (spare_blocks_ != nullptr) {
        cache_block* const next = spare_blocks_->next;
        delete spare_blocks_;
        spare_blocks_ = next;
      }
    }
    if (unloading || relay_ == nullptr) { return; }
    if (auto const destroy = driver().stream_destroy; destroy != nullptr) { (void)destroy(relay_); }
  }

  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }
  [[nodiscard]] Upstream const& upstream() const noexcept { return upstream_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] segment_cache_options const& options() const noexcept { return options_; }

  /** @brief A cached block of `sizes.block` bytes for `lane` on eager `stream`, or nullptr. */
  void* take_cached(cudaStream_t stream, std::uint64_t lane, segment_cache_sizes sizes)
  {
    reclaim_graph_frees_locked();
    cache_lane* const l = find_lane(lane);
    if (l == nullptr) { return nullptr; }
    auto& free = l->free_of(sizes.small);
    while (cache_block* const b = free.best_fit(sizes.block)) {
      if (!order_after_waits(stream, *b, *l)) {
        free.erase(*b);  // nothing proves its last use done: it stays out for good
        b->free = false;
        hold(*b->segment);
        lost_bytes_ += b->size;
        continue;
      }
      ++hits_;
      return hand_out(*b, sizes, free);
    }
    return nullptr;
  }

  /** @brief Adds `address`, a new segment of `sizes.segment` bytes for `lane`, and hands out its
   * first block. */
  void* take_new_segment(void* address, std::uint64_t lane, segment_cache_sizes sizes)
  {
    auto segment           = std::make_unique<cache_segment>();
    segment->address       = reinterpret_cast<std::uintptr_t>(address);
    segment->size          = sizes.segment;
    segment->small         = sizes.small;
    segment->lane          = lane;
    auto block             = std::make_unique<cache_block>();
    block->address         = segment->address;
    block->size            = sizes.segment;
    block->segment         = segment.get();
    block->free            = true;
    segment->first         = block.get();
    cache_lane& l          = lane_or_new(lane);
    auto& free             = l.free_of(sizes.small);
    cache_segment* const s = segment.get();
    cache_block* const b   = block.get();
    // What may throw (host memory) comes first; on a throw nothing stays linked, and the caller
    // gives the segment back. hand_out makes the live table's room itself.
    segments_.emplace(s->address, std::move(segment));
    free.insert(*b);
    try {
      void* const ptr = hand_out(*b, sizes, free);
      (void)block.release();  // the segment's chain owns it now
      segment_bytes_ += s->size;
      ++misses_;
      return ptr;
    } catch (...) {  // hand_out changes nothing when it throws
      free.erase(*b);
      segments_.erase(s->address);
      throw;
    }
  }

  /** @brief Where the live block at `ptr` is listed; `live_end()` for memory not handed out. */
  [[nodiscard]] std::size_t find_live(void* ptr) const noexcept
  {
    return live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  }
  [[nodiscard]] static constexpr std::size_t live_end() noexcept { return live_block_table::npos; }

  /**
   * @brief Frees `b` on eager `stream` of lane `lane` (0: unknown). A free on another lane than
   * its segment's is fenced at once, so that the segment's lane reuses the block only after it.
   * `lane` may be a hint (`stream_lane_hint`) unless `confirmed`: it is confirmed before a fence
   * of the lane is recorded on `stream`, or a segment given back on it.
   */
  void free_eager(std::size_t live,
                  cudaStream_t stream,
                  std::uint64_t lane,
                  bool confirmed) noexcept
  {
    cache_block& b   = *live_.at(live).block;
    cache_segment& s = *b.segment;
    std::shared_ptr<cross_lane_fence> wait;
    if (lane != s.lane) {
      wait = fence_elsewhere(stream);
      if (wait == nullptr && fences_available()) {
        // No fence could be made: the free is held until the stream's work so far is done.
        if (!synchronize_stream(stream)) {
          forget_live(live);
          lost_bytes_ += b.size;
          return;
        }
      }
    }
    forget_live(live);
    cache_lane* l = lane_of(s.lane);
    if (l == nullptr) {  // out of host memory for a lane: the block stays out
      lost_bytes_ += b.size;
      return;
    }
    if (wait) {
      try {
        b.waits.push_back(std::move(wait));
      } catch (...) {
        lost_bytes_ += b.size;
        return;
      }
    }
    // A free on the segment's own lane is one its lane's fence must cover before the segment
    // leaves the lane; one from elsewhere carries its own fence.
    if (lane == s.lane) { s.last_free = ++l->frees; }
    put_free(b, *l);
    if (lane == s.lane) { maybe_fence(*l, stream, lane, confirmed); }
    if (s.live == 0) { becomes_idle(s); }
    if (idle_bytes_ <= options_.max_idle_bytes) { return; }  // within every bound
    if (std::size_t const bound = idle_bound(); idle_bytes_ > bound) {
      confirmed = confirmed || stream_lane_confirms(stream, lane);
      release_idle_locked(stream, confirmed ? lane : 0, bound);
    }
  }

  /**
   * @brief Frees `b` on a stream being captured: it leaves the live set now and is free again once
   * the graph first runs past this point. A graph that goes without having run the free, and a
   * capture that cannot take it (invalidated, refused), leave nothing that proves the block's last
   * use done (the captured stream is not asked which stream it is: that would invalidate the
   * capture): the block is lost (`lost_bytes`) and its segment stays until the adaptor goes.
   * @return The data of the graph's host node, to hand to `call_in_graph` without the lock.
   */
  graph_free* free_in_graph(std::size_t live) noexcept
  {
    cache_block& b   = *live_.at(live).block;
    graph_free* data = nullptr;
    try {
      if (!graph_frees_) { graph_frees_ = std::make_shared<graph_frees>(); }
      in_graphs_.emplace(b.address, &b);
      data = new graph_free{graph_frees_, b.address, true};
    } catch (...) {  // out of host memory: the block stays live, and unreachable
      in_graphs_.erase(b.address);
      return nullptr;
    }
    forget_live(live);
    graph_pending_bytes_ += b.size;
    return data;
  }

  /**
   * @brief Gives idle segments back upstream, oldest first, until at most `keep` idle bytes
   * remain: those of `lane` (0: none) on `stream`, its current call's stream (stream order proves
   * them free), the others on the relay stream behind their lane's fence, when it covers them.
   * @return The bytes given back.
   */
  std::size_t release_idle_locked(cudaStream_t stream,
                                  std::uint64_t lane,
                                  std::size_t keep) noexcept
  {
    std::size_t released = 0;
    for (cache_segment* s = idle_.oldest(); s != nullptr && idle_bytes_ > keep;) {
      cache_segment* const next = s->idle_next;
      std::size_t const size    = s->size;  // `s` is gone once given back
      if (give_back(*s, s->lane == lane && lane != 0, stream)) { released += size; }
      s = next;
    }
    return released;
  }

  /**
   * @brief Before a miss of a `segment`-byte segment on eager `stream` of `lane`: the idle bytes
   * past `max_idle_bytes` go back, oldest first, until the segment's size has (or they all have).
   * What `max_idle_fraction` keeps is for the next peak's hits; a request none of it fits takes
   * their place instead of adding to them, so the cache holds no more at a peak of new sizes than
   * at one of the old.
   */
  void trade_idle_for_miss_locked(cudaStream_t stream,
                                  std::uint64_t lane,
                                  std::size_t segment) noexcept
  {
    if (idle_bytes_ <= options_.max_idle_bytes) { return; }
    std::size_t const surplus = idle_bytes_ - options_.max_idle_bytes;
    (void)release_idle_locked(stream, lane, idle_bytes_ - std::min(surplus, segment));
  }

  /** @brief `trim(stream)`: every idle segment, those of `lane` (0: none) on eager `stream`. */
  std::size_t trim_locked(cudaStream_t stream, std::uint64_t lane) noexcept
  {
    reclaim_graph_frees_locked();
    peak_live_bytes_ = live_bytes_;  // a new phase: the bound follows what is live from now on
    peak_changed();
    return release_idle_locked(stream, lane, 0);
  }

  /**
   * @brief The idle bytes kept: `max_idle_bytes`, or `max_idle_fraction` of the peak live bytes
   * when that is more, but never more than the live bytes are below that peak. At a peak the
   * cache keeps `max_idle_bytes` alone: what the fraction kept for it is live again, or goes.
   */
  [[nodiscard]] std::size_t idle_bound() const noexcept
  {
    std::size_t const below_peak = peak_live_bytes_ - live_bytes_;  // the peak follows `live`
    return std::max(options_.max_idle_bytes, std::min(fraction_of_peak_, below_peak));
  }

  /** @brief After the peak live bytes changed: `max_idle_fraction` of them, saturated. */
  void peak_changed() noexcept
  {
    double const relative = options_.max_idle_fraction * static_cast<double>(peak_live_bytes_);
    constexpr double every_byte = 18446744073709551616.0;       // 2^64: no size_t holds it
    fraction_of_peak_           = peak_live_bytes_ == 0    ? 0  // no infinity times zero
                                  : relative >= every_byte ? std::numeric_limits<std::size_t>::max()
                                                           : static_cast<std::size_t>(relative);
  }

  /**
   * @brief Gives the oldest idle segments back until the idle bytes are within the bound again:
   * those of `lane` (0: none) on eager `stream`, the others behind their fences. Called wherever
   * the idle bytes may have passed the bound: after an allocation (the live bytes rose, so the
   * bound fell), after graph frees were reclaimed, after an exiting thread's fence.
   */
  void release_past_bound_locked(cudaStream_t stream, std::uint64_t lane) noexcept
  {
    if (idle_bytes_ <= options_.max_idle_bytes) { return; }  // within every bound
    if (std::size_t const bound = idle_bound(); idle_bytes_ > bound) {
      (void)release_idle_locked(stream, lane, bound);
    }
  }

  [[nodiscard]] segment_cache_statistics statistics_locked() const noexcept
  {
    std::uint64_t unproven = 0;
    for (cache_segment const* s = idle_.oldest(); s != nullptr; s = s->idle_next) {
      unproven += provable(*s) ? 0 : s->size;
    }
    return {hits_,
            misses_,
            bypasses_.load(std::memory_order_relaxed),
            segments_.size(),
            segment_bytes_,
            live_bytes_,
            idle_bytes_,
            released_segments_,
            unproven,
            graph_pending_bytes_,
            lost_bytes_,
            peak_live_bytes_,
            idle_bound()};
  }

  /** @brief Counted without the lock: a bypass is the captured streams' hot path. */
  void count_bypass() noexcept { bypasses_.fetch_add(1, std::memory_order_relaxed); }

  short_mutex mutex;

 private:
  /** @brief Waits (on eager `stream`, of `l`) for the frees on other lanes `b` carries. */
  bool order_after_waits(cudaStream_t stream, cache_block& b, cache_lane& l) noexcept
  {
    if (b.waits.empty()) { return true; }
    for (auto const& f : b.waits) {
      if (!wait_for_fence(reinterpret_cast<CUstream>(stream), f->event) &&
          !wait_for_fence_on_host(f->event)) {
        return false;
      }
    }
    b.waits.clear();
    // What the lane's fence covered so far does not cover these waits: a later fence must.
    b.segment->last_free = ++l.frees;
    return true;
  }

  /**
   * @brief Hands out the first `sizes.block` bytes of `b` (free, in `free`, its waits done): all of
   * `b` when the rest is too small to split off, else a new block in front of `b`, which stays
   * free with the rest (and in its bin, when that is still the bin of its size).
   */
  void* hand_out(cache_block& b, segment_cache_sizes sizes, free_bins& free)
  {
    std::size_t const rest = b.size - sizes.block;
    bool const split = sizes.small ? rest >= segment_cache_granule : rest > large_split_remainder;
    cache_block* out = &b;
    // What may throw (host memory) comes first: on a throw nothing has changed.
    if (split) { out = take_block(); }
    try {
      live_.reserve(live_.size() + 1);
    } catch (...) {
      if (split) { recycle_block(out); }
      throw;
    }
    if (split) {
      out->address = b.address;
      out->size    = sizes.block;
      out->segment = b.segment;
      out->prev    = b.prev;
      out->next    = &b;
      if (b.prev != nullptr) {
        b.prev->next = out;
      } else {
        b.segment->first = out;
      }
      b.prev = out;
      b.address += sizes.block;
      b.size = rest;
      free.resized(b);
    } else {
      free.erase(b);
    }
    live_.insert({out->address, out});
    out->free = false;
    hold(*out->segment);
    live_bytes_ += out->size;
    if (live_bytes_ > peak_live_bytes_) {
      peak_live_bytes_ = live_bytes_;
      peak_changed();
    }
    return reinterpret_cast<void*>(out->address);
  }

  /** @brief One more block of `s` is out of its free lists (live, in a graph, or stuck). */
  void hold(cache_segment& s) noexcept
  {
    if (s.live++ == 0 && s.idle) {
      idle_.erase(s);
      idle_bytes_ -= s.size;
    }
  }

  /** @brief The block at `live` leaves the live set; its segment counts it until it is free. */
  void forget_live(std::size_t live) noexcept
  {
    live_bytes_ -= live_.at(live).block->size;
    live_.erase(live);
  }

  /** @brief A block object, recycled when one is spare. @throws std::bad_alloc */
  cache_block* take_block()
  {
    if (spare_blocks_ == nullptr) { return new cache_block{}; }
    cache_block* const b = spare_blocks_;
    spare_blocks_        = b->next;
    --spare_block_count_;
    b->next = nullptr;
    return b;
  }

  /** @brief Gives `b` (unlinked, listed nowhere) back for reuse, or deletes it past a bound. */
  void recycle_block(cache_block* b) noexcept
  {
    if (spare_block_count_ >= max_spare_blocks) {
      delete b;
      return;
    }
    b->waits.clear();
    b->address    = 0;
    b->size       = 0;
    b->segment    = nullptr;
    b->prev       = nullptr;
    b->free       = false;
    b->next       = spare_blocks_;
    spare_blocks_ = b;
    ++spare_block_count_;
  }

  /** @brief `b` joins `l`'s free blocks, merged with free neighbours. */
  void put_free(cache_block& b, cache_lane& l) noexcept
  {
    auto& free      = l.free_of(b.segment->small);
    cache_block* at = &b;
    at->free        = true;
    bool listed     = false;  // `at` is listed: it is the free block before `b`
    if (cache_block* p = at->prev; p != nullptr && p->free) {
      merge_into(*p, *at);
      at     = p;
      listed = true;
    }
    if (cache_block* n = at->next; n != nullptr && n->free) {
      free.erase(*n);
      merge_into(*at, *n);
    }
    if (listed) {
      free.resized(*at);
    } else {
      free.insert(*at);
    }
    --at->segment->live;
  }

  /** @brief Merges `right` (free, just after `left`) into `left`, and deletes it. */
  void merge_into(cache_block& left, cache_block& right) noexcept
  {
    left.size += right.size;
    left.next = right.next;
    if (right.next != nullptr) { right.next->prev = &left; }
    for (auto& w : right.waits) {
      try {
        left.waits.push_back(std::move(w));
      } catch (...) {  // NOLINT(bugprone-empty-catch): the fence goes; host-wait below instead
        (void)wait_for_fence_on_host(w->event);
      }
    }
    recycle_block(&right);
  }

  void becomes_idle(cache_segment& s) noexcept
  {
    idle_.push_back(s);
    idle_bytes_ += s.size;
  }

  /** @brief The lane of id `lane`, made if needed; nullptr when no memory is left to make it. */
  cache_lane* lane_of(std::uint64_t lane) noexcept
  {
    try {
      return &lane_or_new(lane);
    } catch (...) {
      return nullptr;
    }
  }

  /** @brief The lane of id `lane`, or nullptr: the last one asked for without a lookup. */
  [[nodiscard]] cache_lane* find_lane(std::uint64_t lane) noexcept
  {
    if (lane == recent_lane_id_ && recent_lane_ != nullptr) { return recent_lane_; }
    auto const it = lanes_.find(lane);
    if (it == lanes_.end()) { return nullptr; }
    recent_lane_id_ = lane;
    recent_lane_    = &it->second;  // lanes stay until the cache goes: the pointer stays valid
    return recent_lane_;
  }

  /** @brief The lane of id `lane`, made if needed. @throws std::bad_alloc */
  cache_lane& lane_or_new(std::uint64_t lane)
  {
    if (cache_lane* const l = find_lane(lane)) { return *l; }
    cache_lane& made = lanes_.try_emplace(lane).first->second;
    recent_lane_id_  = lane;
    recent_lane_     = &made;
    return made;
  }

  /** @brief `record_lasting_fence` on eager `stream` into a spare event of the pool (null:
   * refused). */
  CUevent pooled_fence(cudaStream_t stream) noexcept
  {
    CUevent const spare = events_.take(primary_);
    CUevent const e =
      record_lasting_fence(stream, primary_, reinterpret_cast<cudaStream_t>(relay_), spare);
    if (e == nullptr) { events_.give(spare); }
    return e;
  }

  /** @brief A lasting fence recorded on eager `stream` now; null without a driver or if refused. */
  std::shared_ptr<cross_lane_fence> fence_elsewhere(cudaStream_t stream) noexcept
  {
    if (!fences_available()) { return nullptr; }
    CUevent const e = pooled_fence(stream);
    if (e == nullptr) { return nullptr; }
    try {
      return std::make_shared<cross_lane_fence>(e, &events_);
    } catch (...) {
      (void)wait_for_fence_on_host(e);
      events_.give(e);
      return nullptr;
    }
  }

  /**
   * @brief Fences `l` on `stream` (a call on it now, of lane `lane`, a hint unless `confirmed`)
   * when its interval has passed.
   */
  void maybe_fence(cache_lane& l, cudaStream_t stream, std::uint64_t lane, bool confirmed) noexcept
  {
    if (++l.since_fence < lane_fence_interval(l.frees, options_.fence_interval)) { return; }
    if (!fences_available()) { return; }
    // A stream made at a destroyed stream's handle is not its lane: its fence proves nothing of
    // the lane's work.
    if (!confirmed && !stream_lane_confirms(stream, lane)) { return; }
    fence_lane(l, stream);
  }

  /** @brief Records `l`'s fence on eager `stream`, which is `l`'s stream, after its frees so far.
   */
  void fence_lane(cache_lane& l, cudaStream_t stream) noexcept
  {
    CUevent const e = pooled_fence(stream);
    if (e == nullptr) { return; }
    events_.give(l.fence);  // nothing waits on the lane's older fence again
    l.fence       = e;
    l.fenced      = l.frees;
    l.since_fence = 0;
  }

 public:
  /**
   * @brief Notes, after a miss on this thread's per-thread default stream (of lane `lane`), that
   * the lane is to be fenced when the thread exits (`thread_exiting`). A lane's segments are all
   * made by misses on its own thread. Without host memory for the note, nothing is noted.
   */
  void note_per_thread_lane(std::uint64_t lane) noexcept
  {
    try {
      if (exiting_thread_lanes* const lanes = this_threads_lanes()) {
        lanes->note(this->weak_from_this(), lane, current_context_or_null());
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): std::bad_alloc: the lane stays unfenced
    }
  }

  /**
   * @brief At the exit of a thread that used `lane`, its per-thread default stream of `context`:
   * fences the lane's frees not fenced yet while the stream still exists (no later free can join
   * the lane: it was that thread's alone), and gives back the idle segments past the bound that
   * the fence now proves free.
   */
  void thread_exiting(std::uint64_t lane, CUcontext context) noexcept override
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) { return; }
    std::lock_guard const lock{mutex};
    auto const it = lanes_.find(lane);
    if (it == lanes_.end() || !fences_available() || it->second.fenced == it->second.frees) {
      return;
    }
    // A context other than the device's primary one may have been destroyed since (and another
    // made at its address): it is used only while it is still the thread's current context. A
    // lane of a destroyed context owes nothing: its work ended with it.
    if (context != primary_ && context != current_context_or_null()) { return; }
    {
      context_scope const scope{context};
      if (!scope.ok() || !stream_is_eager(cudaStreamPerThread)) { return; }
      fence_lane(it->second, cudaStreamPerThread);
    }
    release_past_bound_locked(nullptr, 0);
  }

 private:
  /**
   * @brief True when a fence proves every free into idle `s` done: its lane's fence, for the frees
   * on its own lane. A segment none of whose frees was on its lane (each block freed on another
   * stream, with a fence of its own) owes its lane nothing.
   */
  [[nodiscard]] bool provable(cache_segment const& s) const noexcept
  {
    if (!fences_available() || s.last_free == 0) { return true; }
    auto const it = lanes_.find(s.lane);
    return it != lanes_.end() && it->second.fence != nullptr && it->second.fenced >= s.last_free;
  }

  /**
   * @brief Gives idle `s` back upstream: with `on_its_stream`, on `stream` (its lane's, in a call
   * now; 0 is the legacy stream, as any other handle) at once, else on the relay stream behind the
   * lane's fence and the block's own waits, if they prove it.
   * @return False when nothing proves it free yet.
   */
  bool give_back(cache_segment& s, bool on_its_stream, cudaStream_t stream) noexcept
  {
    cache_block* const b = s.first;  // idle: one free block, the whole segment
    cudaStream_t release = on_its_stream ? stream : nullptr;
    if (!on_its_stream) {
      if (!provable(s)) { return false; }
      if (fences_available()) {
        if (relay_ == nullptr) { return false; }
        release = reinterpret_cast<cudaStream_t>(relay_);
        if (s.last_free != 0) {  // frees on its lane: behind the lane's fence
          CUevent const fence = lanes_.find(s.lane)->second.fence;
          context_scope const scope{primary_};
          if (!scope.ok() || !wait_for_fence(relay_, fence)) { return false; }
        }
      }
    }
    for (auto const& w : b->waits) {
      if (!wait_for_fence(reinterpret_cast<CUstream>(release), w->event) &&
          !wait_for_fence_on_host(w->event)) {
        return false;
      }
    }
    auto const lane = lanes_.find(s.lane);
    if (lane != lanes_.end()) { lane->second.free_of(s.small).erase(*b); }
    idle_.erase(s);
    idle_bytes_ -= s.size;
    segment_bytes_ -= s.size;
    ++released_segments_;
    std::uintptr_t const address = s.address;
    std::size_t const size       = s.size;
    delete b;
    segments_.erase(address);
    relaxed_capture_mode const relaxed;  // see the adaptor's allocate
    stream_deallocate(upstream_,
                      cuda::stream_ref{release},
                      reinterpret_cast<void*>(address),
                      size,
                      default_alignment);
    return true;
  }

  /**
   * @brief Moves the blocks whose graphs ran past their frees into their lanes' free lists; those
   * whose graphs went unrun are lost.
   */
  void reclaim_graph_frees_locked() noexcept
  {
    if (!graph_frees_) { return; }
    for (std::uintptr_t const address : graph_frees_->take_unrun()) {
      if (auto const it = in_graphs_.find(address); it != in_graphs_.end()) {
        graph_pending_bytes_ -= it->second->size;
        lost_bytes_ += it->second->size;
        in_graphs_.erase(it);
      }
    }
    for (std::uintptr_t const address : graph_frees_->take()) {
      auto const it = in_graphs_.find(address);
      if (it == in_graphs_.end()) { continue; }
      cache_block& b = *it->second;
      in_graphs_.erase(it);
      graph_pending_bytes_ -= b.size;
      cache_lane* l = lane_of(b.segment->lane);
      if (l == nullptr) {
        lost_bytes_ += b.size;
        continue;
      }
      // Its uses are done (the graph ran past them): no lane need wait, so no fence is owed.
      cache_segment& segment = *b.segment;  // `b` may be merged into a neighbour, and gone
      put_free(b, *l);
      if (segment.live == 0) { becomes_idle(segment); }
    }
    release_past_bound_locked(nullptr, 0);
  }

  // What every hit and free reads and writes comes first, next to `mutex`: a few cache lines,
  // which the driver's calls between two of ours tend to evict.
  std::uint64_t recent_lane_id_{};  ///< see find_lane
  cache_lane* recent_lane_{};
  live_block_table live_;
  cache_block* spare_blocks_{};  ///< recycled block objects, linked through `next`
  std::size_t spare_block_count_{};
  std::shared_ptr<graph_frees> graph_frees_;
  std::uint64_t hits_{};
  std::size_t live_bytes_{}, idle_bytes_{};
  std::size_t peak_live_bytes_{};   ///< since the last trim: what `idle_bound` follows
  std::size_t fraction_of_peak_{};  ///< `max_idle_fraction` of `peak_live_bytes_`
  segment_cache_options options_;
  static constexpr std::size_t max_spare_blocks = 4096;

  primary_context_hold primary_hold_;  ///< before the stream and the events: released after them
  Upstream upstream_;
  int const device_;
  CUcontext primary_{};
  CUstream relay_{};
  fence_event_pool events_;  ///< spare events of `primary_`, under `mutex`; outlives their fences
  std::unordered_map<std::uint64_t, cache_lane> lanes_;
  std::unordered_map<std::uintptr_t, std::unique_ptr<cache_segment>> segments_;
  idle_segments idle_;
  std::unordered_map<std::uintptr_t, cache_block*> in_graphs_;
  std::uint64_t misses_{}, released_segments_{};
  std::atomic<std::uint64_t> bypasses_{0};  ///< written without the lock: away from the hot lines
  std::size_t segment_bytes_{}, lost_bytes_{}, graph_pending_bytes_{};
};

}  // namespace detail

/**
 * @brief Caches freed blocks of every size in segments taken from `Upstream`, per stream, and hands
 * them out again without calling it: a stream-ordered caching layer over the shared driver pool.
 *
 * `Upstream` is any stream-ordered resource (held by copy) or resource ref (what it refers to
 * must outlive the adaptor), typically an `async_device_resource`. The adaptor has the upstream's
 * properties and satisfies the same `cuda::mr` concepts. Copies share one cache and compare equal.
 * Thread-safe: one lock per cache; any thread may free what any other allocated.
 *
 * Where memory sits (docs/segment_cache.md gives the reasoning and the costs):
 * - Requests are rounded up to 512 bytes. Up to 1 MiB they share segments of 2 MiB, up to 10 MiB
 *   segments of 16 MiB, and larger ones get a segment of their own (rounded to 2 MiB). Segments
 *   come from the upstream, so the memory is the shared pool's.
 * - Each segment belongs to the stream (its lane: `stream_lane`) it was first allocated on. Its
 *   free blocks are found best-fit, split, and merged with free neighbours again. A block freed on
 *   the segment's stream is reused on that stream at once: stream order makes that safe. A block
 *   freed on another stream carries a fence of that stream (an event), which its next user's
 *   stream waits for.
 * - While a stream is being captured, allocations on it go to the upstream (graph memory, never
 *   cached). A cached block freed on a captured stream becomes free again when the graph first
 *   runs past the free (a host node of the graph); the capture itself is never asked anything
 *   that would invalidate it.
 *
 * When memory goes back upstream: an idle segment (no live block) goes back when the idle bytes
 * pass `max_idle_bytes`, on `trim()`, and when the upstream runs out of memory (then the
 * allocation is retried once). It goes back on the stream of the call that frees it, when that is
 * its own stream, or otherwise on a stream of the adaptor's own behind its stream's fence, never
 * after a device or context synchronization.
 *
 * `allocate_sync` / `deallocate_sync` go to the upstream directly. Memory from `allocate` must go
 * back through `deallocate` with the same size and alignment.
 */
template <class Upstream>
  requires detail::stream_ordered_upstream<Upstream>
class segment_cache_adaptor
  : public cuda::forward_property<segment_cache_adaptor<Upstream>, Upstream>,
    public detail::compat_members<segment_cache_adaptor<Upstream>> {
 public:
  /**
   * @brief Caches in front of `upstream`, with `options`: its device is the upstream's
   * (`upstream.device()`), else the current one.
   * @throws std::invalid_argument if `options.max_idle_fraction` is negative or not a number.
   */
  template <detail::upstream_argument<segment_cache_adaptor, Upstream> Arg = Upstream>
  explicit segment_cache_adaptor(Arg&& upstream, segment_cache_options const& options = {})
    : segment_cache_adaptor(
        std::forward<Arg>(upstream), detail::device_of_upstream(upstream), options)
  {
  }

  /**
   * @brief Caches in front of `upstream`, an upstream of `device`, with `options`.
   * @throws std::invalid_argument if `options.max_idle_fraction` is negative or not a number.
   * @throws std::out_of_range if `device` is not one of the driver's devices.
   */
  template <detail::upstream_argument<segment_cache_adaptor, Upstream> Arg = Upstream>
  segment_cache_adaptor(Arg&& upstream, int device, segment_cache_options const& options = {})
    : state_{std::make_shared<detail::segment_cache_state<Upstream>>(
        Upstream(std::forward<Arg>(upstream)), options, device)}
  {
  }

  using detail::compat_members<segment_cache_adaptor<Upstream>>::allocate;
  using detail::compat_members<segment_cache_adaptor<Upstream>>::deallocate;

  /**
   * @brief Allocates `bytes` in the order of `stream`, from a cached block of `stream` when one
   * fits, else from a new segment.
   * @throws out_of_memory if the upstream is exhausted even after the idle segments went back.
   * @throws whatever else the upstream throws (a bad alignment, for one).
   */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    if (bytes == 0) { return nullptr; }
    cudaStream_t const handle = stream.get();
    detail::default_stream_context const in_context{handle, state_->device()};
    detail::segment_cache_sizes const sizes = detail::segment_cache_sizes_of(bytes);
    // Capture first: asking a capturing stream for its lane would invalidate the capture.
    if (sizes.block == 0 || !detail::is_valid_alignment(alignment) ||
        detail::runtime_unloading().load(std::memory_order_relaxed) ||
        !detail::stream_is_eager(handle)) {
      return bypass(stream, bytes, alignment);
    }
    std::uint64_t const lane = detail::stream_lane(handle);
    if (lane == 0) { return bypass(stream, bytes, alignment); }
    auto& st = *state_;
    std::lock_guard const lock{st.mutex};
    if (void* ptr = st.take_cached(handle, lane, sizes)) {
      st.release_past_bound_locked(handle, lane);
      return ptr;
    }
    // Every call into the upstream is made in relaxed capture mode: while another thread captures
    // in global mode, the driver refuses a pool call from a thread in global mode, and invalidates
    // that capture. A hit asks the driver only what any mode allows.
    detail::relaxed_capture_mode const relaxed;
    st.trade_idle_for_miss_locked(handle, lane, sizes.segment);
    void* segment = nullptr;
    try {
      segment = detail::stream_allocate(st.upstream(), stream, sizes.segment, default_alignment);
    } catch (out_of_memory const&) {
      if (st.trim_locked(handle, lane) == 0) { throw; }
    } catch (bad_alloc const&) {  // not an exhaustion: giving back cannot help
      throw;
    } catch (std::bad_alloc const&) {  // exhaustion reported by a resource outside rmm-next
      if (st.trim_locked(handle, lane) == 0) { throw; }
    }
    if (segment == nullptr) {
      segment = detail::stream_allocate(st.upstream(), stream, sizes.segment, default_alignment);
    }
    try {
      void* const ptr = st.take_new_segment(segment, lane, sizes);
      st.release_past_bound_locked(handle, lane);
      if (detail::is_per_thread_default_stream(handle)) { st.note_per_thread_lane(lane); }
      return ptr;
    } catch (...) {
      detail::stream_deallocate(st.upstream(), stream, segment, sizes.segment, default_alignment);
      throw;
    }
  }

  /**
   * @brief Frees `ptr` in the order of `stream` into the cache (see the class). nullptr does
   * nothing.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept
  {
    // Unloading, or a forked child: the driver is not to be asked, and nothing can reuse it.
    if (ptr == nullptr || detail::runtime_unloading().load(std::memory_order_relaxed)) { return; }
    cudaStream_t const handle = stream.get();
    auto& st                  = *state_;
    detail::default_stream_context const in_context{handle, st.device()};
    detail::capture_info capture{};
    if (!detail::stream_is_eager(handle)) {
      capture = detail::capture_of(handle);
      // Eager after all (the capture ended meanwhile), or the driver could not say: as captured.
      if (!capture.capturing()) { capture.status = detail::capture_status::unknown; }
    }
    // The lane is asked before the lock, and only of an eager stream: for a made stream this
    // thread used last, the lane its last allocation or free confirmed, with no driver call.
    std::uint64_t const lane     = capture.capturing() ? 0 : detail::stream_lane_hint(handle);
    detail::graph_free* in_graph = nullptr;
    {
      std::lock_guard const lock{st.mutex};
      auto const live = st.find_live(ptr);
      if (live != st.live_end() && !capture.capturing()) {
        st.free_eager(live, handle, lane, detail::is_default_stream(handle));
        return;
      }
      if (live != st.live_end()) {
        in_graph = st.free_in_graph(live);
        if (in_graph == nullptr) { return; }
      }
    }
    if (in_graph != nullptr) {
      (void)detail::call_in_graph(
        handle, capture, &detail::graph_free::run, &detail::graph_free::destroy, in_graph);
      return;
    }
    detail::relaxed_capture_mode const relaxed;  // see allocate
    detail::stream_deallocate(st.upstream(), stream, ptr, bytes, alignment);
  }

  /** @brief Allocates from the upstream synchronously, bypassing the cache. */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
    requires detail::synchronous_upstream<Upstream>
  {
    return detail::sync_allocate(state_->upstream(), bytes, alignment);
  }

  /** @brief Frees memory from `allocate_sync` to the upstream synchronously. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
    requires detail::synchronous_upstream<Upstream>
  {
    detail::sync_deallocate(state_->upstream(), ptr, bytes, alignment);
  }

  /**
   * @brief Gives every idle segment a fence proves free back upstream; with `stream` (eager), also
   * those of that stream, whose order proves them. The stream-ordered frees go on after the call.
   * Nothing once the runtime is unloading, or in a forked child.
   * @return The bytes given back.
   */
  std::size_t trim(cuda::stream_ref stream = cuda::stream_ref{cudaStream_t{}}) noexcept
  {
    // Unloading, or a forked child: the segments' stream work is not this process's to order.
    if (detail::runtime_unloading().load(std::memory_order_relaxed)) { return 0; }
    cudaStream_t const handle = stream.get();
    bool const eager          = detail::stream_is_eager(handle);
    std::uint64_t const lane  = eager ? detail::stream_lane(handle) : 0;
    std::lock_guard const lock{state_->mutex};
    return state_->trim_locked(handle, lane);
  }

  /**
   * @brief What the cache holds and has done, now.
   * @throws logic_error in a child forked while a thread of the parent was inside the cache: what
   * the cache's lock guards may be half changed there, and the lock is never released.
   */
  [[nodiscard]] segment_cache_statistics statistics() const
  {
    auto const lock = detail::lock_unless_orphaned(state_->mutex);
    if (!lock.owns_lock()) {
      detail::throw_error<logic_error>(
        "segment_cache_adaptor::statistics",
        "this process was forked while another thread was inside the cache, whose state the child "
        "cannot read; read the statistics in the parent");
    }
    return state_->statistics_locked();
  }

  /** @brief The limits the adaptor was made with. */
  [[nodiscard]] segment_cache_options options() const noexcept { return state_->options(); }

  /** @brief The resource (or ref) segments come from and go back to. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return state_->upstream(); }

  /** @brief The device whose primary context holds the adaptor's own stream (-1: none). */
  [[nodiscard]] int device() const noexcept { return state_->device(); }

  friend bool operator==(segment_cache_adaptor const& a, segment_cache_adaptor const& b) noexcept
  {
    return a.state_ == b.state_;
  }

 private:
  void* bypass(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    state_->count_bypass();
    detail::relaxed_capture_mode const relaxed;  // see allocate
    return detail::stream_allocate(state_->upstream(), stream, bytes, alignment);
  }

  std::shared_ptr<detail::segment_cache_state<Upstream>> state_;
};

/** @brief `segment_cache_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
segment_cache_adaptor(Upstream, segment_cache_options const& = {})
  -> segment_cache_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<segment_cache_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<segment_cache_adaptor<device_async_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  !cuda::has_property<segment_cache_adaptor<device_async_resource_ref>, cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
