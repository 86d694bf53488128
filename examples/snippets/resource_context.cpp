/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/resource_context.md. Each block between "// [name]" and "// [name end]"
// is quoted there verbatim (tests/docs/check_snippets.py checks it), and this program runs them
// all on a GPU (exit 77 without one).
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_context.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

// [kinds]
namespace mylib {

/** The kinds of device-accessible memory mylib allocates. */
enum class allocation_kind {
  temporaries,  // scratch space, freed before a call returns
  results,      // memory handed back to the caller
  count_        // the number of kinds: resource_context reads it
};

}  // namespace mylib
// [kinds end]

// [count-trait]
// An enum that cannot end with count_: say how many kinds it has instead.
namespace otherlib {
enum class kind : unsigned char { input, output };
}  // namespace otherlib

template <>
inline constexpr std::size_t rmm_next::allocation_kind_count<otherlib::kind> = 2;
// [count-trait end]

// [context]
namespace mylib {

using context = rmm_next::resource_context<allocation_kind, rmm_next::device_async_resource_ref>;

/** mylib's memory per kind and device. Made on first use, destroyed at exit. */
inline context& resources()
{
  static context instance{
    // allocation_kind::temporaries: the device's current pool.
    [](int device) { return rmm_next::async_device_resource{rmm_next::current_pool{}, device}; },
    // allocation_kind::results: what the application chose process-wide.
    rmm_next::use_process_wide_resource{}};
  return instance;
}

}  // namespace mylib
// [context end]

// [host-context]
namespace mylib {

/** Memory the host writes: its ref type must say so, hence a second enum and context. */
enum class host_allocation_kind { pinned_staging, count_ };

using host_context =
  rmm_next::resource_context<host_allocation_kind, rmm_next::host_device_async_resource_ref>;

inline host_context& host_resources()
{
  static host_context instance{
    [](int device) { return rmm_next::async_pinned_resource{rmm_next::current_pool{}, device}; }};
  return instance;
}

}  // namespace mylib
// [host-context end]

namespace mylib {

// [library-use]
/** Memory handed to the caller, with the ref that frees it. */
struct result {
  rmm_next::device_async_resource_ref memory;
  void* data;
  std::size_t bytes;
};

/** Computes `n` bytes of results through a scratch buffer of the same size. */
result compute(std::size_t n, cuda::stream_ref stream)
{
  auto scratch_memory = resources().get(allocation_kind::temporaries);  // current device
  auto result_memory  = resources().get(allocation_kind::results);
  void* scratch       = scratch_memory.allocate(stream, n, rmm_next::default_alignment);
  void* data          = result_memory.allocate(stream, n, rmm_next::default_alignment);
  // ... kernels on `stream` fill scratch, then data ...
  scratch_memory.deallocate(stream, scratch, n, rmm_next::default_alignment);
  return {result_memory, data, n};  // freed through the ref it came from
}
// [library-use end]

}  // namespace mylib

namespace {

void check(cudaError_t status)
{
  if (status != cudaSuccess) { throw std::runtime_error{cudaGetErrorString(status)}; }
}

/** Runs mylib::compute on the current device and frees its result; true when it was writable. */
bool run_mylib_work(cudaStream_t stream)
{
  std::size_t const n = 1 << 20;
  cuda::stream_ref const ref{stream};
  auto r = mylib::compute(n, ref);
  check(cudaMemsetAsync(r.data, 1, n, stream));
  unsigned char last{};
  check(cudaMemcpyAsync(
    &last, static_cast<unsigned char*>(r.data) + n - 1, 1, cudaMemcpyDefault, stream));
  r.memory.deallocate(ref, r.data, r.bytes, rmm_next::default_alignment);
  check(cudaStreamSynchronize(stream));
  return last == 1;
}

bool application_override(cudaStream_t stream)
{
  // [override]
  // Device 0 only: mylib's results in managed memory, the host reads them directly.
  rmm_next::async_managed_resource managed{rmm_next::current_pool{}, 0};
  auto const previous = mylib::resources().set(mylib::allocation_kind::results, 0, managed);
  bool const ok       = run_mylib_work(stream);  // on device 0
  // Before `managed` goes away: back to what mylib had.
  mylib::resources().set(mylib::allocation_kind::results, 0, previous);
  // [override end]
  return ok;
}

bool every_device(cudaStream_t stream, int device_count)
{
  // [every-device]
  // mylib's temporaries from a pool of the application's own on every device.
  std::vector<rmm_next::async_device_resource> pools;
  pools.reserve(device_count);  // the refs set below point into the vector: never reallocate it
  for (int device = 0; device < device_count; ++device) {
    pools.emplace_back(rmm_next::pool_options{}, device);
    mylib::resources().set(mylib::allocation_kind::temporaries, device, pools.back());
  }
  bool const ok = run_mylib_work(stream);
  for (int device = 0; device < device_count; ++device) {
    mylib::resources().reset(mylib::allocation_kind::temporaries, device);  // mylib's default
  }
  // [every-device end]
  return ok && pools.front().statistics().used_bytes_high >= (1 << 20);
}

bool process_wide(cudaStream_t stream)
{
  // [process-wide]
  // use_process_wide_resource reads the process-wide ref once, on the kind's first use on a
  // device. To follow a later change, set it on the kind too.
  rmm_next::async_device_resource pool{rmm_next::pool_options{}, 0};
  auto const previous_process_wide = rmm_next::set_per_device_resource_ref(0, pool);
  auto const previous_results      = mylib::resources().set(
    mylib::allocation_kind::results, 0, rmm_next::get_per_device_resource_ref(0));
  bool const ok = run_mylib_work(stream);
  mylib::resources().set(mylib::allocation_kind::results, 0, previous_results);
  rmm_next::set_per_device_resource_ref(0, previous_process_wide);
  // [process-wide end]
  return ok && pool.statistics().used_bytes_high >= (1 << 20);
}

// [map]
/** Code written for a per_device_resource_map... */
std::size_t pool_users(rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref>& map,
                       int device_count)
{
  std::size_t users = 0;
  for (int device = 0; device < device_count; ++device) {
    users += map.get(device) == rmm_next::get_per_device_resource_ref(device) ? 1 : 0;
  }
  return users;
}

// ...takes one kind of a context.
std::size_t count_results_users(int device_count)
{
  return pool_users(mylib::resources().map(mylib::allocation_kind::results), device_count);
}
// [map end]

void staging(cudaStream_t stream)
{
  // [host-use]
  auto staging_memory = mylib::host_resources().get(mylib::host_allocation_kind::pinned_staging);
  auto* staging       = static_cast<char*>(staging_memory.allocate_sync(64, alignof(char)));
  std::strcpy(staging, "written by the host");  // host-accessible: the ref type says so
  staging_memory.deallocate(stream, staging, 64, alignof(char));
  // [host-use end]
  check(cudaStreamSynchronize(stream));
}

}  // namespace

int main()
{
  int const count = rmm_next_test::require_devices();
  try {
    check(cudaSetDevice(0));
    cudaStream_t stream{};
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    static_assert(rmm_next::allocation_kind_count<otherlib::kind> == 2);

    bool ok = run_mylib_work(stream);
    try {
      ok = application_override(stream) && ok;
    } catch (rmm_next::not_supported const& e) {
      std::printf("managed memory: %s\n", e.what());
    }
    ok = every_device(stream, count) && ok;
    ok = process_wide(stream) && ok;
    ok = count_results_users(count) == static_cast<std::size_t>(count) && ok;
    staging(stream);
    check(cudaStreamDestroy(stream));
    std::printf("resource_context snippets ran on %d device(s): %s\n", count, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (std::exception const& e) {
    std::printf("resource_context snippets failed: %s\n", e.what());
    return 1;
  }
}
