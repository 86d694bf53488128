/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Random allocations, after RMM's random_allocations benchmark: each step allocates with
// probability 0.73 (uniform size in [1, max_bytes]) or frees a random live allocation; an
// allocation that would take the live bytes over the cap frees instead. An iteration runs until
// `allocations_per_iteration` allocations were made, then frees what is left.
//
// random_allocations/<memory>/<variant>/<max_bytes>, memory one of device, managed, pinned:
//   cuda      cudaMalloc / cudaMallocManaged / cudaMallocHost and their frees (the baseline)
//   raw_pool  cudaMallocFromPoolAsync on the resource's pool + cudaFreeAsync, on one stream
//   resource  the rmm-next resource, stream-ordered on the same stream
// Every variant replays the same precomputed sequence and synchronizes once per iteration.

#include "support/bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace rmm_next_bench;

constexpr double allocate_probability   = 0.73;
constexpr int allocations_per_iteration = 512;
constexpr std::size_t live_bytes_cap    = std::size_t{64} << 20;  // 64 MiB
constexpr std::uint32_t sequence_seed   = 0x5eed;

/** @brief One step: allocate `bytes` into a new slot, or free the live allocation `slot`. */
struct step {
  bool allocate;
  std::size_t bytes;  // allocate: its size; free: the size it was allocated with
  std::size_t slot;   // free: index into the live list (swap-removed, as the replay does)
};

/** @brief The deterministic sequence every variant replays, for one `max_bytes`. */
std::vector<step> make_sequence(std::size_t max_bytes)
{
  std::mt19937 gen{sequence_seed};
  std::bernoulli_distribution do_allocate{allocate_probability};
  std::uniform_int_distribution<std::size_t> size_dist{1, max_bytes};
  std::vector<std::size_t> live;  // sizes of the live allocations
  std::size_t live_bytes = 0;
  std::vector<step> steps;
  auto free_one = [&] {
    std::uniform_int_distribution<std::size_t> pick{0, live.size() - 1};
    std::size_t const slot = pick(gen);
    steps.push_back({false, live[slot], slot});
    live_bytes -= live[slot];
    live[slot] = live.back();
    live.pop_back();
  };
  for (int made = 0; made < allocations_per_iteration;) {
    if (live.empty() || do_allocate(gen)) {
      std::size_t const bytes = size_dist(gen);
      if (live_bytes + bytes <= live_bytes_cap) {
        steps.push_back({true, bytes, live.size()});
        live.push_back(bytes);
        live_bytes += bytes;
        ++made;
        continue;
      }
    }
    free_one();
  }
  while (!live.empty()) {
    steps.push_back({false, live.back(), live.size() - 1});
    live.pop_back();
  }
  return steps;
}

enum class memory { device, managed, pinned };
enum class variant { cuda, raw_pool, resource };

template <class Resource>
constexpr memory memory_of()
{
  if constexpr (std::is_same_v<Resource, rmm_next::async_device_resource>) {
    return memory::device;
  }
  if constexpr (std::is_same_v<Resource, rmm_next::async_managed_resource>) {
    return memory::managed;
  }
  return memory::pinned;
}

/** @brief Replays `steps` with `alloc(bytes) -> void*` and `dealloc(ptr, bytes)`. */
template <class Alloc, class Dealloc>
void replay(std::vector<step> const& steps,
            std::vector<void*>& live,
            Alloc&& alloc,
            Dealloc&& dealloc)
{
  live.clear();
  for (step const& s : steps) {
    if (s.allocate) {
      live.push_back(alloc(s.bytes));
    } else {
      dealloc(live[s.slot], s.bytes);
      live[s.slot] = live.back();
      live.pop_back();
    }
  }
}

template <class Resource>
void random_allocations(benchmark::State& state,
                        Resource* resource,
                        variant v,
                        std::size_t max_bytes)
{
  guarded(state, [&] {
    std::vector<step> const steps = make_sequence(max_bytes);
    std::vector<void*> live;
    live.reserve(static_cast<std::size_t>(allocations_per_iteration));
    cudaStream_t const stream = thread_stream(0);
    cudaMemPool_t const pool  = resource->pool_handle();
    cuda::stream_ref const sref{stream};

    auto run_once = [&] {
      switch (v) {
        case variant::cuda:
          replay(
            steps,
            live,
            [](std::size_t bytes) {
              void* p{};
              if constexpr (memory_of<Resource>() == memory::device) {
                check(cudaMalloc(&p, bytes), "cudaMalloc");
              } else if constexpr (memory_of<Resource>() == memory::managed) {
                check(cudaMallocManaged(&p, bytes), "cudaMallocManaged");
              } else {
                check(cudaMallocHost(&p, bytes), "cudaMallocHost");
              }
              return p;
            },
            [](void* p, std::size_t) {
              if constexpr (memory_of<Resource>() == memory::pinned) {
                check(cudaFreeHost(p), "cudaFreeHost");
              } else {
                check(cudaFree(p), "cudaFree");
              }
            });
          break;
        case variant::raw_pool:
          replay(
            steps,
            live,
            [&](std::size_t bytes) {
              void* p{};
              check(cudaMallocFromPoolAsync(&p, bytes, pool, stream), "cudaMallocFromPoolAsync");
              return p;
            },
            [&](void* p, std::size_t) { check(cudaFreeAsync(p, stream), "cudaFreeAsync"); });
          break;
        case variant::resource:
          replay(
            steps,
            live,
            [&](std::size_t bytes) { return resource->allocate(sref, bytes); },
            [&](void* p, std::size_t bytes) { resource->deallocate(sref, p, bytes); });
          break;
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    };

    run_once();  // warm-up: pools reach their working size outside the timed loop
    for (auto _ : state) {
      run_once();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(steps.size()));
    state.counters["steps"] = static_cast<double>(steps.size());
  });
}

char const* name_of(variant v)
{
  switch (v) {
    case variant::cuda: return "cuda";
    case variant::raw_pool: return "raw_pool";
    case variant::resource: return "resource";
  }
  return "?";
}

void register_all()
{
  std::vector<std::size_t> const max_sizes{
    std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20};
  for_each_resource([&](auto& resource) {
    using resource_type = std::remove_reference_t<decltype(resource)>;
    for (std::size_t const max_bytes : max_sizes) {
      for (variant const v : {variant::cuda, variant::raw_pool, variant::resource}) {
        std::string const name = std::string{"random_allocations/"} +
                                 resource_traits<resource_type>::name + "/" + name_of(v) + "/" +
                                 std::to_string(max_bytes);
        benchmark::RegisterBenchmark(
          name.c_str(), &random_allocations<resource_type>, &resource, v, max_bytes)
          ->UseRealTime()
          ->MinTime(min_time())
          ->Unit(benchmark::kMicrosecond);
      }
    }
  });
}

register_at_start const registration{&register_all};

}  // namespace
