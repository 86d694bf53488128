/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Reads of per-device resource refs.
//
// map_read/threads:<n> (no CUDA call): per_device_resource_map::get on a map of 4 devices
// (count given, fake resources), beside a std::map<int, Ref> guarded by a std::mutex, in the same
// run. Each iteration, all threads first read the map 1024 times, wait for each other, then read
// the baseline 1024 times and wait again, so both see the same contention. Counters:
// map_ns_per_read and mutex_map_ns_per_read (time per read of one thread, averaged over the
// threads) and mutex_map_over_map (how many times longer a baseline read takes).
//
// get_current_device_resource_ref/threads:<n> (needs a GPU): the legacy free function, whose one
// CUDA call is cudaGetDevice; beside it mutex_map_get_current (what RMM does: cudaGetDevice and a
// mutex-guarded std::map lookup), get_per_device_resource_ref(device) (no CUDA call) and a bare
// cudaGetDevice.

#include "../tests/support/fake_resource.hpp"
#include "support/bench_support.hpp"

#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace {

using rmm_next::device_async_resource_ref;
using rmm_next::test::fake_resource;
using clock_type = std::chrono::steady_clock;

constexpr int map_devices     = 4;
constexpr int reads_per_phase = 1024;

/** The two containers read: the map under test and the mutex-guarded baseline. */
struct read_targets {
  std::vector<fake_resource> resources;
  rmm_next::per_device_resource_map<device_async_resource_ref> map{
    [this](int device) { return device_async_resource_ref{resources[device]}; }, map_devices};
  std::mutex mutex;
  std::map<int, device_async_resource_ref> baseline;

  read_targets()
  {
    for (int d = 0; d < map_devices; ++d) {
      resources.emplace_back(d);
    }
    for (int d = 0; d < map_devices; ++d) {
      (void)map.get(d);  // made before timing
      baseline.emplace(d, device_async_resource_ref{resources[d]});
    }
  }
};

read_targets& targets()
{
  static read_targets instance;
  return instance;
}

/** What the threads of one run share. */
struct run_state {
  explicit run_state(int threads) : phase{threads} {}
  std::barrier<> phase;
  std::atomic<std::int64_t> map_ns{0};
  std::atomic<std::int64_t> baseline_ns{0};
};

std::int64_t elapsed_ns(clock_type::time_point start)
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count();
}

void map_read(benchmark::State& state)
{
  static std::optional<run_state> shared;
  // The loop's start waits for every thread, so the others see this before their first use.
  if (state.thread_index() == 0) { shared.emplace(state.threads()); }
  auto& t                  = targets();
  int const first          = state.thread_index() % map_devices;
  std::int64_t map_ns      = 0;
  std::int64_t baseline_ns = 0;

  for (auto _ : state) {
    auto start = clock_type::now();
    for (int i = 0; i < reads_per_phase; ++i) {
      auto ref = t.map.get((first + i) % map_devices);
      benchmark::DoNotOptimize(ref);
    }
    map_ns += elapsed_ns(start);
    shared->phase.arrive_and_wait();

    start = clock_type::now();
    for (int i = 0; i < reads_per_phase; ++i) {
      std::lock_guard lock{t.mutex};
      auto ref = t.baseline.find((first + i) % map_devices)->second;
      benchmark::DoNotOptimize(ref);
    }
    baseline_ns += elapsed_ns(start);
    shared->phase.arrive_and_wait();
  }

  shared->map_ns.fetch_add(map_ns);
  shared->baseline_ns.fetch_add(baseline_ns);
  shared->phase.arrive_and_wait();
  if (state.thread_index() == 0) {
    // Counters of all threads are summed: only thread 0 reports.
    double const reads = static_cast<double>(state.iterations()) * reads_per_phase *
                         static_cast<double>(state.threads());
    double const map_per_read         = static_cast<double>(shared->map_ns.load()) / reads;
    double const baseline_per_read    = static_cast<double>(shared->baseline_ns.load()) / reads;
    state.counters["map_ns_per_read"] = map_per_read;
    state.counters["mutex_map_ns_per_read"] = baseline_per_read;
    state.counters["mutex_map_over_map"]    = baseline_per_read / map_per_read;
  }
}
BENCHMARK(map_read)->Threads(1)->Threads(4)->Threads(16)->UseRealTime();

// ---- Needs a GPU: registered by bench_main.cpp once it found a device -------------------------

void get_current_device_resource_ref(benchmark::State& state)
{
  rmm_next_bench::guarded(state, [&] {
    (void)rmm_next::get_current_device_resource_ref();  // the initial resource exists
    for (auto _ : state) {
      auto ref = rmm_next::get_current_device_resource_ref();
      benchmark::DoNotOptimize(ref);
    }
  });
}

void get_per_device_resource_ref(benchmark::State& state)
{
  rmm_next_bench::guarded(state, [&] {
    int device{};
    rmm_next_bench::check(cudaGetDevice(&device), "cudaGetDevice");
    (void)rmm_next::get_per_device_resource_ref(device);
    for (auto _ : state) {
      auto ref = rmm_next::get_per_device_resource_ref(device);
      benchmark::DoNotOptimize(ref);
    }
  });
}

/** What RMM's get_current_device_resource_ref does: cudaGetDevice, then a mutex-guarded lookup. */
void mutex_map_get_current(benchmark::State& state)
{
  auto& t = targets();
  for (auto _ : state) {
    int device{};
    benchmark::DoNotOptimize(cudaGetDevice(&device));
    std::lock_guard lock{t.mutex};
    auto ref = t.baseline.find(device % map_devices)->second;
    benchmark::DoNotOptimize(ref);
  }
}

void bare_cuda_get_device(benchmark::State& state)
{
  for (auto _ : state) {
    int device{};
    benchmark::DoNotOptimize(cudaGetDevice(&device));
    benchmark::DoNotOptimize(device);
  }
}

void register_gpu_benchmarks()
{
  for (auto* b :
       {benchmark::RegisterBenchmark("get_current_device_resource_ref",
                                     get_current_device_resource_ref),
        benchmark::RegisterBenchmark("mutex_map_get_current", mutex_map_get_current),
        benchmark::RegisterBenchmark("get_per_device_resource_ref", get_per_device_resource_ref),
        benchmark::RegisterBenchmark("cudaGetDevice", bare_cuda_get_device)}) {
    b->Threads(1)->Threads(4)->Threads(16)->UseRealTime()->MinTime(rmm_next_bench::min_time());
  }
}

rmm_next_bench::register_at_start const gpu_registration{&register_gpu_benchmarks};

}  // namespace
