/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

/**
 * @file
 * @brief Size, stream and device of each live allocation whose free will not say them (CuPy's
 * free passes only the pointer). Sharded by address so that threads rarely share a lock.
 */

namespace rmm_next::plugin {

/** @brief What the free of one allocation needs to know. */
struct allocation_record {
  std::size_t bytes;
  cudaStream_t stream;
  int device;
};

class allocation_table {
 public:
  void insert(void* ptr, allocation_record const& record)
  {
    shard& s = shard_of(ptr);
    std::lock_guard lock{s.mutex};
    s.records.insert_or_assign(ptr, record);
  }

  /** @brief Removes and returns the record of `ptr`, if there is one. */
  std::optional<allocation_record> take(void* ptr)
  {
    shard& s = shard_of(ptr);
    std::lock_guard lock{s.mutex};
    auto const it = s.records.find(ptr);
    if (it == s.records.end()) { return std::nullopt; }
    allocation_record const record = it->second;
    s.records.erase(it);
    return record;
  }

  /**
   * @brief Moves every record on `from` to `to`.
   * @return The devices of the records moved, as a bit mask (devices 0 to 63).
   */
  std::uint64_t restream(cudaStream_t from, cudaStream_t to)
  {
    std::uint64_t devices = 0;
    for (shard& s : shards_) {
      std::lock_guard lock{s.mutex};
      for (auto& [ptr, record] : s.records) {
        if (record.stream == from) {
          record.stream = to;
          if (record.device >= 0 && record.device < 64) {
            devices |= std::uint64_t{1} << record.device;
          }
        }
      }
    }
    return devices;
  }

  [[nodiscard]] std::size_t size() const
  {
    std::size_t n = 0;
    for (shard const& s : shards_) {
      std::lock_guard lock{s.mutex};
      n += s.records.size();
    }
    return n;
  }

 private:
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<void*, allocation_record> records;
  };

  shard& shard_of(void* ptr) noexcept
  {
    // Pool allocations are 256-byte aligned: the bits above are what varies.
    auto const bits = reinterpret_cast<std::uintptr_t>(ptr) >> 8;
    return shards_[(bits ^ (bits >> 7)) % shard_count];
  }

  static constexpr std::size_t shard_count = 64;
  std::array<shard, shard_count> shards_;
};

}  // namespace rmm_next::plugin
