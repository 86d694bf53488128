/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/per_device_resource_map.md. Each block between "// [name]" and
// "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks it), and this
// program runs them all on a GPU (exit 77 without one).
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

// [library-map]
namespace mylib {

/**
 * The memory mylib allocates from, per device: managed memory on the device's current managed
 * pool unless the application chooses otherwise. Made on first use, destroyed at exit.
 */
inline rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref>& resources()
{
  static rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref> map{
    [](int device) { return rmm_next::async_managed_resource{rmm_next::current_pool{}, device}; }};
  return map;
}

}  // namespace mylib
// [library-map end]

namespace {

// [library-use]
void* mylib_scratch(std::size_t bytes, cuda::stream_ref stream)
{
  auto memory = mylib::resources().get_current();  // mylib's ref, not the process-wide one
  return memory.allocate(stream, bytes, rmm_next::default_alignment);
}
// [library-use end]

void run_mylib_work()
{
  void* p = mylib_scratch(1 << 20, cuda::stream_ref{cudaStream_t{}});
  mylib::resources().get_current().deallocate(
    cuda::stream_ref{cudaStream_t{}}, p, 1 << 20, rmm_next::default_alignment);
  (void)cudaStreamSynchronize(cudaStream_t{});
}

void application_choice()
{
  // [application-choice]
  // The application gives mylib device memory from a pool of its own on device 0; other
  // libraries and the free functions are unaffected.
  rmm_next::async_device_resource app_pool{rmm_next::pool_options{}, 0};
  auto const previous = mylib::resources().set(0, app_pool);
  run_mylib_work();
  // Before app_pool goes away: back to what mylib had.
  mylib::resources().set(0, previous);  // or mylib::resources().reset(0)
  // [application-choice end]
}

void factory_forms(std::vector<rmm_next::async_device_resource>& pools)
{
  // [factory-forms]
  using map_type = rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref>;

  // A resource by value: the map keeps it alive for its own lifetime.
  map_type by_value{[](int device) { return rmm_next::async_device_resource{device}; }};

  // A shared_ptr: the map shares ownership with whoever else holds it.
  map_type shared{[](int device) {
    return std::make_shared<rmm_next::async_device_resource>(rmm_next::pool_options{}, device);
  }};

  // A ref: the caller keeps the resources alive at least as long as the map.
  map_type borrowed{
    [&pools](int device) { return rmm_next::device_async_resource_ref{pools.at(device)}; }};

  // The device count given up front: no cudaGetDeviceCount, and explicit-device calls on refs
  // that were set make no CUDA call at all.
  map_type two_devices{[](int device) { return rmm_next::async_device_resource{device}; }, 2};
  // [factory-forms end]
  (void)by_value.get(0);
  (void)shared.get(0);
  (void)borrowed.get(0);
  (void)two_devices.device_count();
}

void legacy_free_functions()
{
  // [legacy]
  // Process-wide: every library that uses the free functions sees this change.
  rmm_next::async_device_resource pool{rmm_next::pool_options{}};
  auto const previous = rmm_next::set_current_device_resource_ref(pool);

  auto ref = rmm_next::get_current_device_resource_ref();
  void* p  = ref.allocate_sync(1 << 20, rmm_next::default_alignment);
  ref.deallocate_sync(p, 1 << 20, rmm_next::default_alignment);

  rmm_next::set_current_device_resource_ref(previous);  // before `pool` goes away
  // [legacy end]
}

void owning_free_functions()
{
  // [owning]
  // As RMM 26.06 and later: the map takes the resource over and hands the previous one back.
  auto previous = rmm_next::set_current_device_resource(
    rmm_next::async_device_resource{rmm_next::pool_options{}});

  auto ref = rmm_next::get_current_device_resource_ref();  // the pool the map now holds
  void* p  = ref.allocate_sync(1 << 20, rmm_next::default_alignment);
  ref.deallocate_sync(p, 1 << 20, rmm_next::default_alignment);

  // Restore; the resource that comes back is ours, and its pool goes with its last copy.
  auto const mine = rmm_next::set_current_device_resource(std::move(previous));
  // [owning end]
}

}  // namespace

int main()
{
  int const count = rmm_next_test::require_devices();
  std::vector<rmm_next::async_device_resource> pools;
  for (int d = 0; d < count; ++d) {
    pools.emplace_back(d);
  }

  if (cudaSetDevice(0) != cudaSuccess) { return 1; }
  run_mylib_work();
  application_choice();
  factory_forms(pools);
  legacy_free_functions();
  owning_free_functions();
  if (cudaDeviceSynchronize() != cudaSuccess) { return 1; }
  std::printf("per-device snippets ran on %d device(s)\n", count);
  return 0;
}
