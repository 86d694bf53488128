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
// threads) and mutex_map_over_map (how many times longer a baseline read takes). The barriers are
// outside the timed phases; the iteration time Google Benchmark prints includes them (ignore it).
//
// per_call/<what>/threads:<n> (needs a GPU): the cost of one call on one thread while <n> threads
// make the same call, as counter ns_per_call (each thread times its own batches of calls; the
// mean over the threads). <what>:
//   get_current_device_resource_ref  the legacy free function (its one CUDA call: cuCtxGetCurrent)
//   mutex_map_get_current            what RMM does: cudaGetDevice + a mutex-guarded std::map
//   get_per_device_resource_ref      the same map read with the device given: no CUDA call
//   cudaGetDevice                    the bare runtime call
//   cuCtxGetCurrent                  the driver call under it (through the runtime's entry-point
//                                    lookup, so that nothing links libcuda)
//   cudaGetDevice_no_context         cudaGetDevice on threads with no current CUDA context
//
// Every thread but the last variant first makes the device current (cudaSetDevice) and calls
// once, as an application thread that uses the GPU has done. Earlier versions timed Google
// Benchmark's fresh worker threads, on which no context was current, and read Google Benchmark's
// iteration time as the cost of a call: that time is the wall time of one thread divided by the
// iterations of all threads (with 16 threads, a 2 ns call shows as 0.1 ns); and on a thread
// without a current context cudaGetDevice most likely takes a slow path of the runtime (the
// 0.7-1.2 us once reported), which cudaGetDevice_no_context measures.

#include "../tests/support/fake_resource.hpp"
#include "support/bench_support.hpp"

#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <benchmark/benchmark.h>
#include <cuda.h>  // types only: the driver calls are looked up through the runtime
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
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

constexpr int calls_per_batch = 256;

/** How a thread meets the CUDA context before its timed calls. */
enum class context_mode {
  current,  ///< cudaSetDevice(device): the primary context is current, as in a GPU thread
  none,     ///< no context current on the thread (cuCtxSetCurrent(nullptr))
};

/** The driver calls, looked up through the runtime (rmm-next never links libcuda). */
struct driver_calls {
  PFN_cuCtxGetCurrent_v4000 ctx_get_current{};
  PFN_cuCtxSetCurrent_v4000 ctx_set_current{};

  static driver_calls const& get()
  {
    static driver_calls const calls = [] {
      driver_calls c;
      auto lookup = [](char const* symbol, void** fn) {
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion(symbol, fn, 4000, cudaEnableDefault, &found) !=
              cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
          (void)cudaGetLastError();
          *fn = nullptr;
        }
      };
      lookup("cuCtxGetCurrent", reinterpret_cast<void**>(&c.ctx_get_current));
      lookup("cuCtxSetCurrent", reinterpret_cast<void**>(&c.ctx_set_current));
      return c;
    }();
    return calls;
  }
};

/**
 * Times `call` on this thread: batches of calls_per_batch calls, each batch timed with
 * steady_clock, so the thread's own time per call is known whatever the other threads do.
 * Counter ns_per_call: that time, averaged over the threads.
 */
template <class Call>
void per_call(benchmark::State& state, int device, context_mode mode, Call call)
{
  rmm_next_bench::guarded(state, [&] {
    rmm_next_bench::check(cudaSetDevice(device), "cudaSetDevice");
    if (mode == context_mode::none) {
      auto const set_current = driver_calls::get().ctx_set_current;
      if (set_current == nullptr || set_current(nullptr) != CUDA_SUCCESS) {
        state.SkipWithError("cuCtxSetCurrent is not available from the driver");
        return;
      }
    }
    call();  // warm-up: the thread's first call, off the clock
    double ns = 0.0;
    for (auto _ : state) {
      auto const start = clock_type::now();
      for (int i = 0; i < calls_per_batch; ++i) {
        call();
      }
      ns += static_cast<double>(elapsed_ns(start));
    }
    // Leave the thread as it found it (the main thread runs later benchmarks).
    rmm_next_bench::check(cudaSetDevice(device), "cudaSetDevice");
    double const calls = static_cast<double>(state.iterations()) * calls_per_batch;
    state.SetItemsProcessed(static_cast<std::int64_t>(calls));
    state.counters["ns_per_call"] =
      benchmark::Counter(calls > 0 ? ns / calls : 0.0, benchmark::Counter::kAvgThreads);
  });
}

void register_gpu_benchmarks()
{
  int device{};
  rmm_next_bench::check(cudaGetDevice(&device), "cudaGetDevice");
  (void)rmm_next::get_current_device_resource_ref();  // the initial resource exists

  auto add = [device](char const* what, context_mode mode, auto call) {
    auto* b = benchmark::RegisterBenchmark(
      (std::string{"per_call/"} + what).c_str(),
      [device, mode, call](benchmark::State& state) { per_call(state, device, mode, call); });
    b->Threads(1)->Threads(4)->Threads(16)->UseRealTime()->MinTime(rmm_next_bench::min_time());
  };

  add("get_current_device_resource_ref", context_mode::current, [] {
    auto ref = rmm_next::get_current_device_resource_ref();
    benchmark::DoNotOptimize(ref);
  });
  add("mutex_map_get_current", context_mode::current, [&t = targets()] {
    // What RMM's get_current_device_resource_ref does: cudaGetDevice, then a guarded lookup.
    int current{};
    benchmark::DoNotOptimize(cudaGetDevice(&current));
    std::lock_guard lock{t.mutex};
    auto ref = t.baseline.find(current % map_devices)->second;
    benchmark::DoNotOptimize(ref);
  });
  add("get_per_device_resource_ref", context_mode::current, [device] {
    auto ref = rmm_next::get_per_device_resource_ref(device);
    benchmark::DoNotOptimize(ref);
  });
  add("cudaGetDevice", context_mode::current, [] {
    int current{};
    benchmark::DoNotOptimize(cudaGetDevice(&current));
    benchmark::DoNotOptimize(current);
  });
  if (auto const get_current = driver_calls::get().ctx_get_current) {
    add("cuCtxGetCurrent", context_mode::current, [get_current] {
      CUcontext ctx{};
      benchmark::DoNotOptimize(get_current(&ctx));
      benchmark::DoNotOptimize(ctx);
    });
  }
  add("cudaGetDevice_no_context", context_mode::none, [] {
    int current{};
    benchmark::DoNotOptimize(cudaGetDevice(&current));
    benchmark::DoNotOptimize(current);
  });
}

rmm_next_bench::register_at_start const gpu_registration{&register_gpu_benchmarks};

}  // namespace
