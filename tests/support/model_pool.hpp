/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The upstream of the caches' model tests (thread_cache_model_test, segment_cache_model_test): a
// stream-ordered pool over the driver model of driver_model.hpp.

#include "driver_model.hpp"

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/error.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace model {

/** @brief What the model knows of one address the pool has handed out. */
struct block_record {
  std::size_t bytes{};
  bool live{false};
  bool graph{false};
  model::vclock last_use;    ///< every use so far
  model::vclock free_clock;  ///< what the last free was ordered after
};

/**
 * @brief A stream-ordered pool over the model: it reuses a freed block for another stream only
 * after making that stream wait for the free, as the driver's pools do; it refuses beyond its
 * capacity; allocations during capture are graph memory it never reuses.
 */
class model_pool {
 public:
  struct state {
    std::map<std::uintptr_t, block_record> blocks;
    std::uintptr_t next{0x100000};
    std::size_t capacity{};
    std::size_t in_use{0};
  };

  explicit model_pool(std::size_t capacity) : s_{std::make_shared<state>()}
  {
    s_->capacity = capacity;
  }

  [[nodiscard]] int device() const noexcept { return 0; }

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t = 256)
  {
    std::lock_guard lock{the().mutex};
    model::stream* s = model::resolve(reinterpret_cast<CUstream>(stream.get()), "pool allocate");
    if (s == nullptr) {
      throw rmm_next::cuda_error{cudaErrorInvalidResourceHandle, "model: a destroyed stream"};
    }
    if (s->capturing) {
      std::uintptr_t const a = s_->next;
      s_->next += (bytes + 4095) / 4096 * 4096 + 4096;
      s_->blocks[a] = block_record{bytes, true, true, {}, {}};
      return reinterpret_cast<void*>(a);
    }
    if (bytes > s_->capacity - s_->in_use) {
      throw rmm_next::out_of_memory{"rmm_next::out_of_memory: model pool: " +
                                    std::to_string(bytes)};
    }
    s_->in_use += bytes;
    for (auto& [a, b] : s_->blocks) {
      if (!b.live && !b.graph && b.bytes == bytes) {
        model::merge(s->clock, b.free_clock);  // the pool orders the new owner after the free
        b.live = true;
        return reinterpret_cast<void*>(a);
      }
    }
    std::uintptr_t const a = s_->next;
    s_->next += (bytes + 4095) / 4096 * 4096 + 4096;
    s_->blocks[a] = block_record{bytes, true, false, {}, {}};
    return reinterpret_cast<void*>(a);
  }

  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t = 256) noexcept
  {
    std::lock_guard lock{the().mutex};
    auto const it = s_->blocks.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == s_->blocks.end() || !it->second.live) {
      the().violation("the pool was given a block it does not hold");
      return;
    }
    block_record& b = it->second;
    if (b.bytes != bytes) { the().violation("a block went back with another size"); }
    model::stream* s = model::resolve(reinterpret_cast<CUstream>(stream.get()), "pool free");
    if (s == nullptr) { return; }
    b.live = false;
    if (b.graph) { return; }  // graph memory: never handed out again
    if (s->capturing) { the().violation("eager memory freed into a capture"); }
    model::enqueue(*s);
    b.free_clock = model::done_before(*s);
    s_->in_use -= bytes;
  }

  friend bool operator==(model_pool const& a, model_pool const& b) noexcept { return a.s_ == b.s_; }
  friend constexpr void get_property(model_pool const&, cuda::mr::device_accessible) noexcept {}

  [[nodiscard]] state& get() const noexcept { return *s_; }

 private:
  std::shared_ptr<state> s_;
};

}  // namespace model
