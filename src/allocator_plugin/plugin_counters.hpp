/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/peak_counter.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

/**
 * @file
 * @brief Counters of what went through the plugin, per device: one block per thread, written by
 * that thread only and summed on read, so that counting costs no contended cache line; and the
 * live bytes with their peak.
 */

namespace rmm_next::plugin {

/** @brief Who called: the functions of each framework, or `rmm_next_allocate`. */
enum class source : std::size_t { torch = 0, cupy = 1, numba = 2, other = 3 };
inline constexpr std::size_t source_count = 4;

/** @brief One thread's counts for one device. */
struct device_counts {
  std::array<std::atomic<std::uint64_t>, source_count> allocations{};
  std::atomic<std::uint64_t> deallocations{0};
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> bytes_allocated{0};
  std::atomic<std::uint64_t> bytes_freed{0};
};

/** @brief Sums of every thread's `device_counts`. */
struct count_totals {
  std::array<std::uint64_t, source_count> allocations{};
  std::uint64_t deallocations{0};
  std::uint64_t failures{0};
  std::uint64_t bytes_allocated{0};
  std::uint64_t bytes_freed{0};
};

/**
 * @brief Every thread's counter block. Blocks are never freed: a thread that exits hands its
 * block (and the counts in it) to the next new thread, so sums stay exact.
 */
class counter_registry {
 public:
  explicit counter_registry(std::size_t devices) : devices_{devices} {}

  [[nodiscard]] std::size_t devices() const noexcept { return devices_; }

  device_counts* acquire()
  {
    std::lock_guard lock{mutex_};
    if (!idle_.empty()) {
      device_counts* block = idle_.back();
      idle_.pop_back();
      return block;
    }
    blocks_.push_back(std::make_unique<device_counts[]>(devices_));
    return blocks_.back().get();
  }

  void release(device_counts* block) noexcept
  {
    std::lock_guard lock{mutex_};
    try {
      idle_.push_back(block);
    } catch (...) {  // the block stays counted, just never reused
    }
  }

  [[nodiscard]] count_totals totals(std::size_t device) const
  {
    count_totals t;
    if (device >= devices_) { return t; }
    std::lock_guard lock{mutex_};
    for (auto const& block : blocks_) {
      device_counts const& c = block[device];
      for (std::size_t s = 0; s < source_count; ++s) {
        t.allocations[s] += c.allocations[s].load(std::memory_order_relaxed);
      }
      t.deallocations += c.deallocations.load(std::memory_order_relaxed);
      t.failures += c.failures.load(std::memory_order_relaxed);
      t.bytes_allocated += c.bytes_allocated.load(std::memory_order_relaxed);
      t.bytes_freed += c.bytes_freed.load(std::memory_order_relaxed);
    }
    return t;
  }

 private:
  std::size_t const devices_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<device_counts[]>> blocks_;
  std::vector<device_counts*> idle_;
};

/**
 * @brief Counters of the calling thread for one device, from `local_counts`: empty when nothing is
 * counted. Usually the thread's own block; after the thread has handed that block back (it is
 * exiting, and another thread_local's destructor frees through the plugin), a block lent to it
 * for this one count and handed back by the destructor.
 */
class counts_ref {
 public:
  counts_ref() = default;
  explicit counts_ref(device_counts* counts) noexcept : counts_{counts} {}
  counts_ref(counter_registry& lender, device_counts* lent, std::size_t device) noexcept
    : counts_{&lent[device]}, lender_{&lender}, lent_{lent}
  {
  }
  counts_ref(counts_ref const&)            = delete;
  counts_ref& operator=(counts_ref const&) = delete;
  ~counts_ref()
  {
    if (lent_ != nullptr) { lender_->release(lent_); }
  }

  [[nodiscard]] device_counts* get() const noexcept { return counts_; }
  device_counts* operator->() const noexcept { return counts_; }
  explicit operator bool() const noexcept { return counts_ != nullptr; }

 private:
  device_counts* counts_{};
  counter_registry* lender_{};
  device_counts* lent_{};  ///< a block to hand back when done, or null
};

/**
 * @brief The calling thread's block. Trivially destructible, so it stays readable while the
 * thread's other thread_locals are destroyed, after `thread_block_return` gave the block back.
 */
struct thread_block {
  counter_registry* registry;
  device_counts* block;
  bool returned;  ///< the block went back to the registry: the thread is exiting
};
inline thread_local thread_block this_thread_block{nullptr, nullptr, false};

/** @brief Gives the calling thread's block back when the thread exits. */
struct thread_block_return {
  thread_block_return()                                      = default;
  thread_block_return(thread_block_return const&)            = delete;
  thread_block_return& operator=(thread_block_return const&) = delete;
  ~thread_block_return()
  {
    thread_block& t = this_thread_block;
    // In a forked child the registry is the parent's: its lock may be held by a thread that does
    // not exist here, and nothing counts into it any more.
    bool const inherited = detail::forked_after_cuda().load(std::memory_order_relaxed);
    if (t.block != nullptr && !inherited) { t.registry->release(t.block); }
    t.block    = nullptr;  // no later count writes a block that another thread may now hold
    t.returned = true;
  }
};

/**
 * @brief The calling thread's counters for `device`; empty when `device` is out of range, or when
 * an exiting thread, whose own block went back, cannot borrow one.
 * @throws std::bad_alloc if the thread's first block cannot be made.
 */
inline counts_ref local_counts(counter_registry& registry, int device)
{
  if (device < 0 || static_cast<std::size_t>(device) >= registry.devices()) { return {}; }
  thread_block& t = this_thread_block;
  if (t.block == nullptr) {
    if (t.returned) {  // a count from a thread_local destructor that ran after the return
      try {
        return counts_ref{registry, registry.acquire(), static_cast<std::size_t>(device)};
      } catch (...) {  // std::bad_alloc: not counted
        return {};
      }
    }
    thread_local thread_block_return const returns_at_exit;
    t.registry = &registry;
    t.block    = registry.acquire();
  }
  return counts_ref{&t.block[device]};
}

/**
 * @brief Bytes live through the plugin on one device and their high watermark: one counter all
 * threads share (a peak cannot be summed from per-thread counts), on a cache line of its own.
 */
struct alignas(64) live_bytes {
  detail::peak_counter bytes;
};

/** @brief Adds `n` to a counter that only the calling thread writes. */
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept
{
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace rmm_next::plugin
