/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/device_queries.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/handle_names_and_fabric.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/pool_attributes.hpp>
#include <rmm_next/detail/pool_errors.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_state.hpp>
#include <rmm_next/detail/pool_support.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

/**
 * @file
 * @brief How a resource gets its device and its pool: the device it works for (the one named or
 * the current one, or for a viewed pool the device the pool belongs to), validated and checked
 * for support (`resolve_device`, `resolve_view_device`), which with the kind of memory makes the
 * pool's `pool_target`; then one of four ways to acquire the pool for it (`acquire_pool`): the
 * driver's current or default pool, a pool it creates from `pool_options` (`create_pool`), or a
 * view of a caller's `cudaMemPool_t`.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

// ---- The device ------------------------------------------------------------------------------

/** @brief What the resource works for: `kind` on `device`, or on the current one; validated. */
inline pool_target resolve_device(memory_kind kind, std::optional<int> device)
{
  pool_target const target{kind, device_or_current(device, resource_name(kind))};
  check_support(target);
  return target;
}

/**
 * @brief The device a resource viewing the caller's `pool` works for. A device pool belongs to
 * the device whose kernels use it without a grant: it is found among the devices with read-write
 * access (`cudaMemPoolGetAccess`), not taken from whichever device is current. A device the
 * caller names must have that access; when several devices have it (peer access granted), the
 * caller must name one. Other kinds of pool: as `resolve_device`.
 */
inline pool_target resolve_view_device(memory_kind kind,
                                       cudaMemPool_t pool,
                                       std::optional<int> device)
{
  if (kind != memory_kind::device || pool == nullptr) { return resolve_device(kind, device); }
  int const count = device_count(resource_name(kind));
  if (device) { checked_device(*device, count, resource_name(kind)); }
  std::vector<int> users;
  std::string listed;
  for (int d = 0; d < count; ++d) {
    if (has_read_write_access(pool, d)) {
      listed += (users.empty() ? "" : ", ") + std::to_string(d);
      users.push_back(d);
    }
  }
  if (device && std::find(users.begin(), users.end(), *device) == users.end()) {
    throw_error<logic_error>(resource_name(kind),
                             "the viewed pool is not accessible from device " +
                               std::to_string(*device) + "; name the device the pool belongs to");
  }
  if (!device && users.size() > 1) {
    throw_error<logic_error>(
      resource_name(kind),
      "the viewed pool is accessible from devices " + listed +
        ", so its own device cannot be told; name it: " + resource_name(kind) + "{pool, device}");
  }
  pool_target const target{kind,
                           device          ? *device
                           : users.empty() ? current_device(resource_name(kind))
                                           : users.front()};
  check_support(target);
  return target;
}

// ---- A pool the resource creates ----------------------------------------------------------------

/**
 * @brief Creates a pool from `opts` that the resource owns: checks the options and the device's
 * support, creates it, sets its release threshold and primes `initial_pool_size` once.
 */
inline pool_binding create_pool(pool_target target, pool_options const& opts)
{
  auto const [kind, device] = target;
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
  props.location    = opts.location.value_or(default_location(target));
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
  pool_binding binding = bind(target, pool, owned_pool{pool});
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

// ---- The four ways to acquire a pool -----------------------------------------------------------

/**
 * @brief The driver's current pool (`current_pool`: `cudaMemGetMemPool`) or default pool
 * (`default_pool`: `cudaMemGetDefaultMemPool`) for `target`; before CUDA 13.0, the device's
 * (`cudaDeviceGetMemPool`, `cudaDeviceGetDefaultMemPool`).
 */
template <class Source>
  requires std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool>
cudaMemPool_t driver_pool(pool_target target, Source const&)
{
  auto const [kind, device] = target;
  constexpr bool current    = std::is_same_v<Source, current_pool>;
  cudaMemPool_t pool{};
#if CUDART_VERSION >= 13000
  cudaMemLocation loc = default_location(target);
  if constexpr (current) {
    RMM_NEXT_CUDA_TRY(cudaMemGetMemPool(&pool, &loc, allocation_type(kind)), resource_name(kind));
  } else {
    RMM_NEXT_CUDA_TRY(cudaMemGetDefaultMemPool(&pool, &loc, allocation_type(kind)),
                      resource_name(kind));
  }
#else
  if constexpr (current) {
    RMM_NEXT_CUDA_TRY(cudaDeviceGetMemPool(&pool, device), resource_name(kind));
  } else {
    RMM_NEXT_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device), resource_name(kind));
  }
#endif
  return pool;
}

/** @brief Binds the driver's current or default pool for `target`. */
template <class Source>
  requires std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool>
pool_binding acquire_pool(pool_target target, Source const& src)
{
#if CUDART_VERSION < 13000
  if (target.kind == memory_kind::pinned) {
    // No host pool is current or default before CUDA 13.0: the resource creates its own.
    return create_pool(target, pool_options{.release_threshold = src.release_threshold});
  }
#endif
  pool_binding binding      = bind(target, driver_pool(target, src));
  binding.adopted           = true;
  binding.release_threshold = src.release_threshold;
  return binding;
}

/** @brief Binds a pool the caller owns; it is never modified beyond access grants nor destroyed. */
inline pool_binding acquire_pool(pool_target target, cudaMemPool_t pool)
{
  if (pool == nullptr) {
    throw_error<logic_error>(resource_name(target.kind), "the cudaMemPool_t to view is null");
  }
  return bind(target, pool);
}

/** @brief Creates a pool from `opts` that the resource owns. */
inline pool_binding acquire_pool(pool_target target, pool_options const& opts)
{
  return create_pool(target, opts);
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
