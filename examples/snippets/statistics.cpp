/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/statistics_and_nvtx.md. Each block between "// [name]" and
// "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks it), and this
// program runs them all on a GPU (exit 77 without one) and checks the numbers the docs state.
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/statistics_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>

// [per-library]
namespace mylib {

/** The memory mylib allocates, counted apart from everything else in the process. */
class memory {
 public:
  /** Counts what mylib allocates from `upstream` (the application's choice). */
  explicit memory(rmm_next::device_async_resource_ref upstream) : stats_{upstream} {}

  /** What mylib's code allocates from. */
  rmm_next::device_async_resource_ref resource() { return stats_; }

  /** What mylib has allocated: now, at the peak, in total. */
  rmm_next::allocation_statistics statistics() const { return stats_.statistics(); }

 private:
  rmm_next::statistics_adaptor<rmm_next::device_async_resource_ref> stats_;
};

}  // namespace mylib
// [per-library end]

namespace {

using rmm_next_test::expect;

void counting(cudaStream_t stream)
{
  // [statistics-adaptor]
  rmm_next::statistics_adaptor stats{rmm_next::async_device_resource{}};
  void* p = stats.allocate(stream, 1 << 20);  // counted from here ...
  void* q = stats.allocate_sync(4096);
  stats.deallocate(stream, p, 1 << 20);  // ... to here

  rmm_next::allocation_statistics const s = stats.statistics();
  std::printf("bytes: %lld now, %lld at the peak, %lld in total; allocations: %lld now\n",
              static_cast<long long>(s.bytes.current),         // 4096
              static_cast<long long>(s.bytes.peak),            // 1052672
              static_cast<long long>(s.bytes.total),           // 1052672
              static_cast<long long>(s.allocations.current));  // 1

  stats.reset_peak();  // the peaks start again from the current values
  stats.deallocate_sync(q, 4096);
  // [statistics-adaptor end]
  expect(s.bytes.current == 4096 && s.bytes.peak == 1052672 && s.bytes.total == 1052672,
         "statistics-adaptor: bytes");
  expect(s.allocations.current == 1 && s.allocations.peak == 2 && s.allocations.total == 2,
         "statistics-adaptor: allocations");
  expect(stats.statistics().bytes.peak == 4096, "statistics-adaptor: peak after reset_peak");
}

void nested(cudaStream_t stream)
{
  rmm_next::statistics_adaptor stats{rmm_next::async_device_resource{}};
  void* kept = stats.allocate(stream, 1 << 20);
  // [nested-counters]
  // One phase of a program, measured on its own (RMM's push_counters / pop_counters).
  stats.push_counters();  // a level at zero; returns the counters below it
  void* a = stats.allocate(stream, 4096);
  void* b = stats.allocate(stream, 8192);
  stats.deallocate(stream, a, 4096);
  auto const [bytes, allocations] = stats.pop_counters();  // the phase, now added below
  std::printf("the phase: %lld bytes at the peak, %lld allocations, %lld bytes still held\n",
              static_cast<long long>(bytes.peak),         // 12288
              static_cast<long long>(allocations.total),  // 2
              static_cast<long long>(bytes.current));     // 8192
  stats.deallocate(stream, b, 8192);
  // [nested-counters end]
  expect(bytes.peak == 12288 && allocations.total == 2 && bytes.current == 8192,
         "nested-counters: the phase");
  expect(stats.statistics().bytes.peak == (1 << 20) + 12288, "nested-counters: folded below");
  stats.deallocate(stream, kept, 1 << 20);
}

void per_library(cudaStream_t stream)
{
  // [per-library-use]
  mylib::memory mine{rmm_next::get_current_device_resource_ref()};

  rmm_next::device_async_resource_ref mr = mine.resource();
  void* p                                = mr.allocate(stream, 256, 256);
  std::printf("mylib holds %lld bytes\n", static_cast<long long>(mine.statistics().bytes.current));
  mr.deallocate(stream, p, 256, 256);
  // [per-library-use end]
  expect(mine.statistics().bytes.total == 256 && mine.statistics().bytes.current == 0,
         "per-library: counts");
}

void nvtx(cudaStream_t stream)
{
  // [nvtx]
  // Nothing to write: run under `nsys profile --trace=cuda,nvtx` and these two calls show as
  // ranges in the rmm_next domain, "statistics_adaptor::allocate" around
  // "async_device_resource::allocate", and compute-sanitizer's leak reports name the 1 MiB at p
  // after the resource ("async_device_resource dev 0 pool 0x...").
  rmm_next::statistics_adaptor stats{rmm_next::async_device_resource{}};
  void* p = stats.allocate(stream, 1 << 20);
  stats.deallocate(stream, p, 1 << 20);
  // [nvtx end]
  expect(stats.statistics().allocations.total == 1, "nvtx: one allocation");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    std::printf("cudaStreamCreate failed\n");
    return 1;
  }
  counting(stream);
  nested(stream);
  per_library(stream);
  nvtx(stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess) {
    std::printf("stream teardown failed\n");
    return 1;
  }
  if (rmm_next_test::failures() != 0) { return 1; }
  std::printf("snippets: all ran\n");
  return 0;
}
