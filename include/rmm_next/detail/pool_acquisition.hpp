/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/error_macros.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/pool_creation.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_state.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

/**
 * @file
 * @brief The four ways a resource acquires its pool (`acquire_pool`): the driver's current or
 * default pool, a pool it creates from `pool_options`, or a view of a caller's `cudaMemPool_t`.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief The driver's current pool (`current_pool`: `cudaMemGetMemPool`) or default pool
 * (`default_pool`: `cudaMemGetDefaultMemPool`) of `kind` for `device`; before CUDA 13.0, the
 * device's (`cudaDeviceGetMemPool`, `cudaDeviceGetDefaultMemPool`).
 */
template <class Source>
  requires std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool>
cudaMemPool_t driver_pool(memory_kind kind, int device, Source const&)
{
  constexpr bool current = std::is_same_v<Source, current_pool>;
  cudaMemPool_t pool{};
#if CUDART_VERSION >= 13000
  cudaMemLocation loc = default_location(kind, device);
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

/** @brief Binds the driver's current or default pool of `kind` for `device`. */
template <class Source>
  requires std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool>
pool_binding acquire_pool(memory_kind kind, int device, Source const& src)
{
#if CUDART_VERSION < 13000
  if (kind == memory_kind::pinned) {
    // No host pool is current or default before CUDA 13.0: the resource creates its own.
    return create_pool(kind, device, pool_options{.release_threshold = src.release_threshold});
  }
#endif
  pool_binding binding      = bind(kind, driver_pool(kind, device, src), device);
  binding.adopted           = true;
  binding.release_threshold = src.release_threshold;
  return binding;
}

/** @brief Binds a pool the caller owns; it is never modified beyond access grants nor destroyed. */
inline pool_binding acquire_pool(memory_kind kind, int device, cudaMemPool_t pool)
{
  if (pool == nullptr) {
    throw_error<logic_error>(resource_name(kind), "the cudaMemPool_t to view is null");
  }
  return bind(kind, pool, device);
}

/** @brief Creates a pool from `opts` that the resource owns. */
inline pool_binding acquire_pool(memory_kind kind, int device, pool_options const& opts)
{
  return create_pool(kind, device, opts);
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
