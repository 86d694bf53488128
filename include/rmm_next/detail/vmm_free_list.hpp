/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/stream.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The free blocks of vmm_resource's segments: best fit, coalescing within a segment, each
 * block carrying the fences (events recorded at its frees) that a new user must wait on.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief An event recorded on the stream of a free: destroyed with its last block. `stream` is
 * the lane of the stream (`stream_lane`; 0: unknown, matching no stream); `order` ranks fences
 * recorded in one lane.
 */
struct free_fence {
  CUevent event{};
  std::uint64_t stream{};
  std::uint64_t order{};

  free_fence(CUevent e, std::uint64_t s, std::uint64_t o) noexcept : event{e}, stream{s}, order{o}
  {
  }
  free_fence(free_fence const&)            = delete;
  free_fence& operator=(free_fence const&) = delete;
  ~free_fence() { destroy_fence_event(event); }
};

using fence_list = std::vector<std::shared_ptr<free_fence const>>;

/** @brief `into` gains the fences of `from`; of two fences on one stream the later one stays. */
inline void merge_fences(fence_list& into, fence_list const& from)
{
  for (auto const& f : from) {
    bool kept = false;
    for (auto& g : into) {
      if (f->stream != 0 && g->stream == f->stream) {
        if (f->order > g->order) { g = f; }
        kept = true;
        break;
      }
    }
    if (!kept) { into.push_back(f); }
  }
}

/** @brief A block taken from the free list: where it starts and what its user must wait on. */
struct taken_block {
  std::uintptr_t address{};
  fence_list fences;
};

/**
 * @brief Free blocks of the segments, by address and by size. Not thread-safe: the resource
 * holds its lock around every call. Blocks never span two segments.
 */
class vmm_free_list {
 public:
  /** @brief Adds [address, address + size) of `segment`, merged with free neighbours there. */
  void insert(std::uintptr_t address, std::size_t size, std::size_t segment, fence_list fences)
  {
    auto next = by_address_.lower_bound(address);
    if (next != by_address_.begin()) {
      auto prev = std::prev(next);
      if (prev->second.segment == segment && prev->first + prev->second.size == address) {
        address = prev->first;
        size += prev->second.size;
        merge_fences(fences, prev->second.fences);
        erase(prev);
      }
    }
    if (next != by_address_.end() && next->second.segment == segment &&
        address + size == next->first) {
      size += next->second.size;
      merge_fences(fences, next->second.fences);
      erase(next);
    }
    add(address, size, segment, std::move(fences));
  }

  /**
   * @brief The smallest free block that holds `size` bytes at an `alignment`-aligned address,
   * taken out (what is left on either side stays free, with the same fences); nullopt if none.
   */
  std::optional<taken_block> take(std::size_t size, std::size_t alignment)
  {
    for (auto it = by_size_.lower_bound(size); it != by_size_.end(); ++it) {
      std::uintptr_t const start   = it->second;
      auto const block             = by_address_.find(start);
      std::size_t const block_size = block->second.size;
      std::uintptr_t const aligned = (start + alignment - 1) / alignment * alignment;
      if (aligned + size > start + block_size) { continue; }
      std::size_t const segment = block->second.segment;
      fence_list fences         = std::move(block->second.fences);
      erase(block);
      if (aligned > start) { add(start, aligned - start, segment, fences); }
      if (aligned + size < start + block_size) {
        add(aligned + size, start + block_size - aligned - size, segment, fences);
      }
      return taken_block{aligned, std::move(fences)};
    }
    return std::nullopt;
  }

  /** @brief How many free blocks there are. */
  [[nodiscard]] std::size_t size() const noexcept { return by_address_.size(); }

  /** @brief Every fence of every free block (for the wait before segments are unmapped). */
  [[nodiscard]] fence_list all_fences() const
  {
    fence_list all;
    for (auto const& [address, block] : by_address_) {
      all.insert(all.end(), block.fences.begin(), block.fences.end());
    }
    return all;
  }

  /** @brief Forgets every block (their fences go with them). */
  void clear() noexcept
  {
    by_size_.clear();
    by_address_.clear();
  }

 private:
  struct block {
    std::size_t size{};
    std::size_t segment{};
    fence_list fences;
    std::multimap<std::size_t, std::uintptr_t>::iterator in_size_index;
  };

  void add(std::uintptr_t address, std::size_t size, std::size_t segment, fence_list fences)
  {
    auto const sized = by_size_.emplace(size, address);
    by_address_.emplace(address, block{size, segment, std::move(fences), sized});
  }

  void erase(std::map<std::uintptr_t, block>::iterator it)
  {
    by_size_.erase(it->second.in_size_index);
    by_address_.erase(it);
  }

  std::map<std::uintptr_t, block> by_address_;
  std::multimap<std::size_t, std::uintptr_t> by_size_;
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
