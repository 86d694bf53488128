/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/vmm_resource.md. Each block between "// [name]" and "// [name end]" is
// quoted there verbatim (tests/docs/check_snippets.py checks it), and this program runs them on a
// GPU (exit 77 without one; a device without virtual memory management is reported and passes).
#include "gpu_check.hpp"

#include <rmm_next/error.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <vector>

namespace {

void hooks_and_blocks(cudaStream_t stream)
{
  // [vmm-hooks]
  std::vector<void*> registered;  // what a communicator would register, once per segment
  rmm_next::vmm_resource mr{rmm_next::vmm_options{
    .access           = rmm_next::vmm_access::this_device,
    .segment_size     = std::size_t{256} << 20,
    .on_segment_map   = [&](void* base, std::size_t) { registered.push_back(base); },
    .on_segment_unmap = [&](void* base, std::size_t) { std::erase(registered, base); },
  }};
  void* a = mr.allocate(stream, 1 << 20);  // makes the first segment: on_segment_map runs
  void* b = mr.allocate(stream, 8 << 20);  // same segment: no hook
  mr.deallocate(stream, a, 1 << 20);
  mr.deallocate(stream, b, 8 << 20);
  // [vmm-hooks end]
  rmm_next_test::expect(registered.size() == mr.segments().size(), "one hook call per segment");
  rmm_next_test::expect(registered.size() == 1, "one segment");
}

void options()
{
  // [vmm-options]
  rmm_next::vmm_resource mr{rmm_next::vmm_options{
    .handle_types = rmm_next::vmm_handle_types::posix_fd,  // no FABRIC: single node
    .granularity  = rmm_next::vmm_granularity::minimum,
  }};
  std::printf("granularity %zu, segment size %zu, %zu device(s) mapped\n",
              mr.granularity(),
              mr.segment_size(),
              mr.access_devices().size());
  // [vmm-options end]
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  try {
    cudaStream_t stream{};
    if (cudaStreamCreate(&stream) != cudaSuccess) { return 1; }
    hooks_and_blocks(stream);
    options();
    (void)cudaStreamSynchronize(stream);
    (void)cudaStreamDestroy(stream);
  } catch (rmm_next::not_supported const& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return rmm_next_test::skip_return_code;
  }
  return rmm_next_test::failures() == 0 ? 0 : 1;
}
