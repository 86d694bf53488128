/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/handle_names_and_fabric.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

/**
 * @file
 * @brief The errors of the pool resources and of IPC, each one `[[noreturn]]` function that
 * writes its message once and raises it through `detail/throw_error.hpp`: a bad alignment, a
 * failed allocation, a stream of the wrong device, a missing feature, a refused export.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief Throws `not_supported` from a resource of `kind`: `what` names the feature, what it
 * needs and what was found. */
[[noreturn]] inline void throw_not_supported(memory_kind kind, std::string const& what)
{
  throw_error<not_supported>(resource_name(kind), what);
}

/** @brief Throws `bad_alloc` naming an `alignment` that is not a power of two <= 256. */
[[noreturn]] inline void throw_bad_alignment(memory_kind kind, std::size_t alignment)
{
  throw_error<bad_alloc>(resource_name(kind),
                         "alignment " + std::to_string(alignment) +
                           " is not a power of two no greater than " +
                           std::to_string(default_alignment));
}

/**
 * @brief Throws the typed error of a failed `cudaMallocFromPoolAsync`: `out_of_memory` when the
 * pool is exhausted, `not_supported` for a host pool during capture, `cuda_error` for a lost
 * context, `bad_alloc` otherwise.
 */
[[noreturn]] inline void throw_allocation_failure(pool_target target,
                                                  cudaError_t status,
                                                  std::size_t bytes,
                                                  cudaStream_t stream = nullptr)
{
  auto const [kind, device] = target;
  if (is_sticky_error(status)) {
    // Not a failed allocation: earlier work broke the context, and nothing will work again.
    throw_cuda_error(status, "cudaMallocFromPoolAsync", resource_name(kind));
  }
  (void)cudaGetLastError();
  if (capture_status const capture =
        stream != nullptr ? capture_of(stream).status : capture_status::none;
      status == cudaErrorNotSupported &&
      (capture == capture_status::active || capture == capture_status::invalidated)) {
    // Graph memory nodes cannot come from host-located pools.
    throw_error<not_supported>(resource_name(kind),
                               "allocating " + std::to_string(bytes) +
                                 " bytes during stream capture needs a device memory pool; the "
                                 "driver cannot capture allocations from this pool (" +
                                 cudaGetErrorName(status) + ")",
                               status);
  }
  std::string const where = kind == memory_kind::pinned
                              ? " bytes of pinned host memory (resource device "
                              : " bytes on device ";
  std::string const tail  = std::to_string(device) + (kind == memory_kind::pinned ? ")" : "") +
                           " (" + cudaGetErrorName(status) + ": " + cudaGetErrorString(status) +
                           ")";
  std::string const failed = "failed to allocate " + std::to_string(bytes) + where + tail;
  if (status == cudaErrorMemoryAllocation) {
    throw_error<out_of_memory>(resource_name(kind), "out_of_memory: " + failed);
  }
  throw_error<bad_alloc>(resource_name(kind), failed);
}

/** @brief Throws `device_mismatch` for a stream of `stream_device` given to a resource for
 * `target` whose pool that device has no access to. */
[[noreturn]] inline void throw_device_mismatch(pool_target target, int stream_device)
{
  auto const [kind, resource_device] = target;
  std::string const mine             = "device " + std::to_string(resource_device);
  std::string const theirs           = "device " + std::to_string(stream_device);
  std::string const memory           = kind == memory_kind::pinned
                                         ? "pinned host memory of the resource on " + mine
                                         : mine + " memory";
  throw_error<device_mismatch>(std::string{resource_name(kind)} + "::allocate",
                               "device_mismatch: given a stream of " + theirs + ", but " + theirs +
                                 " has no access to the " + memory +
                                 "; allocate with a stream of " + mine + ", or grant " + theirs +
                                 " access to the pool (cudaMemPoolSetAccess)",
                               resource_device,
                               stream_device);
}

/** @brief Throws `not_supported` for fabric handles that `call` refused on `device`. */
[[noreturn]] inline void throw_fabric_not_supported(char const* who,
                                                    int device,
                                                    char const* call,
                                                    cudaError_t status)
{
  (void)cudaGetLastError();
  int mask{};
  if (cudaDeviceGetAttribute(&mask, cudaDevAttrMemoryPoolSupportedHandleTypes, device) !=
      cudaSuccess) {
    (void)cudaGetLastError();
  }
  throw_error<not_supported>(who,
                             "export handle type " +
                               handle_type_label(allocation_handle_type::fabric) + " needs " +
                               fabric_requirements + "; device " + std::to_string(device) +
                               " supports the handle type mask " + std::to_string(mask) +
                               " (cudaDevAttrMemoryPoolSupportedHandleTypes) and " + call +
                               " returned " + cudaGetErrorName(status),
                             status);
}

/** @brief Throws the typed error for a failed `cudaMemPoolExportToShareableHandle`. */
[[noreturn]] inline void throw_export_failure(cudaError_t status,
                                              allocation_handle_type type,
                                              int device)
{
  char const* const call = "cudaMemPoolExportToShareableHandle";
  if (is_sticky_error(status) || !no_usable_device_reason(status).empty()) {
    throw_cuda_error(status, call, "export_pool");
  }
  if (type == allocation_handle_type::fabric &&
      (status == cudaErrorNotPermitted || !device_exports_fabric(device))) {
    throw_fabric_not_supported("export_pool", device, call, status);
  }
  if (status == cudaErrorInvalidValue || status == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    std::string const name = handle_type_name(type);
    throw_error<logic_error>("export_pool",
                             "the pool cannot be exported as " + name + " (" + call + " returned " +
                               cudaGetErrorName(status) +
                               "); export a pool created with "
                               "pool_options::export_handle_type = "
                               "allocation_handle_type::" +
                               name);
  }
  throw_cuda_error(status, call, "export_pool");
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
