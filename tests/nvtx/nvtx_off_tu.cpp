/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Compiled with RMM_NEXT_DISABLE_NVTX (tests/nvtx/tests.cmake) into the same program as
// nvtx_test.cpp, which has NVTX on: the adaptor used here must emit nothing, and the one there
// must keep emitting (RMM_NEXT_NVTX_ABI keeps the two sets of inline functions apart).

#include "nvtx_off_tu.hpp"

#include <rmm_next/statistics_adaptor.hpp>

#ifndef RMM_NEXT_DISABLE_NVTX
#error "this file must be compiled with RMM_NEXT_DISABLE_NVTX"
#endif
static_assert(!rmm_next::detail::nvtx_enabled);

namespace rmm_next_test::nvtx {

std::int64_t allocate_with_nvtx_off(rmm_next::test::fake_resource const& upstream, int pairs)
{
  rmm_next::statistics_adaptor<rmm_next::test::fake_resource> adaptor{upstream};
  for (int i = 0; i < pairs; ++i) {
    void* p = adaptor.allocate_sync(64);
    adaptor.deallocate_sync(p, 64);
    void* q = adaptor.allocate(cuda::stream_ref{cudaStream_t{}}, 32);
    adaptor.deallocate(cuda::stream_ref{cudaStream_t{}}, q, 32);
  }
  rmm_next::detail::nvtx_name_region(&adaptor, "nvtx off");
  return adaptor.statistics().bytes.total;
}

}  // namespace rmm_next_test::nvtx
