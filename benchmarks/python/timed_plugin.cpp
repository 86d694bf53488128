/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A stopwatch around the allocator plugin's PyTorch entry points, for train_steps.py's way
// `timed`: PyTorch's CUDAPluggableAllocator calls timed_alloc / timed_free, which call
// rmm_next_torch_alloc / rmm_next_torch_free of the plugin named to timed_bind, and add the steady
// clock's time around each call to totals per thread kind, read back with timed_totals. So the host
// time a training step spends inside rmm-next can be told from the time it spends in PyTorch around
// it. Each call pays two clock reads more (timed_clock_ns tells their cost).
//
//   nvcc -O2 -shared -Xcompiler -fPIC timed_plugin.cpp -o timed_plugin.so -ldl

#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace {

using alloc_fn = void* (*)(ssize_t, int, cudaStream_t);
using free_fn  = void (*)(void*, ssize_t, int, cudaStream_t);

alloc_fn plugin_alloc{};
free_fn plugin_free{};

// [0]: the first thread that called (the Python thread), [1]: every other thread (autograd's).
std::atomic<std::uint64_t> alloc_ns[2], alloc_calls[2], free_ns[2], free_calls[2];
std::atomic<std::thread::id> first_thread{};

int thread_kind()
{
  thread_local int const kind = [] {
    std::thread::id expected{};
    std::thread::id const me = std::this_thread::get_id();
    return first_thread.compare_exchange_strong(expected, me) || expected == me ? 0 : 1;
  }();
  return kind;
}

std::uint64_t now_ns()
{
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count());
}

}  // namespace

extern "C" void* timed_alloc(ssize_t size, int device, cudaStream_t stream)
{
  int const kind            = thread_kind();
  std::uint64_t const begin = now_ns();
  void* const ptr           = plugin_alloc(size, device, stream);
  alloc_ns[kind].fetch_add(now_ns() - begin, std::memory_order_relaxed);
  alloc_calls[kind].fetch_add(1, std::memory_order_relaxed);
  return ptr;
}

extern "C" void timed_free(void* ptr, ssize_t size, int device, cudaStream_t stream)
{
  int const kind            = thread_kind();
  std::uint64_t const begin = now_ns();
  plugin_free(ptr, size, device, stream);
  free_ns[kind].fetch_add(now_ns() - begin, std::memory_order_relaxed);
  free_calls[kind].fetch_add(1, std::memory_order_relaxed);
}

/** @brief Times the plugin at `path` (loaded already, or now); call before the first allocation.
 * @return 1 when both entry points were found. */
extern "C" int timed_bind(char const* path)
{
  void* const library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) { return 0; }
  plugin_alloc = reinterpret_cast<alloc_fn>(dlsym(library, "rmm_next_torch_alloc"));
  plugin_free  = reinterpret_cast<free_fn>(dlsym(library, "rmm_next_torch_free"));
  return plugin_alloc != nullptr && plugin_free != nullptr ? 1 : 0;
}

/** @brief out[0..7]: alloc ns, alloc calls, free ns, free calls of the first thread, then of the
 * others. @return 1 when bound. */
extern "C" int timed_totals(std::uint64_t* out)
{
  for (int k = 0; k < 2; ++k) {
    out[4 * k + 0] = alloc_ns[k].load();
    out[4 * k + 1] = alloc_calls[k].load();
    out[4 * k + 2] = free_ns[k].load();
    out[4 * k + 3] = free_calls[k].load();
  }
  return plugin_alloc != nullptr && plugin_free != nullptr ? 1 : 0;
}

/** @brief The cost of one clock read, ns: the mean over `n` reads. */
extern "C" double timed_clock_ns(int n)
{
  std::uint64_t const begin = now_ns();
  std::uint64_t sink        = 0;
  for (int i = 0; i < n; ++i) {
    sink += now_ns();
  }
  std::uint64_t const spent = now_ns() - begin;
  return sink == 1 ? 0.0 : static_cast<double>(spent) / n;
}
