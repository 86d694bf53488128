/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// RMM 26.10's resources as peers of mixed_pattern_bench.cpp, in mixed_pattern_rmm_bench (built
// when CMake is given RMM_NEXT_RMM_ROOT; the whole program then compiles against the CCCL that
// ships with RMM). Each resource is made once per process and reused by every run.
//
//   rmm_arena       rmm::mr::arena_memory_resource over rmm::mr::cuda_memory_resource, RMM's
//                   default arena size (half of the device memory free at construction)
//   rmm_pool        rmm::mr::pool_memory_resource over rmm::mr::cuda_memory_resource, initial
//                   size 0 (it grows on demand by RMM's policy: the larger of the request and
//                   the pool's size)
//   rmm_cuda_async  rmm::mr::cuda_async_memory_resource (a driver pool of its own)
//
// peak_reserved_bytes: for arena and pool, the bytes they hold from cudaMalloc at the peak of the
// run, counted by rmm::mr::statistics_resource_adaptor between them and cuda_memory_resource
// (they keep what they took in earlier runs, as they would in an application); for cuda_async,
// its pool's ReservedMemHigh over the run, as for the driver-pool peers.

#include "support/bench_support.hpp"
#include "support/mixed_pattern.hpp"

#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <cuda/stream_ref>

#include <cstdint>

namespace {

using namespace rmm_next_bench;

/** @brief An RMM suballocator over cuda_memory_resource, its upstream counted. */
template <class Derived, class Resource>
struct counted_peer : mixed::resource_calls<Derived> {
  rmm::mr::statistics_resource_adaptor upstream;
  Resource resource_;
  std::int64_t held_at_start{};

  Resource& resource() { return resource_; }
  void before_run()
  {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    held_at_start = upstream.get_bytes_counter().value;
    (void)upstream.push_counters();  // a fresh peak for this run
  }
  void after_run(benchmark::State& state)
  {
    auto const run_bytes                  = upstream.pop_counters().first;
    state.counters["peak_reserved_bytes"] = static_cast<double>(held_at_start + run_bytes.peak);
  }
};

struct arena_peer : counted_peer<arena_peer, rmm::mr::arena_memory_resource> {
  static constexpr char const* name = "rmm_arena";
  static constexpr bool caches      = true;  // a longer warm-up (mixed::warm_up_pairs)

  static arena_peer* instance()
  {
    return mixed::made_once<arena_peer>([] {
      rmm::mr::statistics_resource_adaptor upstream{rmm::mr::cuda_memory_resource{}};
      rmm::mr::arena_memory_resource arena{upstream};
      return arena_peer{{{}, upstream, arena}};
    });
  }
};

struct pool_peer : counted_peer<pool_peer, rmm::mr::pool_memory_resource> {
  static constexpr char const* name = "rmm_pool";

  static pool_peer* instance()
  {
    return mixed::made_once<pool_peer>([] {
      rmm::mr::statistics_resource_adaptor upstream{rmm::mr::cuda_memory_resource{}};
      rmm::mr::pool_memory_resource pool{upstream, 0};
      return pool_peer{{{}, upstream, pool}};
    });
  }
};

struct cuda_async_peer : mixed::resource_calls<cuda_async_peer>,
                         mixed::driver_pool_memory<cuda_async_peer> {
  static constexpr char const* name = "rmm_cuda_async";

  rmm::mr::cuda_async_memory_resource resource_;

  static cuda_async_peer* instance()
  {
    return mixed::made_once<cuda_async_peer>(
      [] { return cuda_async_peer{{}, {}, rmm::mr::cuda_async_memory_resource{}}; });
  }

  rmm::mr::cuda_async_memory_resource& resource() { return resource_; }
  [[nodiscard]] cudaMemPool_t pool() const { return resource_.pool_handle(); }
};

void register_rmm_peers()
{
  mixed::register_peer<arena_peer>();
  mixed::register_peer<pool_peer>();
  mixed::register_peer<cuda_async_peer>();
}

register_at_start const rmm_registration{&register_rmm_peers};

}  // namespace
