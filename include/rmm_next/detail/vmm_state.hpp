/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/graph_frees.hpp>
#include <rmm_next/detail/owned_stream.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/vmm_free_list.hpp>
#include <rmm_next/detail/vmm_segments.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

/**
 * @file
 * @brief What the copies of one `vmm_resource` share: the segments, the free and live blocks, the
 * fences of the frees, and the blocks freed inside graph captures.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief What the copies of one `vmm_resource` share. Thread-safe. */
class vmm_state {
 public:
  vmm_state(vmm_options options, std::optional<int> device)
    : config_{resolve_vmm_config(options, device)},
      granularity_{config_.granularity},
      on_map_{std::move(options.on_segment_map)},
      on_unmap_{std::move(options.on_segment_unmap)},
      primary_{primary_context_of(config_.device)}
  {
  }
  vmm_state(vmm_state const&)            = delete;
  vmm_state& operator=(vmm_state const&) = delete;

  /// Waits for the frees still pending on streams, then unmaps every segment (hook first).
  ~vmm_state()
  {
    if (!runtime_unloading().load(std::memory_order_relaxed)) {
      for (auto const& f : free_.all_fences()) {
        (void)wait_for_fence_on_host(f->event);
      }
    }
    free_.clear();
    for (auto const& s : segments_) {
      if (on_unmap_) {
        try {
          on_unmap_(reinterpret_cast<void*>(s.base), s.bytes);
        } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports nothing further
        }
      }
      destroy_segment(s);
    }
  }

  /** @brief The granularity, fixed at construction: read on every allocation without a lock. */
  [[nodiscard]] std::size_t granularity() const noexcept { return granularity_; }

  /** @brief The device, fixed at construction. */
  [[nodiscard]] int device() const noexcept { return config_.device; }

  /**
   * @brief A block of `bytes` (a multiple of 256) at `alignment`, and the fences its user must
   * wait on; makes a segment when no free block fits.
   * @throws out_of_memory naming the sizes when no segment can hold the request.
   */
  taken_block take(std::size_t bytes, std::size_t alignment)
  {
    {
      std::lock_guard const lock{mutex_};
      if (auto block = take_locked(bytes, alignment)) { return std::move(*block); }
    }
    // One segment at a time, the hook outside the block lock: frees and fitting allocations go on.
    std::lock_guard const growing{grow_mutex_};
    {
      std::lock_guard const lock{mutex_};
      if (auto block = take_locked(bytes, alignment)) { return std::move(*block); }
    }
    std::size_t segment_bytes = config_.segment_size;
    if (bytes > segment_bytes && !round_up_to_multiple(bytes, granularity_, segment_bytes)) {
      throw_error<out_of_memory>(vmm_name,
                                 "out_of_memory: a request of " + std::to_string(bytes) +
                                   " bytes cannot be rounded up to the granularity " +
                                   std::to_string(granularity_) + " on device " +
                                   std::to_string(config_.device) + "; no segment can hold it");
    }
    vmm_segment_handle const s = create_segment(config_, segment_bytes, bytes);
    if (on_map_) {
      try {
        on_map_(reinterpret_cast<void*>(s.base), s.bytes);
      } catch (...) {
        destroy_segment(s);
        throw;
      }
    }
    std::lock_guard const lock{mutex_};
    std::size_t const index = segments_.size();
    try {
      segments_.push_back(s);
    } catch (...) {
      if (on_unmap_) { on_unmap_(reinterpret_cast<void*>(s.base), s.bytes); }
      destroy_segment(s);
      throw;
    }
    free_.insert(s.base, s.bytes, index, {});
    auto block = take_locked(bytes, alignment);  // fits: the base is aligned to the granularity
    return std::move(*block);
  }

  /**
   * @brief Frees the block at `address` in the order of `stream`: reusable on `stream` at once, on
   * other streams after a fence recorded now. On a stream being captured the graph frees it, when
   * it first runs past this point. Makes no call that a capture anywhere refuses.
   */
  void free_on(std::uintptr_t address, cudaStream_t stream) noexcept
  {
    if (runtime_unloading().load(std::memory_order_relaxed) || !fences_available()) {
      give_back(address, fence_list{});  // no GPU work can use it any more
      return;
    }
    capture_info const capture = capture_of(stream);
    if (capture.status != capture_status::none) {
      free_in_graph(address, stream, capture);
      return;
    }
    fence_list fences;
    if (auto fence = fence_on(stream)) {
      try {
        fences.push_back(std::move(fence));
      } catch (...) {  // out of host memory: no fence to carry, so the stream's work must be done
        (void)synchronize_stream(stream);
      }
    }
    give_back(address, std::move(fences));
  }

  /** @brief Returns a block taken at `address`, still to be waited for on `fences`. */
  void give_back(std::uintptr_t address, fence_list fences) noexcept
  {
    std::lock_guard const lock{mutex_};
    auto const it = live_.find(address);
    if (it == live_.end()) { return; }  // not ours: reported by the caller's debug check
    try {
      free_.insert(address, it->second.bytes, it->second.segment, std::move(fences));
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory, the block is lost
    }
    allocated_ -= it->second.bytes;
    live_.erase(it);
  }

  /** @brief True when `address` is a live block of this resource. */
  bool owns(std::uintptr_t address) const
  {
    std::lock_guard const lock{mutex_};
    return live_.contains(address);
  }

  std::vector<vmm_segment> segments() const
  {
    std::lock_guard const lock{mutex_};
    std::vector<vmm_segment> out;
    for (auto const& s : segments_) {
      out.push_back(vmm_segment{reinterpret_cast<void*>(s.base), s.bytes});
    }
    return out;
  }

  /** @brief The segment holding `ptr`, or nullopt. */
  std::optional<vmm_segment_handle> segment_of(void const* ptr) const
  {
    auto const p = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard const lock{mutex_};
    for (auto const& s : segments_) {
      if (p >= s.base && p < s.base + s.bytes) { return s; }
    }
    return std::nullopt;
  }

  std::size_t allocated_bytes() const
  {
    std::lock_guard const lock{mutex_};
    return allocated_;
  }

  /** @brief Bytes freed inside captures whose graphs have not run past the free yet. */
  std::size_t graph_pending_bytes()
  {
    std::lock_guard const lock{mutex_};
    reclaim_graph_frees_locked();
    std::size_t bytes = 0;
    for (auto const& [address, block] : in_graphs_) {
      bytes += block.bytes;
    }
    return bytes;
  }

  vmm_config config() const
  {
    std::lock_guard const lock{mutex_};
    return config_;
  }

 private:
  struct live_block {
    std::size_t bytes{};
    std::size_t segment{};
  };

  /** @brief The primary context of `device`, which lives as long as the process. */
  static CUcontext primary_context_of(int device)
  {
    device_guard const on_device{device, primary_context};
    return current_context_or_null();
  }

  /**
   * @brief A fence recorded on eager `stream` now, an event of the device's primary context
   * whatever the stream's context (a second context's own is relayed), numbered in the order of
   * recording; null when none can be made, after synchronizing `stream` instead (the block is then
   * free for everyone).
   */
  std::shared_ptr<free_fence const> fence_on(cudaStream_t stream) noexcept
  {
    std::uint64_t const lane = stream_lane(stream);
    {
      // Recorded and numbered together: of two fences of one lane, the later number is the later
      // event on the stream, which is what merging neighbours keeps.
      std::lock_guard const lock{fence_mutex_};
      CUevent const event = record_lasting_fence(stream, primary_, relay_stream());
      if (event != nullptr) {
        try {
          return std::make_shared<free_fence const>(event, lane, ++fence_order_);
        } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory: synchronize below
        }
        destroy_fence_event(event);
      }
    }
    (void)synchronize_stream(stream);
    return nullptr;
  }

  /**
   * @brief The resource's own stream of the primary context, made on the first free from another
   * context (null if it cannot be made: such frees then synchronize). Under `fence_mutex_`.
   */
  cudaStream_t relay_stream() noexcept
  {
    if (!relay_ && !relay_failed_) {
      try {
        relay_.emplace(config_.device, "vmm_resource");
      } catch (...) {
        relay_failed_ = true;
      }
    }
    return relay_ ? relay_->get() : nullptr;
  }

  /**
   * @brief A free on a stream being captured: the block leaves the live set now and reaches the
   * free list when the graph first runs past this point (a host node), its predecessors done. A
   * capture already invalidated, or one the driver cannot extend, never runs: nothing proves the
   * block's last use done, so it stays out of the free list until the resource goes.
   */
  void free_in_graph(std::uintptr_t address,
                     cudaStream_t stream,
                     capture_info const& capture) noexcept
  {
    graph_free* data = nullptr;
    {
      std::lock_guard const lock{mutex_};
      auto const it = live_.find(address);
      if (it == live_.end()) { return; }
      try {
        if (!graph_frees_) { graph_frees_ = std::make_shared<graph_frees>(); }
        in_graphs_.emplace(address, it->second);
        data = new graph_free{graph_frees_, address};
      } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory: the block stays live
        in_graphs_.erase(address);
        return;
      }
      allocated_ -= it->second.bytes;
      live_.erase(it);
    }
    (void)call_in_graph(stream, capture, &graph_free::run, &graph_free::destroy, data);
  }

  /** @brief Moves the blocks whose graphs ran past their frees into the free list. Lock held. */
  void reclaim_graph_frees_locked() noexcept
  {
    if (!graph_frees_) { return; }
    for (std::uintptr_t const address : graph_frees_->take()) {
      auto const it = in_graphs_.find(address);
      if (it == in_graphs_.end()) { continue; }
      try {
        free_.insert(address, it->second.bytes, it->second.segment, {});
      } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory, the block is lost
      }
      in_graphs_.erase(it);
    }
  }

  std::optional<taken_block> take_locked(std::size_t bytes, std::size_t alignment)
  {
    reclaim_graph_frees_locked();
    auto block = free_.take(bytes, alignment);
    if (block) {
      std::size_t segment = 0;
      for (std::size_t i = 0; i < segments_.size(); ++i) {
        if (block->address >= segments_[i].base &&
            block->address < segments_[i].base + segments_[i].bytes) {
          segment = i;
          break;
        }
      }
      try {
        live_.emplace(block->address, live_block{bytes, segment});
      } catch (...) {
        free_.insert(block->address, bytes, segment, std::move(block->fences));
        throw;
      }
      allocated_ += bytes;
    }
    return block;
  }

  mutable std::mutex mutex_;
  std::mutex grow_mutex_;
  vmm_config config_;
  std::size_t const granularity_;
  std::function<void(void*, std::size_t)> on_map_;
  std::function<void(void*, std::size_t)> on_unmap_;
  CUcontext const primary_;
  std::vector<vmm_segment_handle> segments_;
  vmm_free_list free_;
  std::unordered_map<std::uintptr_t, live_block> live_;
  std::unordered_map<std::uintptr_t, live_block> in_graphs_;  ///< freed in captures, not yet run
  std::shared_ptr<graph_frees> graph_frees_;
  std::size_t allocated_{};
  std::mutex fence_mutex_;
  std::uint64_t fence_order_{};        ///< under fence_mutex_
  std::optional<owned_stream> relay_;  ///< under fence_mutex_
  bool relay_failed_{false};           ///< under fence_mutex_
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
