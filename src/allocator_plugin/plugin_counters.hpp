/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

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
 * that thread only and summed on read, so that counting costs no contended cache line.
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

/** @brief The calling thread's counters for `device`, or nullptr when it is out of range. */
inline device_counts* local_counts(counter_registry& registry, int device)
{
  struct holder {
    counter_registry* registry{};
    device_counts* block{};
    ~holder()
    {
      if (block != nullptr) { registry->release(block); }
    }
  };
  thread_local holder h;
  if (device < 0 || static_cast<std::size_t>(device) >= registry.devices()) { return nullptr; }
  if (h.block == nullptr) {
    h.registry = &registry;
    h.block    = registry.acquire();
  }
  return &h.block[device];
}

/** @brief Adds `n` to a counter that only the calling thread writes. */
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) noexcept
{
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace rmm_next::plugin
