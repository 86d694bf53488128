/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/owned_stream.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/error_macros.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief What the copies of one resource share (`pool_state`: the pool, its ownership, the stream
 * of `allocate_sync`) and the binding of a chosen pool to it (`pool_binding`, `bind`).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief Destroys a pool the resource created. Memory still allocated from it, or frees not yet
 * executed, make the driver release the pool's memory once they are gone (`cudaMemPoolDestroy`
 * returns at once).
 */
struct pool_destroyer {
  void operator()(cudaMemPool_t pool) const noexcept
  {
    if (cudaError_t const s = cudaMemPoolDestroy(pool); s != cudaSuccess) {
      report_release_failure(s, "cudaMemPoolDestroy");
    }
  }
};

/** @brief Ownership of a pool the resource created, from `cudaMemPoolCreate` on. */
using owned_pool = std::unique_ptr<std::remove_pointer_t<cudaMemPool_t>, pool_destroyer>;

/**
 * @brief What the copies of one resource share: the pool (destroyed with the last copy when the
 * resource created it) and the stream on which `allocate_sync` works.
 */
class pool_state {
 public:
  /** @brief `owner` owns `pool` when the resource created it, else is empty. */
  pool_state(memory_kind kind, cudaMemPool_t pool, int device, owned_pool owner)
    : pool_{pool},
      owner_{std::move(owner)},
      device_{device},
      allocation_name_{detail::allocation_name(kind, device, pool)}
  {
    // Synchronous allocations run on it. If this throws, `owner_` destroys the pool.
    stream_.emplace(device);
  }

  pool_state(pool_state const&)            = delete;
  pool_state& operator=(pool_state const&) = delete;

  ~pool_state()
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) {
      // The runtime is going, or this is a forked child that cannot use it: no CUDA call.
      (void)owner_.release();
      return;
    }
    // On the pool's device: on a thread without a current context, the runtime would otherwise
    // make device 0's primary context for these calls.
    device_guard const on_device{device_, std::nothrow};
    stream_.reset();
    owner_.reset();  // destroys an owned pool
  }

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_->get(); }

  /**
   * @brief The primary context of the resource's device (null if the driver could not say): the
   * context of every stream the runtime creates on that device.
   */
  [[nodiscard]] CUcontext context() const noexcept { return stream_->context(); }

  /** @brief What tools call the pool's allocations (`allocation_name`). */
  [[nodiscard]] char const* allocation_name() const noexcept { return allocation_name_.data(); }

  /**
   * @brief True when kernels on `device` may read and write the pool's memory
   * (`cudaMemPoolGetAccess`). A positive answer is kept for devices below 64; access is taken
   * back only by the pool's owner, never while the resource hands out its memory.
   */
  [[nodiscard]] bool accessible_from(int device) noexcept
  {
    std::uint64_t const bit = device < 64 ? std::uint64_t{1} << device : 0;
    if ((accessible_.load(std::memory_order_relaxed) & bit) != 0) { return true; }
    if (!has_read_write_access(pool_, device)) { return false; }
    accessible_.fetch_or(bit, std::memory_order_relaxed);
    return true;
  }

 private:
  cudaMemPool_t pool_;
  owned_pool owner_;
  int device_;                                ///< the device the resource works for
  std::optional<owned_stream> stream_;        ///< the resource's own (never empty once constructed)
  std::atomic<std::uint64_t> accessible_{0};  ///< devices known to have read-write access
  std::array<char, 50> allocation_name_;
};

/** @brief A pool chosen for a resource: the handle and its shared state. */
struct pool_binding {
  cudaMemPool_t pool{};
  int device{};
  std::shared_ptr<pool_state> state;
  bool check_streams{false};  ///< whether `allocate` checks the stream's device
  /// The driver's current or default pool, shared with others: the release-threshold rule
  /// (`adopt_release_threshold`) applies, once nothing can fail any more.
  bool adopted{false};
  std::optional<std::size_t> release_threshold{};  ///< the caller's threshold for `adopted`
};

/** @brief Binds `pool`; `owner` owns it when the resource created it (and destroys it if this
 * throws). */
inline pool_binding bind(memory_kind kind, cudaMemPool_t pool, int device, owned_pool owner = {})
{
  return pool_binding{
    pool, device, std::make_shared<pool_state>(kind, pool, device, std::move(owner))};
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
