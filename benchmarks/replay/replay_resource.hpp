/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The resources replay_bench replays a log on, chosen by name: each translation unit adds its
// own (replay_bench.cpp the rmm-next ones, replay_rmm_peers.cpp RMM 26.10's in replay_rmm_bench).
// A resource is made fresh for every run (every repetition) and destroyed after it, so that each
// run's peaks are its own.

#include "support/bench_support.hpp"

#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rmm_next_bench::replay {

/** @brief What a resource reports after a run (device synchronized). */
struct memory_peaks {
  std::uint64_t reserved{};                ///< peak bytes the resource held from the system
  std::optional<std::uint64_t> pool_used;  ///< driver pools: UsedMemHigh (caches included)
};

/** @brief A resource under replay (type-erased: every resource pays the same virtual call). */
class replay_resource {
 public:
  replay_resource()                                  = default;
  replay_resource(replay_resource const&)            = delete;
  replay_resource& operator=(replay_resource const&) = delete;
  virtual ~replay_resource()                         = default;

  /** @brief Allocates `bytes` on `stream`; throws as the resource does. */
  virtual void* allocate(cudaStream_t stream, std::size_t bytes) = 0;
  /** @brief Frees `ptr` (of `bytes`) on `stream`. */
  virtual void deallocate(cudaStream_t stream, void* ptr, std::size_t bytes) noexcept = 0;
  /** @brief The peaks since construction. */
  virtual memory_peaks peaks() = 0;
};

/** @brief A resource offered by name. */
struct resource_kind {
  char const* name;
  char const* description;
  std::unique_ptr<replay_resource> (*make)();
};

/** @brief Every resource of this program, in registration order. */
inline std::vector<resource_kind>& resource_kinds()
{
  static std::vector<resource_kind> kinds;
  return kinds;
}

/** @brief Adds a resource kind at static initialization (namespace scope). */
struct add_resource_kind {
  explicit add_resource_kind(resource_kind kind) { resource_kinds().push_back(kind); }
};

/** @brief allocate/deallocate through a stream-ordered resource `Resource` held by value. */
template <class Resource>
class resource_calls : public replay_resource {
 public:
  explicit resource_calls(Resource resource) : resource_{std::move(resource)} {}

  void* allocate(cudaStream_t stream, std::size_t bytes) override
  {
    return resource_.allocate(cuda::stream_ref{stream}, bytes, alignment);
  }
  void deallocate(cudaStream_t stream, void* ptr, std::size_t bytes) noexcept override
  {
    resource_.deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  }

 protected:
  Resource& resource() noexcept { return resource_; }

 private:
  static constexpr std::size_t alignment = 256;  // RMM's and rmm-next's default
  Resource resource_;
};

/** @brief The peaks of driver pool `pool` since its last reset_pool (bench_support.hpp). */
inline memory_peaks driver_pool_peaks(cudaMemPool_t pool)
{
  memory_peaks p;
  std::uint64_t used{};
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &p.reserved),
        "cudaMemPoolGetAttribute(ReservedMemHigh)");
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used),
        "cudaMemPoolGetAttribute(UsedMemHigh)");
  p.pool_used = used;
  return p;
}

}  // namespace rmm_next_bench::replay
