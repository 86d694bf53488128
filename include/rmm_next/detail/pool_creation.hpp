/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/detail/error_macros.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/handle_types.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/pool_attributes.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_state.hpp>
#include <rmm_next/detail/pool_support.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <string>

/**
 * @file
 * @brief Creating a pool the resource owns, from `pool_options`.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief Creates a pool from `opts` that the resource owns: checks the options and the device's
 * support, creates it, sets its release threshold and primes `initial_pool_size` once.
 */
inline pool_binding create_pool(memory_kind kind, int device, pool_options const& opts)
{
  if (opts.maximum_pool_size && opts.initial_pool_size &&
      *opts.initial_pool_size > *opts.maximum_pool_size) {
    throw_error<logic_error>(resource_name(kind),
                             "initial_pool_size (" + std::to_string(*opts.initial_pool_size) +
                               " bytes) exceeds maximum_pool_size (" +
                               std::to_string(*opts.maximum_pool_size) + " bytes)");
  }
  if (opts.export_handle_type != allocation_handle_type::none) {
    int const supported = device_attribute(cudaDevAttrMemoryPoolSupportedHandleTypes, device);
    int const wanted    = static_cast<int>(opts.export_handle_type);
    if ((supported & wanted) != wanted) {
      throw_not_supported(kind,
                          "export handle type " + handle_type_label(opts.export_handle_type) +
                            " needs device support (cudaDevAttrMemoryPoolSupportedHandleTypes);"
                            " device " +
                            std::to_string(device) + " supports the mask " +
                            std::to_string(supported));
    }
  }

  if (exports_as_fabric(opts.export_handle_type) && !imex_channel_available()) {
    throw_not_supported(kind,
                        "export handle type " + handle_type_label(opts.export_handle_type) +
                          " needs " + fabric_requirements +
                          "; no IMEX channel under /dev/nvidia-caps-imex-channels is open "
                          "to this process");
  }

  cudaMemPoolProps props{};
  props.allocType   = allocation_type(kind);
  props.handleTypes = static_cast<cudaMemAllocationHandleType>(opts.export_handle_type);
  props.location    = opts.location.value_or(default_location(kind, device));
  props.maxSize     = opts.maximum_pool_size.value_or(0);
  if (opts.hardware_decompress) {
#ifdef cudaMemPoolCreateUsageHwDecompress
    props.usage = cudaMemPoolCreateUsageHwDecompress;
#else
    throw_not_supported(kind,
                        "hardware-decompress pools need CUDA 12.8 or later; this program "
                        "was compiled against CUDA " +
                          version_string(CUDART_VERSION));
#endif
  }

  cudaMemPool_t pool{};
  if (cudaError_t const s = cudaMemPoolCreate(&pool, &props); s != cudaSuccess) {
    if (kind == memory_kind::managed && opts.maximum_pool_size && s == cudaErrorInvalidValue) {
      (void)cudaGetLastError();
      throw_error<not_supported>(resource_name(kind),
                                 "maximum_pool_size needs a driver that bounds managed pools; "
                                 "cudaMemPoolCreate with maxSize " +
                                   std::to_string(*opts.maximum_pool_size) + " on device " +
                                   std::to_string(device) + " returned " + cudaGetErrorName(s),
                                 s);
    }
    if (opts.hardware_decompress && (s == cudaErrorNotSupported || s == cudaErrorInvalidValue)) {
      (void)cudaGetLastError();
      throw_error<not_supported>(resource_name(kind),
                                 "hardware-decompress pools need a device with a decompression "
                                 "engine; cudaMemPoolCreate on device " +
                                   std::to_string(device) + " returned " + cudaGetErrorName(s),
                                 s);
    }
    if (exports_as_fabric(opts.export_handle_type) && is_fabric_refusal(s)) {
      (void)cudaGetLastError();
      throw_error<not_supported>(resource_name(kind),
                                 "export handle type " +
                                   handle_type_label(opts.export_handle_type) + " needs " +
                                   fabric_requirements + "; cudaMemPoolCreate on device " +
                                   std::to_string(device) + " returned " + cudaGetErrorName(s),
                                 s);
    }
    throw_cuda_error(s, "cudaMemPoolCreate", resource_name(kind));
  }
  // From here the pool is owned, and destroyed if anything below throws.
  pool_binding binding = bind(kind, pool, device, owned_pool{pool});
  set_pool_attribute(
    pool, cudaMemPoolAttrReleaseThreshold, opts.release_threshold.value_or(keep_all_threshold));
  if (opts.initial_pool_size && *opts.initial_pool_size > 0) {
    void* ptr{};
    cudaStream_t const stream = binding.state->stream();
    if (cudaError_t const s = cudaMallocFromPoolAsync(&ptr, *opts.initial_pool_size, pool, stream);
        s != cudaSuccess) {
      (void)cudaGetLastError();
      throw_error<out_of_memory>(resource_name(kind),
                                 "out_of_memory: could not reserve initial_pool_size of " +
                                   std::to_string(*opts.initial_pool_size) + " bytes on device " +
                                   std::to_string(device) + " (" + cudaGetErrorName(s) + ")");
    }
    RMM_NEXT_CUDA_TRY(cudaFreeAsync(ptr, stream), resource_name(kind));
    RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream), resource_name(kind));
  }
  return binding;
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
