/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
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
 * @brief What the copies of one resource share (`pool_state`: the pool, what it serves, its
 * ownership, the stream of `allocate_sync`) and the binding of a chosen pool to it
 * (`pool_binding`, `bind`).
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
    relaxed_capture_mode const relaxed;  // a capture on any thread refuses no destruction
    if (cudaError_t const s = cudaMemPoolDestroy(pool); s != cudaSuccess) {
      report_release_failure(s, "cudaMemPoolDestroy");
    }
  }
};

/** @brief Ownership of a pool the resource created, from `cudaMemPoolCreate` on. */
using owned_pool = std::unique_ptr<std::remove_pointer_t<cudaMemPool_t>, pool_destroyer>;

/**
 * @brief What the copies of one resource share: the pool (destroyed with the last copy when the
 * resource created it), the kind and device it serves, and the stream on which `allocate_sync`
 * works. The one owner of the pool and the device: bindings and resources read them here.
 */
class pool_state {
 public:
  /** @brief `owner` owns `pool` when the resource created it, else is empty. */
  pool_state(pool_target target, cudaMemPool_t pool, owned_pool owner)
    : pool_{pool},
      owner_{std::move(owner)},
      target_{target},
      allocation_name_{detail::allocation_name(target, pool)}
  {
    // Synchronous allocations run on it. If this throws, `owner_` destroys the pool.
    stream_.emplace(target.device);
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
    device_guard const on_device{target_.device, std::nothrow};
    stream_.reset();
    owner_.reset();  // destroys an owned pool
  }

  /** @brief The pool. */
  [[nodiscard]] cudaMemPool_t pool() const noexcept { return pool_; }

  /** @brief The kind of memory and the device the pool serves. */
  [[nodiscard]] pool_target target() const noexcept { return target_; }

  /** @brief The device the resource works for. */
  [[nodiscard]] int device() const noexcept { return target_.device; }

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
  pool_target target_;                        ///< the kind and the device the resource works for
  std::optional<owned_stream> stream_;        ///< the resource's own (never empty once constructed)
  std::atomic<std::uint64_t> accessible_{0};  ///< devices known to have read-write access
  std::array<char, 50> allocation_name_;
};

/** @brief A pool chosen for a resource: its shared state (the pool, the device), and what the
 * construction still does with it. */
struct pool_binding {
  std::shared_ptr<pool_state> state;
  bool check_streams{false};  ///< whether `allocate` checks the stream's device
  /// The driver's current or default pool, shared with others: the release-threshold rule
  /// (`adopt_release_threshold`) applies, once nothing can fail any more.
  bool adopted{false};
  std::optional<std::size_t> release_threshold{};  ///< the caller's threshold for `adopted`
};

/** @brief Binds `pool`; `owner` owns it when the resource created it (and destroys it if this
 * throws). */
inline pool_binding bind(pool_target target, cudaMemPool_t pool, owned_pool owner = {})
{
  return pool_binding{std::make_shared<pool_state>(target, pool, std::move(owner))};
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
