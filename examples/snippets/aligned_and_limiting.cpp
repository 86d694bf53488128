/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in the docs of aligned_adaptor and limiting_adaptor. Each block between
// "// [name]" and "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks
// it), and this program runs them all on a GPU (exit 77 without one) and checks the numbers the
// docs state.
#include "gpu_check.hpp"

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

using rmm_next_test::expect;

namespace {

bool aligned_to(void const* p, std::size_t alignment)
{
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

void aligned(cudaStream_t stream)
{
  // [aligned-adaptor]
  // 4 KiB for GPUDirect Storage: every allocation of 64 KiB or more, and any request for it.
  rmm_next::aligned_adaptor gds{rmm_next::async_device_resource{}, 4096};
  void* big   = gds.allocate(stream, 1 << 20);     // 4 KiB-aligned: at least the threshold
  void* small = gds.allocate(stream, 1000, 4096);  // 4 KiB-aligned: asked for
  void* other = gds.allocate(stream, 1000);        // 256-aligned: passed through as it is
  std::printf("the pool was asked for %zu bytes\n", gds.upstream_bytes(1 << 20));  // 1052416

  gds.deallocate(stream, big, 1 << 20);  // the size and alignment of the allocation
  gds.deallocate(stream, small, 1000, 4096);
  gds.deallocate(stream, other, 1000);
  // [aligned-adaptor end]
  expect(aligned_to(big, 4096) && aligned_to(small, 4096) && aligned_to(other, 256),
         "aligned-adaptor: alignment");
  expect(gds.upstream_bytes(1 << 20) == 1052416, "aligned-adaptor: upstream bytes");
}

void limiting(cudaStream_t stream)
{
  // [limiting-adaptor]
  rmm_next::limiting_adaptor capped{rmm_next::async_device_resource{}, std::size_t{1} << 30};
  void* p = capped.allocate(stream, 1000);  // counts 1024: a multiple of 256
  try {
    [[maybe_unused]] void* q = capped.allocate(stream, std::size_t{1} << 30);
  } catch (rmm_next::out_of_memory const& e) {
    // "rmm_next::limiting_adaptor: out_of_memory: allocating 1073741824 bytes would pass the
    // limit of 1073741824 bytes, with 1024 bytes in use; free memory or raise the limit
    // (set_limit)": the pool was not asked.
    std::printf("%s\n", e.what());
  }
  capped.set_limit(std::size_t{2} << 30);  // while p is live
  void* q = capped.allocate(stream, std::size_t{1} << 30);
  std::printf("%zu bytes in use of %zu\n", capped.bytes_in_use(), capped.limit());
  capped.deallocate(stream, q, std::size_t{1} << 30);
  capped.deallocate(stream, p, 1000);
  // [limiting-adaptor end]
  expect(capped.bytes_in_use() == 0 && capped.limit() == std::size_t{2} << 30,
         "limiting-adaptor: count and limit");
}

void per_library_cap(cudaStream_t stream)
{
  // [per-library-cap]
  // A library's own cap over whatever resource the application gave it.
  rmm_next::limiting_adaptor<rmm_next::device_async_resource_ref> mylib_memory{
    rmm_next::get_current_device_resource_ref(), std::size_t{4} << 30};
  rmm_next::device_async_resource_ref mr = mylib_memory;  // what mylib's code allocates from
  void* p                                = mr.allocate(stream, 256, 256);
  mr.deallocate(stream, p, 256, 256);
  // [per-library-cap end]
  expect(mylib_memory.bytes_in_use() == 0, "per-library-cap: freed");
}

void stack(cudaStream_t stream)
{
  // [stack]
  using cache   = rmm_next::thread_cache_adaptor<rmm_next::async_device_resource>;
  using aligned = rmm_next::aligned_adaptor<cache>;
  // Limiting over aligned: the limit counts what the callers hold, not the padding.
  rmm_next::limiting_adaptor<aligned> mr{aligned{cache{rmm_next::async_device_resource{}}, 4096},
                                         std::size_t{8} << 30};
  void* p = mr.allocate(stream, 256 << 10);  // 4 KiB-aligned, 256 KiB counted
  mr.deallocate(stream, p, 256 << 10);
  // [stack end]
  expect(aligned_to(p, 4096), "stack: alignment");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) { return 1; }
  aligned(stream);
  limiting(stream);
  per_library_cap(stream);
  stack(stream);
  (void)cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  return rmm_next_test::failures() == 0 ? 0 : 1;
}
