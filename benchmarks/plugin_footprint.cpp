/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// plugin_footprint LIBRARY [PAIRS [cold]] - PyTorch's allocation and free pairs of 64 KiB through
// the allocator plugin with its segment cache, on the CPU: the plugin is dlopen'ed (as Python's
// ctypes does, so its thread-locals are found as they are under PyTorch) over the fake CUDA runtime
// of tests/support, which this program exports to it. After 20,000 pairs (the cache's fence
// interval grown to its steady value), PAIRS more (default 200), each call after 8 MiB of other
// data was written when `cold` is given, as a training step's host work evicts the caller's caches
// between two allocations. benchmarks/plugin_footprint.sh runs it under valgrind: instructions per
// pair (callgrind) and the cache lines a cold pair touches (cachegrind), numbers that do not move
// with the machine. Exits 1 unless every measured allocation was a hit of the segment cache.
//
// With RMM_NEXT_FOOTPRINT_STACKED=1 the plugin's thread cache is put in front of the segment cache
// (configure(thread_cache=True, segment_cache=True)): then every measured allocation must be the
// thread cache's, none reaching the segment cache.
//
// Over the fake runtime the cache's fences are refused (it makes no stream for them), so every
// free tries one: that adds the same lines and instructions to every build it compares.

#include "support/fake_cuda_runtime.hpp"

#include <rmm_next/allocator_plugin.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::vector<char> other_data(std::size_t{8} << 20);

/** @brief Writes one byte of every cache line of 8 MiB: what the caller had cached goes. */
[[gnu::noinline]] void evict()
{
  for (std::size_t i = 0; i < other_data.size(); i += 64) {
    other_data[i] = static_cast<char>(other_data[i] + 1);
  }
}

template <class F>
F symbol(void* library, char const* name)
{
  void* const found = dlsym(library, name);
  if (found == nullptr) {
    std::fprintf(stderr, "plugin_footprint: %s not found: %s\n", name, dlerror());
    std::exit(2);
  }
  return reinterpret_cast<F>(found);
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: plugin_footprint LIBRARY [PAIRS [cold]]\n");
    return 64;
  }
  rmm_next::test::fake_cuda::reset(1);
  void* const library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "plugin_footprint: %s\n", dlerror());
    return 2;
  }
  auto const enable = symbol<int (*)(int, rmm_next_segment_cache_options const*)>(
    library, "rmm_next_enable_segment_cache");
  auto const enable_thread_cache = symbol<int (*)(int, rmm_next_thread_cache_options const*)>(
    library, "rmm_next_enable_thread_cache");
  auto const stats = symbol<int (*)(int, rmm_next_segment_cache_statistics*)>(
    library, "rmm_next_get_segment_cache_statistics");
  auto const alloc = symbol<void* (*)(ssize_t, int, cudaStream_t)>(library, "rmm_next_torch_alloc");
  auto const free =
    symbol<void (*)(void*, ssize_t, int, cudaStream_t)>(library, "rmm_next_torch_free");
  if (enable(0, nullptr) != 0) {
    std::fprintf(stderr, "plugin_footprint: the segment cache was refused\n");
    return 2;
  }
  char const* const stacked_env = std::getenv("RMM_NEXT_FOOTPRINT_STACKED");
  bool const stacked            = stacked_env != nullptr && std::string{stacked_env} == "1";
  if (stacked && enable_thread_cache(0, nullptr) != 0) {
    std::fprintf(stderr, "plugin_footprint: the thread cache was refused\n");
    return 2;
  }
  cudaStream_t const stream = rmm_next::test::fake_cuda::make_stream(0);
  constexpr ssize_t bytes   = ssize_t{64} << 10;
  for (int i = 0; i < 20000; ++i) {
    free(alloc(bytes, 0, stream), bytes, 0, stream);
  }
  long const pairs = argc > 2 ? std::atol(argv[2]) : 200;
  bool const cold  = argc > 3 && std::string{argv[3]} == "cold";
  rmm_next_segment_cache_statistics before{};
  (void)stats(0, &before);
  for (long i = 0; i < pairs; ++i) {
    if (cold) { evict(); }
    void* const p = alloc(bytes, 0, stream);
    if (cold) { evict(); }
    free(p, bytes, 0, stream);
  }
  rmm_next_segment_cache_statistics after{};
  (void)stats(0, &after);
  long const hits = static_cast<long>(after.hits - before.hits);
  if (stacked) {
    long const reached = hits + static_cast<long>(after.misses - before.misses);
    std::printf("pairs %ld, segment cache calls %ld (thread cache in front)\n", pairs, reached);
    return reached == 0 ? 0 : 1;
  }
  std::printf("pairs %ld, hits %ld\n", pairs, hits);
  return hits == pairs ? 0 : 1;
}
