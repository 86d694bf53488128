/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/memory_kind.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/pool_acquisition.hpp>
#include <rmm_next/detail/pool_attributes.hpp>
#include <rmm_next/detail/pool_errors.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_state.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/pool_statistics.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

namespace detail {

template <class Source>
inline constexpr bool is_pool_source =
  std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool> ||
  std::is_same_v<Source, pool_options> || std::is_same_v<Source, cudaMemPool_t>;

/**
 * @brief The machinery the three async resources share: pool choice and ownership,
 * stream-ordered and synchronous allocation, statistics, equality.
 *
 * `Derived` names its `memory_kind` as `static constexpr detail::memory_kind kind`. Allocations
 * and frees are NVTX ranges, and each allocation is named for tools (see detail/nvtx.hpp).
 */
template <class Derived>
class RMM_NEXT_NVTX_ABI async_pool_resource : public compat_members<Derived> {
 public:
  /** @brief The current pool of the current device. */
  async_pool_resource() : async_pool_resource(current_pool{}) {}

  /**
   * @brief The current pool of `device`.
   * @throws std::out_of_range if `device` is not a visible device.
   */
  explicit async_pool_resource(int device) : async_pool_resource(current_pool{}, device) {}

  /**
   * @brief The pool chosen by `source` for `device` (the current device if none).
   *
   * `source` is `current_pool{}`, `default_pool{}`, a `pool_options` (the resource creates and
   * owns the pool) or a `cudaMemPool_t` the caller owns (viewed, never destroyed). A viewed device
   * pool belongs to its own device, not to the current one: without `device` it is the one device
   * with read-write access to the pool; a pool that several devices may use needs `device`.
   * @throws cuda_error when no usable driver or device exists.
   * @throws not_supported when the runtime, driver or device lacks the feature.
   * @throws std::out_of_range if `device` is not a visible device.
   * @throws logic_error if a viewed device pool is not accessible from `device`, or, without
   * `device`, from exactly one device.
   */
  template <class Source>
    requires is_pool_source<Source>
  explicit async_pool_resource(Source const& source, std::optional<int> device = std::nullopt)
    : async_pool_resource(bind_source(source, device, nullptr))
  {
  }

  /// Copies share the pool. Moving copies too (no move members are declared), so a moved-from
  /// handle still names its pool and refs bound to it stay usable.
  async_pool_resource(async_pool_resource const&) noexcept            = default;
  async_pool_resource& operator=(async_pool_resource const&) noexcept = default;
  ~async_pool_resource()                                              = default;

  /**
   * @brief Allocates `bytes` in the order of `stream`.
   * @return nullptr for 0 bytes, else memory aligned to 256 bytes, usable by work on `stream`.
   *
   * The stream must belong to the resource's device or to one with read-write access to the pool
   * (`cudaMemPoolSetAccess`; for pinned memory, the devices it was granted to). With more than
   * one visible device this is checked: one driver call (`cuStreamGetCtx`) for a stream of the
   * device's primary context, three for other streams; managed memory is usable from every
   * device and is not checked. The default streams (0,
   * `cudaStreamLegacy`, `cudaStreamPerThread`) belong to the current device.
   * @throws bad_alloc if `alignment` is not a power of two no greater than 256.
   * @throws out_of_memory if the pool cannot grow enough.
   * @throws device_mismatch if the stream's device has no access to the memory.
   */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    return allocate_on(stream.get(), bytes, alignment, check_streams_);
  }

  /**
   * @brief Frees `ptr` in the order of `stream` (`cudaFreeAsync`); nullptr does nothing.
   *
   * Any stream may free, also one of another device (the stream's device is not checked): the
   * memory returns to the pool once the stream reaches the free, so every use of it must be
   * ordered before that point.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = default_alignment) noexcept
  {
    nvtx_range const range{nvtx_range_names().deallocate};
    if (ptr == nullptr) { return; }
    if (cudaError_t const s = cudaFreeAsync(ptr, stream.get()); s != cudaSuccess) {
      report_release_failure(s, "cudaFreeAsync");
    }
  }

  /**
   * @brief Allocates memory that any stream, and the host for host-accessible kinds, may use as
   * soon as this returns. Waits only for the allocation itself, on a stream of the resource's
   * own: neither the device nor other streams are synchronized.
   * @throws as `allocate`.
   */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    nvtx_range const range{nvtx_range_names().allocate_sync};
    cudaStream_t const stream = state_->stream();
    void* ptr                 = allocate_on(stream, bytes, alignment, false);  // our own stream
    if (ptr != nullptr) {
      if (cudaError_t const s = cudaStreamSynchronize(stream); s != cudaSuccess) {
        (void)cudaFreeAsync(ptr, stream);
        throw_cuda_error(s, "cudaStreamSynchronize", resource_name(Derived::kind));
      }
    }
    return ptr;
  }

  /** @brief Frees memory no pending work uses any more; nullptr does nothing. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
  {
    deallocate(state_->stream(), ptr, bytes, alignment);
  }

  /// Compile errors for a literal 0 stream; before CCCL 3.1, CCCL 3.0's names of the members
  /// above (`cuda::mr::resource` / `async_resource` of CCCL 3.0 require them).
  using compat_members<Derived>::allocate;
  using compat_members<Derived>::deallocate;

  /** @brief The driver pool this resource allocates from. */
  [[nodiscard]] cudaMemPool_t pool_handle() const noexcept { return pool_; }

  /** @brief The device the resource was made for. */
  [[nodiscard]] int device() const noexcept { return state_->device(); }

  /**
   * @brief The pool's statistics, read from its attributes now; with CUDA 13.3 and later also
   * its allocation type, export handle types, location, maximum size and hardware decompression
   * (`pool_statistics`).
   */
  [[nodiscard]] pool_statistics statistics() const { return read_pool_statistics(pool_); }

  /** @brief Resets the pool's reserved and used high watermarks to their current values. */
  void reset_high_watermarks() const
  {
    set_pool_attribute(pool_, cudaMemPoolAttrReservedMemHigh, 0);
    set_pool_attribute(pool_, cudaMemPoolAttrUsedMemHigh, 0);
  }

  /** @brief True when both resources allocate from the same pool. */
  friend bool operator==(Derived const& lhs, Derived const& rhs) noexcept
  {
    return lhs.pool_ == rhs.pool_;
  }

 protected:
  explicit async_pool_resource(pool_binding binding) noexcept
    : pool_{binding.state->pool()},
      check_streams_{binding.check_streams},
      state_{std::move(binding.state)}
  {
  }

  /**
   * @brief Resolves the device, checks support and binds the pool `source` names. Pinned pools
   * get device access for `accessible_devices` (every visible device when null). The release
   * threshold of a driver pool is adopted after everything that may throw.
   */
  template <class Source>
  static pool_binding bind_source(Source const& source,
                                  std::optional<int> device,
                                  std::vector<int> const* accessible_devices)
  {
    pool_target target{};
    if constexpr (std::is_same_v<Source, cudaMemPool_t>) {
      target = resolve_view_device(Derived::kind, source, device);  // the pool's device
    } else {
      target = resolve_device(Derived::kind, device);
    }
    // The runtime calls below make the current device's context on a thread that has none:
    // with the resource's device current, that is its context, never device 0's. None of them is
    // refused, nor invalidates a capture, while a graph is captured on any thread.
    relaxed_capture_mode const relaxed;
    device_guard const on_device{target.device};
    pool_binding binding     = acquire_pool(target, source);
    cudaMemPool_t const pool = binding.state->pool();
    if constexpr (Derived::kind == memory_kind::pinned) {
      grant_device_access(pool, accessible_devices);
    }
    // With one device every stream is the resource's; managed memory is usable from any device.
    binding.check_streams =
      Derived::kind != memory_kind::managed && device_count(resource_name(Derived::kind)) > 1;
    // Last: a pool others share is changed only by a construction that succeeds.
    if (binding.adopted) { adopt_release_threshold(pool, binding.release_threshold); }
    return binding;
  }

 private:
  /** @brief The NVTX range names of `Derived` ("async_device_resource::allocate", ...). */
  static decltype(auto) nvtx_range_names() noexcept
  {
    return nvtx_names<Derived>(resource_name(Derived::kind));
  }

  static void check_alignment(std::size_t alignment)
  {
    if (!is_valid_alignment(alignment)) { throw_bad_alignment(Derived::kind, alignment); }
  }

  /** @brief `allocate`, checking the stream's device first when `check_stream` is true. */
  void* allocate_on(cudaStream_t stream,
                    std::size_t bytes,
                    std::size_t alignment,
                    bool check_stream)
  {
    nvtx_range const range{nvtx_range_names().allocate};
    check_alignment(alignment);
    if (bytes == 0) { return nullptr; }
    if (check_stream) { check_stream_device(stream); }
    void* ptr{};
    if (cudaError_t const s = cudaMallocFromPoolAsync(&ptr, bytes, pool_, stream);
        s != cudaSuccess) {
      throw_allocation_failure(state_->target(), s, bytes, stream);
    }
    // Graph memory (an allocation during capture) is no allocation yet to the tools, which
    // refuse a name for it. Without a tool the naming does nothing and the question is not asked.
    if (!nvtx_tool_injected() || stream_is_eager(stream)) {
      nvtx_name_region(ptr, state_->allocation_name());
    }
    return ptr;
  }

  /**
   * @brief Throws `device_mismatch` unless the stream belongs to the resource's device or to one
   * with read-write access to the pool. Unknown (the driver cannot tell): no check.
   */
  void check_stream_device(cudaStream_t stream) const
  {
    int on{no_device};
    if (is_default_stream(stream)) {
      on = current_device_or_none();
    } else {
      // One driver call for the common case, a stream the runtime made on the resource's device:
      // its context is the device's primary context.
      if (CUcontext const context = stream_context(stream);
          context != nullptr && context == state_->context()) {
        return;
      }
      // A stream being captured refuses the device query, and the refusal invalidates the
      // capture: captured allocations on other contexts are not checked.
      if (!stream_is_eager(stream)) { return; }
      on = stream_device(stream);
    }
    if (!is_device_id(on) || on == state_->device()) { return; }
    if (!state_->accessible_from(on)) { throw_device_mismatch(state_->target(), on); }
  }

  // The pool, read on every allocation and comparison, is kept here as well as in `state_` (its
  // owner, with the device): the hot path follows no pointer. The class keeps its size (the
  // device's old slot is padding).
  cudaMemPool_t pool_;
  bool check_streams_;
  std::shared_ptr<pool_state> state_;
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
