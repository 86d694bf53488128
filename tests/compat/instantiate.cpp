/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Compiled (not run) against every CUDA/CCCL of the compile matrix: instantiates each member of
// the public API a user calls, so that errors that only show on instantiation surface there.
#include <rmm_next/rmm_next.hpp>

#include <cstddef>

namespace {

template <class Resource, class AsyncRef, class SyncRef>
void use(Resource& r, cudaStream_t stream)
{
  void* p = r.allocate(stream, 64, 256);
  r.deallocate(stream, p, 64, 256);
  p = r.allocate_sync(64, 8);
  r.deallocate_sync(p, 64, 8);
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  p = r.allocate(std::size_t{64}, 256);  // CCCL 3.0 names, where its concepts require them
  r.deallocate(p, 64, 256);
  p = r.allocate_async(64, 256, stream);
  r.deallocate_async(p, 64, 256, stream);
#endif
  [[maybe_unused]] bool const same = r == Resource{r};
  [[maybe_unused]] auto stats      = r.statistics();
  [[maybe_unused]] auto pool       = r.pool_handle();
  [[maybe_unused]] int device      = r.device();

  AsyncRef ref{r};
  p = ref.allocate(stream, 64, 256);
  ref.deallocate(stream, p, 64, 256);
  p = ref.allocate_sync(64, 256);
  ref.deallocate_sync(p, 64, 256);
  SyncRef sync_ref{r};
  p = sync_ref.allocate_sync(64, 256);
  sync_ref.deallocate_sync(p, 64, 256);
}

/** A map of `Ref` (its stand-in for a device's initial resource binds to every ref type). */
template <class Ref, class Resource>
void use_map(Resource& r)
{
  rmm_next::per_device_resource_map<Ref> map{[&r](int) { return Ref{r}; }, 1};
  Ref const previous = map.set(0, Ref{r});
  (void)map.get(0);
  map.set(0, previous);
  (void)map.reset(0);
  (void)map.get_current();
}

}  // namespace

void instantiate_everything(cudaStream_t stream, cudaMemPool_t pool)
{
  rmm_next::async_device_resource device{rmm_next::pool_options{.initial_pool_size = 1 << 20}, 0};
  rmm_next::async_device_resource view{pool};
  rmm_next::async_managed_resource managed{rmm_next::default_pool{}};
  rmm_next::async_pinned_resource pinned{rmm_next::current_pool{}, 0, {0}};
  use<rmm_next::async_device_resource,
      rmm_next::device_async_resource_ref,
      rmm_next::device_resource_ref>(device, stream);
  use<rmm_next::async_managed_resource,
      rmm_next::host_device_async_resource_ref,
      rmm_next::host_device_resource_ref>(managed, stream);
  use<rmm_next::async_pinned_resource,
      rmm_next::host_async_resource_ref,
      rmm_next::host_resource_ref>(pinned, stream);

  use_map<rmm_next::device_async_resource_ref>(device);
  use_map<rmm_next::device_resource_ref>(device);
  use_map<rmm_next::host_device_async_resource_ref>(managed);
  use_map<rmm_next::host_device_resource_ref>(pinned);
  use_map<rmm_next::host_async_resource_ref>(pinned);

  rmm_next::host_device_async_resource_ref hd{pinned};
  rmm_next::device_async_resource_ref narrowed = hd;
  (void)narrowed;

  rmm_next::device_async_resource_ref previous = rmm_next::set_current_device_resource_ref(view);
  rmm_next::set_current_device_resource_ref(previous);
  rmm_next::reset_current_device_resource_ref();
  void* p = rmm_next::get_current_device_resource_ref().allocate(stream, 64, 256);
  rmm_next::get_per_device_resource_ref(0).deallocate(stream, p, 64, 256);
}
