/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/owned_stream.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief `cudaMemPrefetchAsync` of `[ptr, ptr + bytes)` to `device`, in either CUDA's spelling. */
inline cudaError_t prefetch_to_device(void const* ptr,
                                      std::size_t bytes,
                                      int device,
                                      cudaStream_t stream) noexcept
{
#if CUDART_VERSION >= 13000
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id   = device;
  return cudaMemPrefetchAsync(ptr, bytes, location, 0, stream);
#else
  return cudaMemPrefetchAsync(ptr, bytes, device, stream);
#endif
}

/** @brief What memory of `type` is, for messages. */
constexpr char const* memory_type_name(cudaMemoryType type) noexcept
{
  switch (type) {
    case cudaMemoryTypeDevice: return "device memory";
    case cudaMemoryTypeHost: return "pinned host memory";
    case cudaMemoryTypeManaged: return "managed memory";
    default: return "host memory unknown to CUDA";
  }
}

/**
 * @brief What the copies of one `prefetch_adaptor` share: the device it prefetches to and a
 * non-blocking stream of that device, on which `allocate_sync` prefetches and waits.
 */
class prefetch_state {
 public:
  /** @brief Checks that `device` exists and can take prefetches, and makes the stream. */
  explicit prefetch_state(int device) : device_{checked_device(device, "prefetch_adaptor")}
  {
    int concurrent{};
    RMM_NEXT_CUDA_TRY(
      cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device_),
      "prefetch_adaptor");
    if (concurrent == 0) {
      throw_error<not_supported>("prefetch_adaptor",
                                 "prefetching managed memory needs a device with "
                                 "cudaDevAttrConcurrentManagedAccess; device " +
                                   std::to_string(device_) +
                                   " reports 0; allocate without the adaptor on this device");
    }
    stream_.emplace(device_, "prefetch_adaptor");
  }

  prefetch_state(prefetch_state const&)            = delete;
  prefetch_state& operator=(prefetch_state const&) = delete;

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_->get(); }

 private:
  int device_;
  std::optional<owned_stream> stream_;  ///< made once the device is known to take prefetches
};

}  // namespace detail

/**
 * @brief Prefetches every allocation of `Upstream` to a device (`cudaMemPrefetchAsync`), so that
 * kernels find managed memory there instead of faulting it in page by page. Meant for
 * `async_managed_resource`.
 *
 * `Upstream` is a resource (held by copy) or a resource ref (the resource it refers to must outlive
 * the adaptor). The adaptor offers what the upstream offers (stream-ordered and/or synchronous
 * members, the CCCL 3.0 names, every property), so it binds to the same ref types.
 *
 * - `allocate(stream, ...)` prefetches the new block on `stream`, after the allocation in stream
 *   order, and does not wait.
 * - `allocate_sync` prefetches on a non-blocking stream of the adaptor's own and waits for that
 *   prefetch only (never for the device or other streams): the pages are on the device when it
 *   returns.
 * - A prefetch that fails frees the block again and throws `cuda_error`: no allocation is lost
 *   and none comes back unprefetched.
 *
 * The adaptor checks at construction, at run time, what it would otherwise find only at the
 * first prefetch: a ref hides which memory a resource hands out, and pinned memory, host- and
 * device-accessible like managed memory, cannot be prefetched. Copies share the device and the
 * stream (and compare equal). Thread-safe; deallocation passes straight to the upstream.
 */
template <class Upstream>
class prefetch_adaptor : public cuda::forward_property<prefetch_adaptor<Upstream>, Upstream>,
                         public detail::forwarding_members<prefetch_adaptor<Upstream>, Upstream> {
 public:
  /**
   * @brief Prefetches what `upstream` allocates to `device`.
   *
   * Allocates and frees one block of 256 bytes from `upstream` to learn which memory it hands out.
   * @throws std::out_of_range when `device` is not a visible device.
   * @throws not_supported when `device` has no `cudaDevAttrConcurrentManagedAccess`, or the
   * upstream's memory is not managed memory (device, pinned or other host memory).
   * @throws cuda_error when a CUDA call fails (no driver or device, ...).
   */
  template <detail::upstream_argument<prefetch_adaptor, Upstream> Arg = Upstream>
  prefetch_adaptor(Arg&& upstream, int device)
    : upstream_(std::forward<Arg>(upstream)),
      state_{std::make_shared<detail::prefetch_state>(device)}
  {
    check_managed();
  }

  /// `allocate(stream, bytes, alignment)` when the upstream allocates in stream order: the
  /// upstream's block, prefetched to the device on `stream`. `allocate_sync` when it allocates
  /// synchronously: the block prefetched on the adaptor's stream, waited for. A failed prefetch
  /// frees the block again and throws `cuda_error`; whatever the upstream throws passes through.
  /// Frees go straight to the upstream. CCCL 3.0's names before CCCL 3.1.
  using detail::forwarding_members<prefetch_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<prefetch_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief The device the adaptor prefetches to. */
  [[nodiscard]] int device() const noexcept { return state_->device(); }

  /** @brief True when both share their state, i.e. one is a copy of the other. */
  friend bool operator==(prefetch_adaptor const& lhs, prefetch_adaptor const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

 private:
  friend detail::forwarding_members<prefetch_adaptor, Upstream>;

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    void* ptr = upstream.allocate(bytes, alignment);
    if (ptr == nullptr) { return ptr; }
    // A synchronous block must be usable at once: prefetched on a stream of ours, waited for.
    cudaStream_t const stream = Calls::synchronous ? state_->stream() : upstream.stream.get();
    char const* call          = "cudaMemPrefetchAsync";
    cudaError_t s             = detail::prefetch_to_device(ptr, bytes, device(), stream);
    if (s == cudaSuccess && Calls::synchronous) {
      call = "cudaStreamSynchronize";
      s    = cudaStreamSynchronize(stream);
    }
    if (s != cudaSuccess) {
      (void)cudaGetLastError();
      upstream.deallocate(ptr, bytes, alignment);
      detail::throw_cuda_error(s, call, "prefetch_adaptor");
    }
    return ptr;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    upstream.deallocate(ptr, bytes, alignment);
  }

  /** @brief The upstream bound as a probe allocates from it: synchronously when it can. */
  auto probe_calls()
  {
    if constexpr (detail::synchronous_upstream<Upstream>) {
      return detail::synchronous_calls<Upstream>{upstream_};
    } else {
      return detail::stream_ordered_calls<Upstream>{upstream_, cuda::stream_ref{state_->stream()}};
    }
  }

  /** @brief Throws `not_supported` unless a probe block of the upstream is managed memory. */
  void check_managed()
  {
    constexpr std::size_t bytes = default_alignment;
    auto const upstream         = probe_calls();
    void* ptr                   = upstream.allocate(bytes, default_alignment);
    cudaPointerAttributes attributes{};
    cudaError_t const s = cudaPointerGetAttributes(&attributes, ptr);
    upstream.deallocate(ptr, bytes, default_alignment);
    if (s != cudaSuccess) {
      detail::throw_cuda_error(s, "cudaPointerGetAttributes", "prefetch_adaptor");
    }
    if (attributes.type != cudaMemoryTypeManaged) {
      detail::throw_error<not_supported>(
        "prefetch_adaptor",
        std::string{"the upstream hands out "} + detail::memory_type_name(attributes.type) +
          ", which cannot be prefetched; wrap a resource of managed memory, such as "
          "async_managed_resource");
    }
  }

  Upstream upstream_;
  std::shared_ptr<detail::prefetch_state> state_;
};

/** @brief `prefetch_adaptor{upstream, device}` holds a copy of `upstream`. */
template <class Upstream>
prefetch_adaptor(Upstream, int) -> prefetch_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<prefetch_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<prefetch_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(detail::stream_ordered_resource_with<prefetch_adaptor<host_device_async_resource_ref>,
                                                   cuda::mr::device_accessible,
                                                   cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      prefetch_adaptor<host_device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
