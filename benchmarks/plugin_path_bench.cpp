/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// What PyTorch pays per allocation under rmm_next.torch.use(): one rmm_next_torch_alloc +
// rmm_next_torch_free pair through the allocator plugin's C interface (what PyTorch's pluggable
// allocator calls), on the stream PyTorch uses by default (the legacy stream), real time per pair:
//
//   plugin_path/torch_pair/<cache>/<bytes>   <cache>: none (the device's pool), segment_cache,
//                                            thread_cache
//   plugin_path/torch_pair_cold/<cache>/<bytes>
//                                            the same pair with the host's caches cold (other
//                                            data written between pairs, as a training step's
//                                            host work does: a cold timed_pairs); the pair alone
//                                            is timed
//
// The difference between torch_pair/segment_cache and hit_path_bench's segment_cache pair is the
// plugin's own bookkeeping (the live-pointer registry, counters, capture queries); hit_path_bench's
// raw_pool/legacy is the driver pool's own pair, for scale.

#include "support/bench_support.hpp"

#include <rmm_next/allocator_plugin.h>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace {

using namespace rmm_next_bench;

void check_c(int status, char const* what)
{
  if (status != 0) {
    throw std::runtime_error{std::string{what} + " failed: " + rmm_next_last_error()};
  }
}

/** @brief Puts `cache` in front of the device's resource for one benchmark, and takes it out. */
class cache_scope {
 public:
  cache_scope(std::string const& cache, int device) : cache_{cache}, device_{device}
  {
    if (cache_ == "segment_cache") {
      check_c(rmm_next_enable_segment_cache(device_, nullptr), "rmm_next_enable_segment_cache");
    } else if (cache_ == "thread_cache") {
      check_c(rmm_next_enable_thread_cache(device_, nullptr), "rmm_next_enable_thread_cache");
    }
  }
  cache_scope(cache_scope const&)            = delete;
  cache_scope& operator=(cache_scope const&) = delete;
  ~cache_scope()
  {
    if (cache_ == "segment_cache") { (void)rmm_next_disable_segment_cache(device_); }
    if (cache_ == "thread_cache") { (void)rmm_next_disable_thread_cache(device_); }
  }

 private:
  std::string cache_;
  int device_;
};

void register_all()
{
  for (bool const cold : {false, true}) {
    for (std::size_t const bytes : latency_sizes()) {
      for (char const* cache : {"none", "segment_cache", "thread_cache"}) {
        std::string const name = std::string{"plugin_path/"} +
                                 (cold ? "torch_pair_cold/" : "torch_pair/") + cache + "/" +
                                 std::to_string(bytes);
        auto* const b =
          benchmark::RegisterBenchmark(name.c_str(), [cache, bytes, cold](benchmark::State& state) {
            guarded(state, [&] {
              int device = 0;
              check(cudaGetDevice(&device), "cudaGetDevice");
              cache_scope const scope{cache, device};
              auto const size = static_cast<ssize_t>(bytes);
              timed_pairs(
                state,
                [device, size](std::size_t, cudaStream_t stream) {
                  void* ptr = rmm_next_torch_alloc(size, device, stream);
                  if (ptr == nullptr) { throw std::runtime_error{rmm_next_last_error()}; }
                  benchmark::DoNotOptimize(ptr);
                  rmm_next_torch_free(ptr, size, device, stream);
                },
                bytes,
                cudaStreamLegacy,
                cold);
            });
          });
        timed_as(b, cold);
      }
    }
  }
}

register_at_start const registration{&register_all};

}  // namespace
