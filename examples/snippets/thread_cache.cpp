/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/thread_cache.md. Each block between "// [name]" and "// [name end]" is
// quoted there verbatim (tests/docs/check_snippets.py checks it), and this program runs them all
// on a GPU (exit 77 without one) and checks what the docs state.
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>

namespace {

using rmm_next_test::expect;

void adaptor(cudaStream_t stream)
{
  // [adaptor]
  rmm_next::thread_cache_adaptor cache{rmm_next::async_device_resource{}};

  void* p = cache.allocate(stream, 1000);  // a miss: from the driver pool
  cache.deallocate(stream, p, 1000);       // into this thread's list for `stream`
  void* q = cache.allocate(stream, 900);   // a hit: the same 1 KiB block, no driver call
  cache.deallocate(stream, q, 900);

  rmm_next::thread_cache_statistics const st = cache.statistics();
  std::printf("hits %llu, misses %llu, cached %llu bytes\n",
              static_cast<unsigned long long>(st.hits),
              static_cast<unsigned long long>(st.misses),
              static_cast<unsigned long long>(st.cached_bytes));
  // [adaptor end]
  expect(q == p, "the second allocation reuses the block");
  expect(st.hits == 1 && st.misses == 1 && st.cached_bytes == 1024, "one hit, one miss, 1 KiB");
}

void options(cudaStream_t stream)
{
  // [options]
  rmm_next::thread_cache_options options;
  options.max_cached_bytes_per_thread = 64 << 20;  // default 32 MiB
  options.max_block_size              = 4 << 20;   // default 1 MiB
  rmm_next::thread_cache_adaptor cache{rmm_next::async_device_resource{}, options};
  // [options end]
  void* p = cache.allocate(stream, 3 << 20);
  cache.deallocate(stream, p, 3 << 20);
  expect(cache.statistics().cached_bytes == (3u << 20), "a 3 MiB block is cached");
  expect(cache.flush() == (3u << 20), "flush returns it");
}

void process_wide(cudaStream_t stream)
{
  // [process-wide]
  rmm_next::enable_thread_cache(0);  // every user of device 0's process-wide resource

  rmm_next::device_async_resource_ref mr = rmm_next::get_per_device_resource_ref(0);
  void* p                                = mr.allocate(stream, 4096);  // through the cache
  mr.deallocate(stream, p, 4096);
  // [process-wide end]
  expect(mr.allocate(stream, 4096) == p, "the process-wide ref reuses the block");
  mr.deallocate(stream, p, 4096);
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) { return 1; }
  adaptor(stream);
  options(stream);
  process_wide(stream);
  (void)cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  if (rmm_next_test::failures() == 0) { std::printf("thread_cache snippets: all checks passed\n"); }
  return rmm_next_test::failures() == 0 ? 0 : 1;
}
