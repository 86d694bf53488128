/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief What a `failure_callback_adaptor` calls when its upstream throws its `ExceptionType`
 * (`out_of_memory` unless chosen): `bool(bytes, stream, attempt)`.
 *
 * `bytes` is the size asked for, `stream` the stream of the allocation (the default stream,
 * `cuda::stream_ref{cudaStream_t{}}`, for `allocate_sync`) and `attempt` the number of failed
 * attempts of this allocation so far (1 at the first failure). Returning true retries the
 * allocation; false lets the exception go to the caller.
 */
using failure_callback = std::function<bool(std::size_t, cuda::stream_ref, std::size_t)>;

/**
 * @brief Calls a callback when `Upstream` throws `ExceptionType` (`out_of_memory` by default), and
 * retries the allocation while the callback returns true: the hook for spilling on out-of-memory
 * (cuDF, Spark RAPIDS).
 *
 * `Upstream` is a resource (held by copy) or a resource ref (the resource it refers to must outlive
 * the adaptor). The adaptor offers what the upstream offers (stream-ordered and/or synchronous
 * members, the CCCL 3.0 names, every property), so it binds to the same ref types.
 *
 * - Only `ExceptionType` (and types derived from it) calls the callback; every other exception
 *   goes to the caller unchanged, at once. With the default, `out_of_memory`, that includes
 *   `bad_alloc` for a bad alignment; `failure_callback_adaptor<Upstream, bad_alloc>` (RMM's
 *   `failure_callback_resource_adaptor<rmm::bad_alloc>`) calls it for both, and
 *   `std::bad_alloc` for host allocation failures too.
 * - When the callback returns false, the upstream's last exception is rethrown: the same
 *   object, type and message.
 * - An exception thrown by the callback goes to the caller in place of the upstream's.
 * - The callback runs on the allocating thread, with no lock of the adaptor held, so it may free
 *   memory through this adaptor or a copy of it (spill) and other threads keep allocating. It may
 *   run on several threads at once: it must be thread-safe. It decides when to stop: one that
 *   always returns true retries for ever.
 *
 * Copies share the callback (and compare equal); deallocation passes straight to the upstream.
 */
template <class Upstream, class ExceptionType = out_of_memory>
class failure_callback_adaptor
  : public cuda::forward_property<failure_callback_adaptor<Upstream, ExceptionType>, Upstream>,
    public detail::forwarding_members<failure_callback_adaptor<Upstream, ExceptionType>, Upstream> {
  using members = detail::forwarding_members<failure_callback_adaptor, Upstream>;

 public:
  /** @brief The type of exception that calls the callback (and its derived types). */
  using exception_type = ExceptionType;

  /**
   * @brief Allocates from `upstream`, calling `callback` when it throws `ExceptionType`.
   * @throws rmm_next::logic_error when `callback` is empty.
   */
  template <detail::upstream_argument<failure_callback_adaptor, Upstream> Arg = Upstream>
  failure_callback_adaptor(Arg&& upstream, failure_callback callback)
    : upstream_(std::forward<Arg>(upstream)),
      callback_{std::make_shared<failure_callback const>(std::move(callback))}
  {
    if (!*callback_) {
      detail::throw_error<logic_error>("failure_callback_adaptor",
                                       "the callback is empty; pass a callable "
                                       "bool(std::size_t bytes, cuda::stream_ref stream, "
                                       "std::size_t attempt)");
    }
  }

  /// `allocate(stream, bytes, alignment)` when the upstream allocates in stream order,
  /// `allocate_sync` when it allocates synchronously: on `ExceptionType`, the callback is called
  /// with the allocation's stream (the default stream, `cuda::stream_ref{cudaStream_t{}}`, for
  /// `allocate_sync`) and the allocation tried again while it returns true; then the upstream's
  /// last exception is rethrown. Frees go straight to the upstream. CCCL 3.0's names before
  /// CCCL 3.1.
  using members::allocate;
  using members::deallocate;

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share the callback, i.e. one is a copy of the other. */
  friend bool operator==(failure_callback_adaptor const& lhs,
                         failure_callback_adaptor const& rhs) noexcept
  {
    return lhs.callback_ == rhs.callback_;
  }

 private:
  friend members;

  /** @brief The upstream's allocation, tried again after each `ExceptionType` the callback
   * answers true. */
  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    for (std::size_t attempt = 1;; ++attempt) {
      try {
        return upstream.allocate(bytes, alignment);
      } catch (ExceptionType const&) {
        if (!(*callback_)(bytes, upstream.stream, attempt)) { throw; }
      }
    }
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    upstream.deallocate(ptr, bytes, alignment);
  }

  Upstream upstream_;
  std::shared_ptr<failure_callback const> callback_;
};

/** @brief `failure_callback_adaptor{upstream, callback}` holds a copy of `upstream` and calls
 * `callback` on `out_of_memory`. */
template <class Upstream, class Callback>
failure_callback_adaptor(Upstream, Callback) -> failure_callback_adaptor<Upstream>;

static_assert(
  detail::stream_ordered_resource_with<failure_callback_adaptor<device_async_resource_ref>,
                                       cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<failure_callback_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(std::is_constructible_v<device_async_resource_ref,
                                      failure_callback_adaptor<device_async_resource_ref>&>);
static_assert(detail::stream_ordered_resource_with<
              failure_callback_adaptor<device_async_resource_ref, bad_alloc>,
              cuda::mr::device_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
