/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Latency of allocate_sync + deallocate_sync, with the GPU idle and with a long kernel running on
// another non-blocking stream. allocate_sync waits only for its own allocation, so the kernel
// should not show in the latency.
//
// allocate_sync/<resource>/<variant>/<load>/<bytes>
//   variant  raw:      cudaMallocFromPoolAsync on a stream of our own + cudaStreamSynchronize,
//                      then cudaFreeAsync on it (what allocate_sync/deallocate_sync do by hand)
//            resource: resource.allocate_sync + resource.deallocate_sync
//   load     idle, or busy: a one-thread kernel spins (bounded by %globaltimer, stopped through a
//            host flag when the loop ends) on another stream; counter kernel_running = 1 when it
//            was still running at the end of the timed loop.

#include "support/bench_support.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace {

using namespace rmm_next_bench;

/** Upper bound of one spin, so that a lost stop flag cannot hang the GPU. */
constexpr std::uint64_t max_spin_ns = 5'000'000'000ULL;

__device__ std::uint64_t global_timer_ns()
{
  std::uint64_t t{};
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/** flags[0]: set by the host to stop; flags[1]: set by the kernel once it runs. */
__global__ void spin_kernel(int volatile* flags, std::uint64_t max_ns)
{
  flags[1] = 1;
  __threadfence_system();
  std::uint64_t const start = global_timer_ns();
  while (flags[0] == 0 && global_timer_ns() - start < max_ns) {
    __nanosleep(1000);
  }
}

/** @brief A spinning kernel on a stream of its own while this object lives. */
class busy_gpu {
 public:
  busy_gpu()
  {
    void* flags{};
    check(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    host_flags_    = static_cast<int volatile*>(flags);
    host_flags_[0] = 0;
    host_flags_[1] = 0;
    int* device_flags{};
    check(cudaHostGetDevicePointer(
            reinterpret_cast<void**>(&device_flags), const_cast<int*>(host_flags_), 0),
          "cudaHostGetDevicePointer");
    spin_kernel<<<1, 1, 0, stream_.get()>>>(device_flags, max_spin_ns);
    check(cudaGetLastError(), "spin_kernel launch");
    // Wait (at most a second) until it runs, so that the first timed call sees a busy GPU.
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{1};
    while (host_flags_[1] == 0 && std::chrono::steady_clock::now() < deadline) {}
  }
  busy_gpu(busy_gpu const&)            = delete;
  busy_gpu& operator=(busy_gpu const&) = delete;
  ~busy_gpu()
  {
    host_flags_[0] = 1;
    (void)cudaStreamSynchronize(stream_.get());
    (void)cudaFreeHost(const_cast<int*>(host_flags_));
  }

  /** @brief True while the kernel has not finished. */
  [[nodiscard]] bool running() const { return cudaStreamQuery(stream_.get()) == cudaErrorNotReady; }

 private:
  stream stream_;
  int volatile* host_flags_{};
};

template <class Resource>
void allocate_sync(
  benchmark::State& state, Resource* resource, bool raw, bool busy, std::size_t bytes)
{
  guarded(state, [&] {
    stream const own;  // the raw variant's stream (the resource has its own)
    cudaMemPool_t const pool = resource->pool_handle();
    auto pair                = [&] {
      if (raw) {
        void* p{};
        check(cudaMallocFromPoolAsync(&p, bytes, pool, own.get()), "cudaMallocFromPoolAsync");
        check(cudaStreamSynchronize(own.get()), "cudaStreamSynchronize");
        benchmark::DoNotOptimize(p);
        check(cudaFreeAsync(p, own.get()), "cudaFreeAsync");
      } else {
        void* p = resource->allocate_sync(bytes);
        benchmark::DoNotOptimize(p);
        resource->deallocate_sync(p, bytes);
      }
    };
    pair();  // warm-up
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    std::optional<busy_gpu> load;
    if (busy) { load.emplace(); }
    for (auto _ : state) {
      pair();
    }
    if (load) { state.counters["kernel_running"] = load->running() ? 1.0 : 0.0; }
    load.reset();
    check(cudaStreamSynchronize(own.get()), "cudaStreamSynchronize");
    state.SetItemsProcessed(state.iterations());
  });
}

void register_all()
{
  constexpr std::size_t bytes = std::size_t{64} << 10;
  for_each_resource([&](auto& resource) {
    using resource_type = std::remove_reference_t<decltype(resource)>;
    for (bool const raw : {true, false}) {
      for (bool const busy : {false, true}) {
        std::string const name =
          std::string{"allocate_sync/"} + resource_traits<resource_type>::name + "/" +
          (raw ? "raw" : "resource") + "/" + (busy ? "busy" : "idle") + "/" + std::to_string(bytes);
        benchmark::RegisterBenchmark(
          name.c_str(), &allocate_sync<resource_type>, &resource, raw, busy, bytes)
          ->UseRealTime()
          ->MinTime(min_time())
          ->Unit(benchmark::kMicrosecond);
      }
    }
  });
}

register_at_start const registration{&register_all};

}  // namespace
