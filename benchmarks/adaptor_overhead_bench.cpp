/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// What each adaptor costs over its upstream: one stream-ordered allocate + free pair through the
// adaptor against the same pair on the upstream it wraps, in alternating blocks on one stream.
//
//   adaptor_overhead/<adaptor>/<bytes>   counters upstream_ns, adaptor_ns (medians over blocks,
//                                        per pair) and ratio = adaptor_ns / upstream_ns
//
// The upstream is async_device_resource over the current pool, except for prefetch, which wraps
// async_managed_resource. The adaptors, each set up as a user would:
//   statistics          counts bytes and allocations
//   aligned             4 KiB alignment from 64 KiB on (the default threshold)
//   limiting            a limit far above what the benchmark uses
//   tracking            the live list without stack traces; tracking_stacks with them
//   logging             a CSV line per call, to a temporary file
//   failure_callback    a callback that is never called (no out-of-memory)
//   segment_cache       default options: every pair after the first is a hit
//   thread_cache        default options (blocks up to 1 MiB)
//   prefetch            a cudaMemPrefetchAsync to the device after each allocation;
//                       prefetch_by_hand compares it with the upstream pair plus the same
//                       cudaMemPrefetchAsync written by hand, which is the adaptor's own cost.

#include "support/bench_support.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/failure_callback_adaptor.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/prefetch_adaptor.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/statistics_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <unistd.h>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

using namespace rmm_next_bench;
using rmm_next::async_device_resource;
using rmm_next::async_managed_resource;

constexpr int paired_iterations = 200;

/** @brief One pair through `r`, as a callable for paired_blocks. */
template <class Resource>
auto pair_of(Resource& r)
{
  return [&r](std::size_t bytes, cudaStream_t stream) { wrapped_pair(r, bytes, stream); };
}

/** @brief Registers adaptor_overhead/<name>/<bytes> for each latency size. */
template <class Upstream, class Adaptor>
void register_adaptor(std::string const& name, Upstream* upstream, Adaptor* adaptor)
{
  for (std::size_t const bytes : latency_sizes()) {
    benchmark::RegisterBenchmark(
      ("adaptor_overhead/" + name + "/" + std::to_string(bytes)).c_str(),
      [upstream, adaptor](benchmark::State& state, std::size_t n) {
        guarded(state, [&] {
          auto baseline  = pair_of(*upstream);
          auto candidate = pair_of(*adaptor);
          paired_blocks(
            state, thread_stream(0), n, baseline, candidate, "upstream_ns", "adaptor_ns");
        });
      },
      bytes)
      ->UseRealTime()
      ->Iterations(paired_iterations)
      ->Unit(benchmark::kMicrosecond)
      ->Setup(&reset_shared_pools);
  }
}

/** @brief A file in the temporary directory, removed at exit. */
std::string const& log_path()
{
  static struct temporary_file {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("rmm_next_adaptor_overhead_" + std::to_string(::getpid()) + ".csv"))
                         .string();
    ~temporary_file() { std::remove(path.c_str()); }
  } const file;
  return file.path;
}

void register_all()
{
  auto* device = shared_resource<async_device_resource>();
  if (device != nullptr) {
    // The adaptors live as long as the process, like the shared resources.
    static rmm_next::statistics_adaptor<async_device_resource> statistics{*device};
    static rmm_next::aligned_adaptor<async_device_resource> aligned{*device, 4096};
    static rmm_next::limiting_adaptor<async_device_resource> limiting{*device,
                                                                      std::size_t{1} << 40};
    static rmm_next::tracking_adaptor<async_device_resource> tracking{*device};
    static rmm_next::tracking_adaptor<async_device_resource> tracking_stacks{
      *device, rmm_next::tracking_options{.stack_traces = true}};
    static rmm_next::logging_adaptor<async_device_resource> logging{*device, log_path()};
    static rmm_next::failure_callback_adaptor<async_device_resource> failure_callback{
      *device, [](std::size_t, cuda::stream_ref, std::size_t) { return false; }};
    register_adaptor("statistics", device, &statistics);
    register_adaptor("aligned", device, &aligned);
    register_adaptor("limiting", device, &limiting);
    register_adaptor("tracking", device, &tracking);
    register_adaptor("tracking_stacks", device, &tracking_stacks);
    register_adaptor("logging", device, &logging);
    register_adaptor("failure_callback", device, &failure_callback);
    static rmm_next::segment_cache_adaptor<async_device_resource> segment_cache{*device};
    static rmm_next::thread_cache_adaptor<async_device_resource> thread_cache{*device};
    register_adaptor("segment_cache", device, &segment_cache);
    register_adaptor("thread_cache", device, &thread_cache);
  }
  auto* managed = shared_resource<async_managed_resource>();
  if (managed != nullptr) {
    int device_id = 0;
    check(cudaGetDevice(&device_id), "cudaGetDevice");
    static rmm_next::prefetch_adaptor<async_managed_resource> prefetch{*managed, device_id};
    register_adaptor("prefetch", managed, &prefetch);
    // The upstream pair plus the prefetch written by hand: what the adaptor does, without it.
    static struct by_hand {
      async_managed_resource* upstream;
      int device;
      void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
      {
        void* ptr = upstream->allocate(stream, bytes, alignment);
        check(rmm_next::detail::prefetch_to_device(ptr, bytes, device, stream.get()),
              "cudaMemPrefetchAsync");
        return ptr;
      }
      void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t alignment)
      {
        upstream->deallocate(stream, ptr, bytes, alignment);
      }
    } hand{managed, device_id};
    register_adaptor("prefetch_by_hand", &hand, &prefetch);
  }
}

register_at_start const registration{&register_all};

}  // namespace
