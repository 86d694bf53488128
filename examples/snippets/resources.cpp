/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/user_guide.md. Each block between "// [name]" and "// [name end]" is
// quoted there verbatim (a test checks it), and this program runs them all on a GPU.
#include "gpu_check.hpp"

#include <rmm_next/rmm_next.hpp>

#include <cuda_runtime_api.h>

#include <cassert>
#include <cstddef>
#include <cstdio>

namespace {

void choosing_a_pool(cudaMemPool_t my_pool)
{
  // [choosing-a-pool]
  // 1. The device's current pool: shared with every cudaMallocAsync user in the process.
  rmm_next::async_device_resource shared;

  // 2. The driver's default pool of device 0, whatever cudaMemSetMemPool made current.
  rmm_next::async_device_resource fallback{rmm_next::default_pool{}, 0};

  // 3. A pool of its own, primed with 1 GiB and capped at 8 GiB; destroyed with the last copy.
  rmm_next::async_device_resource owned{rmm_next::pool_options{
    .initial_pool_size = std::size_t{1} << 30,
    .maximum_pool_size = std::size_t{8} << 30,
  }};

  // 4. A view of a pool the caller created; the resource never destroys it.
  rmm_next::async_device_resource view{my_pool};
  // [choosing-a-pool end]
  assert(view.pool_handle() == my_pool);
  (void)shared;
  (void)fallback;
  (void)owned;
}

void stream_ordered(cudaStream_t stream)
{
  // [stream-ordered]
  rmm_next::async_device_resource mr;
  void* p = mr.allocate(stream, 1 << 20);  // ready for work on `stream`
  // ... launch kernels on `stream` that use p ...
  mr.deallocate(stream, p, 1 << 20);  // freed once `stream` reaches this point

  void* q = mr.allocate_sync(1 << 20);  // usable by any stream at once
  mr.deallocate_sync(q, 1 << 20);
  // [stream-ordered end]
}

void refs(cudaStream_t stream)
{
  // [refs]
  rmm_next::async_pinned_resource pinned;  // host memory kernels may read and write
  rmm_next::host_device_async_resource_ref ref{pinned};
  rmm_next::device_async_resource_ref device_only = ref;  // fewer properties: converts
  // Refs take the alignment explicitly (CCCL 3.1+ deprecates the default).
  auto* staging = static_cast<float*>(ref.allocate(stream, 1024 * sizeof(float), alignof(float)));
  device_only.deallocate(stream, staging, 1024 * sizeof(float), alignof(float));
  // [refs end]
}

void errors()
{
  // [errors]
  rmm_next::async_device_resource mr;
  try {
    [[maybe_unused]] void* p = mr.allocate_sync(std::size_t{1} << 50);  // 1 PiB
  } catch (rmm_next::out_of_memory const& e) {
    std::printf("%s\n", e.what());  // "rmm_next::out_of_memory: ... 1125899906842624 bytes ..."
  }
  try {
    [[maybe_unused]] void* p = mr.allocate_sync(64, 512);
  } catch (rmm_next::bad_alloc const& e) {
    std::printf("%s\n", e.what());  // "... alignment 512 is not a power of two no greater ..."
  }
  try {
    rmm_next::async_managed_resource managed;
  } catch (rmm_next::not_supported const& e) {
    std::printf("%s\n", e.what());  // names the feature, what it needs and what was found
  }
  // [errors end]
}

void statistics()
{
  // [statistics]
  rmm_next::async_device_resource mr;
  void* p                         = mr.allocate_sync(std::size_t{64} << 20);
  rmm_next::pool_statistics stats = mr.statistics();
  std::printf("reserved %llu B, used %llu B, release threshold %llu B\n",
              static_cast<unsigned long long>(stats.reserved_bytes),
              static_cast<unsigned long long>(stats.used_bytes),
              static_cast<unsigned long long>(stats.release_threshold));
  mr.deallocate_sync(p, std::size_t{64} << 20);
  // [statistics end]
}

void pinned_devices()
{
  // [pinned-devices]
  // Kernels on device 0 only may touch this memory (default: every visible device).
  rmm_next::async_pinned_resource pinned{rmm_next::current_pool{}, 0, {0}};
  // [pinned-devices end]
  (void)pinned;
}

void managed_location()
{
  // [managed-location]
  cudaMemLocation host{};
  host.type = cudaMemLocationTypeHost;
  rmm_next::async_managed_resource managed{rmm_next::pool_options{.location = host}};
  // [managed-location end]
  (void)managed;
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  RMM_NEXT_CUDA_TRY(cudaStreamCreate(&stream));
  cudaMemPoolProps props{};
  props.allocType     = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id   = 0;
  cudaMemPool_t my_pool{};
  RMM_NEXT_CUDA_TRY(cudaMemPoolCreate(&my_pool, &props));

  choosing_a_pool(my_pool);
  stream_ordered(stream);
  refs(stream);
  errors();
  statistics();
  pinned_devices();
  try {
    managed_location();
  } catch (rmm_next::cuda_error const& e) {
    std::printf("managed pool with a host preferred location: %s\n", e.what());
    return 1;
  }
  RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream));
  RMM_NEXT_CUDA_TRY(cudaMemPoolDestroy(my_pool));
  RMM_NEXT_CUDA_TRY(cudaStreamDestroy(stream));
  std::printf("snippets: all ran\n");
  return 0;
}
