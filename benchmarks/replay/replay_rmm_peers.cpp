/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// RMM 26.10's resources in replay_rmm_bench (built when CMake is given RMM_NEXT_RMM_ROOT; the
// whole program then compiles against the CCCL that ships with RMM). Each run makes its resource
// afresh:
//
//   rmm_pool        pool_memory_resource over cuda_memory_resource, initial size 0 (it grows on
//                   demand by RMM's policy)
//   rmm_arena       arena_memory_resource over cuda_memory_resource; its global arena is taken at
//                   construction: RMM's default size (half the free device memory) or
//                   RMM_NEXT_REPLAY_ARENA_BYTES
//   rmm_cuda_async  cuda_async_memory_resource (a driver pool of its own)
//
// peak_reserved_bytes: pool and arena, the peak bytes of an rmm::mr::statistics_resource_adaptor
// between them and cuda_memory_resource (what they took from cudaMalloc: for the arena, its whole
// arena); cuda_async, its pool's ReservedMemHigh.

#include "replay/replay_resource.hpp"

#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

namespace rmm_next_bench::replay {
namespace {

/** @brief An RMM suballocator over cuda_memory_resource, what it takes from cudaMalloc counted. */
template <class Resource>
class counted_resource : public resource_calls<Resource> {
 public:
  counted_resource(rmm::mr::statistics_resource_adaptor upstream, Resource resource)
    : resource_calls<Resource>{std::move(resource)}, upstream_{std::move(upstream)}
  {
  }
  memory_peaks peaks() override
  {
    return {static_cast<std::uint64_t>(upstream_.get_bytes_counter().peak), std::nullopt};
  }

 private:
  rmm::mr::statistics_resource_adaptor upstream_;  // shared with the resource's copy
};

std::optional<std::size_t> arena_bytes()
{
  char const* env = std::getenv("RMM_NEXT_REPLAY_ARENA_BYTES");
  if (env == nullptr || *env == '\0') { return std::nullopt; }
  return static_cast<std::size_t>(std::strtoull(env, nullptr, 10));
}

class cuda_async_resource : public resource_calls<rmm::mr::cuda_async_memory_resource> {
 public:
  cuda_async_resource() : resource_calls{rmm::mr::cuda_async_memory_resource{}} {}
  memory_peaks peaks() override { return driver_pool_peaks(resource().pool_handle()); }
};

add_resource_kind const rmm_pool{
  {"rmm_pool",
   "RMM 26.10 pool_memory_resource over cuda_memory_resource, initial size 0",
   []() -> std::unique_ptr<replay_resource> {
     rmm::mr::statistics_resource_adaptor upstream{rmm::mr::cuda_memory_resource{}};
     rmm::mr::pool_memory_resource pool{upstream, 0};
     return std::make_unique<counted_resource<rmm::mr::pool_memory_resource>>(upstream, pool);
   }}};
add_resource_kind const rmm_arena{
  {"rmm_arena",
   "RMM 26.10 arena_memory_resource over cuda_memory_resource (RMM_NEXT_REPLAY_ARENA_BYTES)",
   []() -> std::unique_ptr<replay_resource> {
     rmm::mr::statistics_resource_adaptor upstream{rmm::mr::cuda_memory_resource{}};
     rmm::mr::arena_memory_resource arena{upstream, arena_bytes()};
     return std::make_unique<counted_resource<rmm::mr::arena_memory_resource>>(upstream, arena);
   }}};
add_resource_kind const rmm_cuda_async{
  {"rmm_cuda_async",
   "RMM 26.10 cuda_async_memory_resource (its own driver pool)",
   []() -> std::unique_ptr<replay_resource> { return std::make_unique<cuda_async_resource>(); }}};

}  // namespace
}  // namespace rmm_next_bench::replay
