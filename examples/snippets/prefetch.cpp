/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in the prefetch_adaptor section of the docs. Each block between "// [name]" and
// "// [name end]" is quoted there verbatim (tests/docs/check_snippets.py checks it), and this
// program runs them all on a GPU (exit 77 without one) and checks what the docs state.
#include "gpu_check.hpp"

#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/prefetch_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <string>

namespace {

using rmm_next_test::expect;

void prefetch(cudaStream_t stream)
{
  // [prefetch]
  rmm_next::prefetch_adaptor managed{rmm_next::async_managed_resource{}, 0};
  std::size_t const bytes = std::size_t{64} << 20;
  void* p = managed.allocate(stream, bytes);  // then cudaMemPrefetchAsync(p, ..., device 0, stream)
  (void)cudaMemsetAsync(p, 0, bytes, stream);  // finds its pages on device 0: no page faults
  managed.deallocate(stream, p, bytes);
  // [prefetch end]
  (void)cudaStreamSynchronize(stream);
}

void refused()
{
  // [prefetch-refused]
  try {
    rmm_next::prefetch_adaptor pinned{rmm_next::async_pinned_resource{}, 0};
  } catch (rmm_next::not_supported const& e) {
    // rmm_next::prefetch_adaptor: the upstream hands out pinned host memory, which cannot be
    // prefetched; wrap a resource of managed memory, such as async_managed_resource
    std::printf("%s\n", e.what());
  }
  // [prefetch-refused end]
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
  try {
    prefetch(stream);
  } catch (rmm_next::not_supported const& e) {
    std::printf("managed pools not supported here: %s\n", e.what());
  }
  refused();
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess) {
    std::printf("stream teardown failed\n");
    return 1;
  }
  if (rmm_next_test::failures() != 0) { return 1; }
  std::printf("snippets: all ran\n");
  return 0;
}
