/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// Must not compile: a literal 0 (or nullptr) where the stream goes. RMM_NEXT_TYPE picks the
// resource, adaptor or ref (1 to 17) and RMM_NEXT_CALL the call (1 to 4); tests/CMakeLists.txt and
// .ci/compile_matrix.sh build the cases and expect the message that says to pass a stream (or,
// for CCCL's own refs from CCCL 3.1 on, CCCL's refusal of int and nullptr as a cuda::stream_ref).
#include <rmm_next/rmm_next.hpp>

#include <cstddef>

namespace {

#if RMM_NEXT_TYPE == 1
using type = rmm_next::async_device_resource;
#elif RMM_NEXT_TYPE == 2
using type = rmm_next::async_managed_resource;
#elif RMM_NEXT_TYPE == 3
using type = rmm_next::async_pinned_resource;
#elif RMM_NEXT_TYPE == 4
using type = rmm_next::statistics_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 5
using type = rmm_next::thread_cache_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 6
using type = rmm_next::device_async_resource_ref;
#elif RMM_NEXT_TYPE == 7
using type = rmm_next::host_device_async_resource_ref;
#elif RMM_NEXT_TYPE == 8
using type = rmm_next::host_async_resource_ref;
#elif RMM_NEXT_TYPE == 9
using type = rmm_next::device_resource_ref;
#elif RMM_NEXT_TYPE == 10
using type = rmm_next::host_device_resource_ref;
#elif RMM_NEXT_TYPE == 11
using type = rmm_next::host_resource_ref;
#elif RMM_NEXT_TYPE == 12
using type = rmm_next::aligned_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 13
using type = rmm_next::limiting_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 14
using type = rmm_next::tracking_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 15
using type = rmm_next::logging_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 16
using type = rmm_next::failure_callback_adaptor<rmm_next::async_device_resource>;
#elif RMM_NEXT_TYPE == 17
using type = rmm_next::prefetch_adaptor<rmm_next::async_managed_resource>;
#else
#error "RMM_NEXT_TYPE: 1 to 17"
#endif

}  // namespace

void* misuse(type& mr, void* p)
{
#if RMM_NEXT_CALL == 1
  return mr.allocate(0, 256);  // meant: 256 bytes on the default stream
#elif RMM_NEXT_CALL == 2
  return mr.allocate(0, 1024);
#elif RMM_NEXT_CALL == 3
  mr.deallocate(0, p, 256);
  return p;
#elif RMM_NEXT_CALL == 4
  return mr.allocate(nullptr, 256);
#else
#error "RMM_NEXT_CALL: 1 to 4"
#endif
}
