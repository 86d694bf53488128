/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <cuda.h>  // types only: the functions are reached through the runtime, libcuda is not linked
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

/**
 * @file
 * @brief The few CUDA driver functions rmm-next calls on hot paths, reached through the runtime's
 * `cudaGetDriverEntryPointByVersion`, so that no binary links libcuda.
 *
 * Each pointer is null when the driver is missing or lacks the function; callers then fall back
 * to the runtime API or to the behaviour of a process without a GPU.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief Driver entry points, resolved once per process. */
struct driver_api {
  CUresult (*stream_get_id)(CUstream, unsigned long long*)              = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*)     = nullptr;
  CUresult (*thread_exchange_stream_capture_mode)(CUstreamCaptureMode*) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*)                               = nullptr;
  CUresult (*ctx_get_device)(CUdevice*)                                 = nullptr;
  CUresult (*ctx_set_current)(CUcontext)                                = nullptr;
  CUresult (*stream_get_device)(CUstream, CUdevice*) = nullptr;  ///< driver 12.8+
  CUresult (*stream_get_ctx)(CUstream, CUcontext*)   = nullptr;
  /// The 11.3 form: status, id, graph, dependencies (never asked for here).
  CUresult (*stream_get_capture_info)(CUstream,
                                      CUstreamCaptureStatus*,
                                      cuuint64_t*,
                                      CUgraph*,
                                      CUgraphNode const**,
                                      std::size_t*) = nullptr;
  // Frees inside a capture: a host node, and a user object that ties its data to the graph.
  CUresult (*launch_host_func)(CUstream, CUhostFn, void*) = nullptr;
  CUresult (*user_object_create)(CUuserObject*, void*, CUhostFn, unsigned int, unsigned int) =
    nullptr;
  CUresult (*user_object_release)(CUuserObject, unsigned int)                             = nullptr;
  CUresult (*graph_retain_user_object)(CUgraph, CUuserObject, unsigned int, unsigned int) = nullptr;
  // Fences of the thread cache: events recorded on a block's stream, waited on by a stream of
  // the cache's own, never by the device or a context.
  CUresult (*event_create)(CUevent*, unsigned int)                 = nullptr;
  CUresult (*event_record)(CUevent, CUstream)                      = nullptr;
  CUresult (*event_destroy)(CUevent)                               = nullptr;
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int)   = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned int)               = nullptr;
  CUresult (*stream_synchronize)(CUstream)                         = nullptr;
  CUresult (*stream_destroy)(CUstream)                             = nullptr;
  CUresult (*ctx_push_current)(CUcontext)                          = nullptr;
  CUresult (*ctx_pop_current)(CUcontext*)                          = nullptr;
  CUresult (*ctx_synchronize)()                                    = nullptr;
  CUresult (*device_get)(CUdevice*, int)                           = nullptr;
  CUresult (*device_get_count)(int*)                               = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice)             = nullptr;
  CUresult (*primary_ctx_release)(CUdevice)                        = nullptr;
  CUresult (*primary_ctx_get_state)(CUdevice, unsigned int*, int*) = nullptr;
  CUresult (*event_synchronize)(CUevent)                           = nullptr;
  // Virtual memory management (vmm_resource): segments from cuMemCreate, mapped into reserved
  // address ranges, exportable as shareable handles.
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*device_can_access_peer)(int*, CUdevice, CUdevice)         = nullptr;
  CUresult (*get_error_name)(CUresult, char const**)                   = nullptr;
  CUresult (*mem_create)(CUmemGenericAllocationHandle*,
                         std::size_t,
                         CUmemAllocationProp const*,
                         unsigned long long)                           = nullptr;
  CUresult (*mem_release)(CUmemGenericAllocationHandle)                = nullptr;
  CUresult (*mem_address_reserve)(
    CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr, unsigned long long)   = nullptr;
  CUresult (*mem_address_free)(CUdeviceptr, std::size_t)                       = nullptr;
  CUresult (*mem_map)(CUdeviceptr,
                      std::size_t,
                      std::size_t,
                      CUmemGenericAllocationHandle,
                      unsigned long long)                                      = nullptr;
  CUresult (*mem_unmap)(CUdeviceptr, std::size_t)                              = nullptr;
  CUresult (*mem_set_access)(CUdeviceptr,
                             std::size_t,
                             CUmemAccessDesc const*,
                             std::size_t)                                      = nullptr;
  CUresult (*mem_get_allocation_granularity)(std::size_t*,
                                             CUmemAllocationProp const*,
                                             CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*mem_export_to_shareable_handle)(void*,
                                             CUmemGenericAllocationHandle,
                                             CUmemAllocationHandleType,
                                             unsigned long long)               = nullptr;
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle*,
                                               void*,
                                               CUmemAllocationHandleType)      = nullptr;
  CUresult (*multicast_get_granularity)(std::size_t*,
                                        CUmulticastObjectProp const*,
                                        CUmulticastGranularity_flags) = nullptr;  ///< 12.1+
};

/** @brief Resolves `name` (introduced in driver `version`) into `fn`; leaves it null on failure. */
template <class Fn>
void resolve_driver_entry_point(char const* name, int version, Fn& fn) noexcept
{
  void* address{};
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  cudaError_t const status =
    cudaGetDriverEntryPointByVersion(name, &address, version, cudaEnableDefault, &found);
#else
  (void)version;
  cudaError_t const status = cudaGetDriverEntryPoint(name, &address, cudaEnableDefault, &found);
#endif
  if (status == cudaSuccess && found == cudaDriverEntryPointSuccess) {
    fn = reinterpret_cast<Fn>(address);
  } else {
    (void)cudaGetLastError();
  }
}

/** @brief The driver entry points of this process (null members where unavailable). */
[[gnu::always_inline]] inline driver_api const& driver() noexcept
{
  static driver_api const api = [] {
    driver_api a;
    resolve_driver_entry_point("cuStreamGetId", 12000, a.stream_get_id);
    resolve_driver_entry_point("cuStreamIsCapturing", 10000, a.stream_is_capturing);
    resolve_driver_entry_point(
      "cuThreadExchangeStreamCaptureMode", 10010, a.thread_exchange_stream_capture_mode);
    resolve_driver_entry_point("cuCtxGetCurrent", 4000, a.ctx_get_current);
    resolve_driver_entry_point("cuCtxGetDevice", 2000, a.ctx_get_device);
    resolve_driver_entry_point("cuCtxSetCurrent", 4000, a.ctx_set_current);
    resolve_driver_entry_point("cuStreamGetDevice", 12080, a.stream_get_device);
    resolve_driver_entry_point("cuStreamGetCtx", 9020, a.stream_get_ctx);
    resolve_driver_entry_point("cuStreamGetCaptureInfo", 11030, a.stream_get_capture_info);
    resolve_driver_entry_point("cuLaunchHostFunc", 10000, a.launch_host_func);
    resolve_driver_entry_point("cuUserObjectCreate", 11030, a.user_object_create);
    resolve_driver_entry_point("cuUserObjectRelease", 11030, a.user_object_release);
    resolve_driver_entry_point("cuGraphRetainUserObject", 11030, a.graph_retain_user_object);
    resolve_driver_entry_point("cuEventCreate", 2000, a.event_create);
    resolve_driver_entry_point("cuEventRecord", 2000, a.event_record);
    resolve_driver_entry_point("cuEventDestroy", 4000, a.event_destroy);
    resolve_driver_entry_point("cuStreamWaitEvent", 3020, a.stream_wait_event);
    resolve_driver_entry_point("cuStreamCreate", 2000, a.stream_create);
    resolve_driver_entry_point("cuStreamSynchronize", 2000, a.stream_synchronize);
    resolve_driver_entry_point("cuStreamDestroy", 4000, a.stream_destroy);
    resolve_driver_entry_point("cuCtxPushCurrent", 4000, a.ctx_push_current);
    resolve_driver_entry_point("cuCtxPopCurrent", 4000, a.ctx_pop_current);
    resolve_driver_entry_point("cuCtxSynchronize", 2000, a.ctx_synchronize);
    resolve_driver_entry_point("cuDeviceGet", 2000, a.device_get);
    resolve_driver_entry_point("cuDeviceGetCount", 2000, a.device_get_count);
    resolve_driver_entry_point("cuDevicePrimaryCtxRetain", 7000, a.primary_ctx_retain);
    resolve_driver_entry_point("cuDevicePrimaryCtxRelease", 11000, a.primary_ctx_release);
    resolve_driver_entry_point("cuDevicePrimaryCtxGetState", 7000, a.primary_ctx_get_state);
    resolve_driver_entry_point("cuEventSynchronize", 2000, a.event_synchronize);
    resolve_driver_entry_point("cuDeviceGetAttribute", 2000, a.device_get_attribute);
    resolve_driver_entry_point("cuDeviceCanAccessPeer", 4000, a.device_can_access_peer);
    resolve_driver_entry_point("cuGetErrorName", 6000, a.get_error_name);
    resolve_driver_entry_point("cuMemCreate", 10020, a.mem_create);
    resolve_driver_entry_point("cuMemRelease", 10020, a.mem_release);
    resolve_driver_entry_point("cuMemAddressReserve", 10020, a.mem_address_reserve);
    resolve_driver_entry_point("cuMemAddressFree", 10020, a.mem_address_free);
    resolve_driver_entry_point("cuMemMap", 10020, a.mem_map);
    resolve_driver_entry_point("cuMemUnmap", 10020, a.mem_unmap);
    resolve_driver_entry_point("cuMemSetAccess", 10020, a.mem_set_access);
    resolve_driver_entry_point(
      "cuMemGetAllocationGranularity", 10020, a.mem_get_allocation_granularity);
    resolve_driver_entry_point(
      "cuMemExportToShareableHandle", 10020, a.mem_export_to_shareable_handle);
    resolve_driver_entry_point(
      "cuMemImportFromShareableHandle", 10020, a.mem_import_from_shareable_handle);
    resolve_driver_entry_point("cuMulticastGetGranularity", 12010, a.multicast_get_granularity);
    return a;
  }();
  return api;
}

/**
 * @brief The calling thread's current context (`cuCtxGetCurrent`, about 10 ns), or null when it
 * has none or no driver can say.
 */
inline CUcontext current_context_or_null() noexcept
{
  auto const fn = driver().ctx_get_current;
  CUcontext context{};
  if (fn == nullptr || fn(&context) != CUDA_SUCCESS) { return nullptr; }
  return context;
}

/**
 * @brief True when `context` is the primary context of `device`, which is active. A primary
 * context lives as long as the process (a reset keeps its handle), so its device can be cached;
 * a context made with `cuCtxCreate` can be destroyed and its address reused for another device.
 * Asks without creating the primary context: only an active one is retained for the comparison.
 */
inline bool is_primary_context(CUcontext context, CUdevice device) noexcept
{
  driver_api const& api = driver();
  if (api.primary_ctx_get_state == nullptr || api.primary_ctx_retain == nullptr ||
      api.primary_ctx_release == nullptr) {
    return false;
  }
  unsigned int flags{};
  int active{};
  if (api.primary_ctx_get_state(device, &flags, &active) != CUDA_SUCCESS || active == 0) {
    return false;
  }
  CUcontext primary{};
  if (api.primary_ctx_retain(&primary, device) != CUDA_SUCCESS) { return false; }
  (void)api.primary_ctx_release(device);
  return primary == context;
}

/**
 * @brief The device of `context`, which must be the calling thread's current context (as
 * `current_context_or_null` returned it): `cuCtxGetDevice`. Cached per thread for a primary
 * context, so a thread that stays on one asks the driver once; asked each time (one call, the
 * primary check made once) for any other context, whose address a destroyed context's successor
 * may take on another device. -1 for null
 * or when the driver cannot say.
 */
inline int device_of_current_context(CUcontext context) noexcept
{
  thread_local CUcontext cached_context{};
  thread_local int cached_device{-1};
  thread_local CUcontext
    not_primary{};  // found not primary: its device is asked, not checked again
  if (context == nullptr) { return -1; }
  if (context == cached_context) { return cached_device; }
  auto const fn = driver().ctx_get_device;
  CUdevice device{};
  if (fn == nullptr || fn(&device) != CUDA_SUCCESS) { return -1; }
  if (context != not_primary) {
    if (is_primary_context(context, device)) {
      cached_context = context;
      cached_device  = static_cast<int>(device);
    } else {
      not_primary = context;
    }
  }
  return static_cast<int>(device);
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
