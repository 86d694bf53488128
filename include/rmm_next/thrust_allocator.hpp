/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/allocator_base.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <thrust/device_ptr.h>
#include <thrust/device_reference.h>
#include <thrust/system/cuda/execution_policy.h>

#include <cstddef>
#include <new>
#include <optional>
#include <type_traits>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief A stream-ordered allocator for Thrust containers: `thrust::device_vector<T,
 * thrust_allocator<T>>` allocates and frees its memory on one stream, from a resource ref.
 *
 * `allocate(n)` is `resource.allocate(stream, n * sizeof(T), alignof(T))` and `deallocate` frees
 * on the same stream, so a vector's memory is ordered after earlier work on the stream and
 * returned once the stream reaches the vector's destruction, without synchronizing the device.
 *
 * The container also initializes, copies and destroys its elements on that stream: the allocator
 * is Thrust's execution policy for them (`system()`, which is `thrust::cuda::par.on(stream)`), so
 * that memory allocated on `stream` is never touched by work on another stream first. Like every
 * `thrust::cuda::par` algorithm these wait for the stream before returning. Run your own
 * algorithms on the vector with `thrust::cuda::par.on(alloc.stream())` (or `par_nosync`) too.
 *
 * The allocator belongs to one device: the stream's, which for the default streams (0,
 * `cudaStreamLegacy`, `cudaStreamPerThread`) is the device current when the allocator is made.
 * `allocate` and `deallocate` make that device current while they run, as RMM's allocator does,
 * so a vector made on device 0 and destroyed while device 1 is current frees its memory in the
 * order of device 0's default stream, after the device-0 work that may still use it.
 *
 * The ref does not own the resource: the resource must outlive the allocator and every container
 * using it. Two allocators compare equal when they use the same resource and the same stream.
 * Containers take the allocator with them on copy and move assignment and on swap, so memory is
 * always freed by the resource and on the stream it was allocated with.
 *
 * Needs nvcc to instantiate Thrust containers; the header itself compiles with any C++20
 * compiler.
 *
 * @tparam T The element type; `alignof(T)` at most 256.
 */
template <class T>
class thrust_allocator : public detail::allocator_base<T> {
 public:
  using pointer         = thrust::device_ptr<T>;
  using const_pointer   = thrust::device_ptr<T const>;
  using reference       = thrust::device_reference<T>;
  using const_reference = thrust::device_reference<T const>;
  /** @brief The execution policy a container runs its element construction and copies with. */
  using system_type = decltype(thrust::cuda::par.on(cudaStream_t{}));

  /** @brief The same allocator for elements of type `U`. */
  template <class U>
  struct rebind {
    using other = thrust_allocator<U>;
  };

  /**
   * @brief Allocates on the current device's default stream from its process-wide resource
   * (`get_current_device_resource_ref()`), as RMM's `thrust_allocator` does.
   * @throws cuda_error if no usable CUDA driver or device exists.
   */
  thrust_allocator() : thrust_allocator(cuda::stream_ref{cudaStream_t{}}) {}

  /**
   * @brief Allocates on `stream` from the process-wide resource of the stream's device
   * (`get_per_device_resource_ref(device())`).
   * @throws cuda_error if no usable CUDA driver or device exists.
   */
  explicit thrust_allocator(cuda::stream_ref stream)
    : thrust_allocator(stream, get_per_device_resource_ref(known_device(stream)))
  {
  }

  /**
   * @brief Allocates on `stream` from `resource`, which must outlive the allocator and serve the
   * stream's device.
   */
  thrust_allocator(cuda::stream_ref stream, device_async_resource_ref resource) noexcept
    : resource_{resource},
      stream_{stream},
      device_{detail::stream_device(stream.get())},
      policy_{thrust::cuda::par.on(stream.get())}
  {
  }

  /** @brief Copies use the same stream and resource; moves copy (a moved-from allocator stays
   * usable). */
  thrust_allocator(thrust_allocator const&) noexcept            = default;
  thrust_allocator& operator=(thrust_allocator const&) noexcept = default;

  /** @brief The same stream and resource as `other` (the rebind conversion). */
  template <class U>
  thrust_allocator(
    thrust_allocator<U> const& other) noexcept  // NOLINT(google-explicit-constructor)
    : resource_{other.resource()},
      stream_{other.stream()},
      device_{other.device()},
      policy_{thrust::cuda::par.on(other.stream().get())}
  {
  }

  /**
   * @brief Allocates memory for `n` objects of type `T` in the order of `stream()`.
   * @return A null pointer when `n` is 0.
   * @throws std::bad_array_new_length if `n * sizeof(T)` overflows.
   * @throws what the resource throws (`bad_alloc`, `out_of_memory`, ...).
   */
  [[nodiscard]] pointer allocate(std::size_t n)
  {
    std::size_t const bytes = detail::array_bytes<T>(n);
    std::optional<detail::device_guard> guard;
    if (needs_switch()) { guard.emplace(device_); }
    return pointer{static_cast<T*>(resource_.allocate(stream_, bytes, alignof(T)))};
  }

  /**
   * @brief Frees `ptr` (from `allocate(n)` of an equal allocator) in the order of `stream()`, with
   * `device()` current.
   */
  void deallocate(pointer ptr, std::size_t n) noexcept
  {
    std::optional<detail::device_guard> guard;
    if (needs_switch()) { guard.emplace(device_, std::nothrow); }
    resource_.deallocate(stream_, ptr.get(), n * sizeof(T), alignof(T));
  }

  /** @brief The largest `n` that `allocate(n)` accepts. */
  [[nodiscard]] constexpr std::size_t max_size() const noexcept
  {
    return detail::max_array_size<T>;
  }

  /** @brief The stream memory is allocated and freed on. */
  [[nodiscard]] cuda::stream_ref stream() const noexcept { return stream_; }

  /** @brief The device of `stream()`, current while memory is allocated and freed; -1
   * (`detail::no_device`) when the driver could not tell at construction. */
  [[nodiscard]] int device() const noexcept { return device_; }

  /** @brief The resource memory comes from. */
  [[nodiscard]] device_async_resource_ref resource() const noexcept { return resource_; }

  /** @brief Thrust's execution policy for the container's own element work: `stream()`. */
  [[nodiscard]] system_type& system() noexcept { return policy_; }

  /** @brief True when both use the same resource and the same stream. */
  template <class U>
  [[nodiscard]] bool operator==(thrust_allocator<U> const& other) const noexcept
  {
    return resource_ == other.resource() && stream_ == other.stream();
  }

 private:
  /** @brief The stream's device. @throws cuda_error if the driver cannot tell. */
  static int known_device(cuda::stream_ref stream)
  {
    int const device = detail::stream_device(stream.get());
    return detail::is_device_id(device) ? device : detail::current_device("thrust_allocator");
  }

  /** @brief True when `device_` is known and not current: allocate and free must switch. */
  [[nodiscard]] bool needs_switch() const noexcept
  {
    return detail::is_device_id(device_) && detail::current_device_or_none() != device_;
  }

  device_async_resource_ref resource_;
  cuda::stream_ref stream_;
  int device_;
  system_type policy_;
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
