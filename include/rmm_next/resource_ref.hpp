/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/export.hpp>

#include <cstddef>
#include <type_traits>

/**
 * @file
 * @brief Resource-ref types with one spelling on every CCCL.
 *
 * Stream-ordered refs offer `allocate(stream, bytes, alignment)` and
 * `deallocate(stream, ptr, bytes, alignment)`; every ref offers `allocate_sync(bytes, alignment)`
 * and `deallocate_sync(ptr, bytes, alignment)`. On CCCL 3.1 and later the aliases name CCCL's own
 * `cuda::mr::resource_ref` / `synchronous_resource_ref`. On older CCCL they name a thin type over
 * `cuda::mr::async_resource_ref` / `resource_ref` that adds those members and converts to the CCCL
 * type, so code written against rmm-next compiles unchanged when CCCL is upgraded.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

#if RMM_NEXT_CCCL_STREAM_ORDERED_MR

namespace detail {
/** @brief The stream-ordered ref to memory with `Properties`, on this CCCL. */
template <class... Properties>
using async_ref = cuda::mr::resource_ref<Properties...>;
/** @brief The synchronous ref to memory with `Properties`, on this CCCL. */
template <class... Properties>
using sync_ref = cuda::mr::synchronous_resource_ref<Properties...>;
}  // namespace detail

#else

namespace detail {

template <class CcclRef>
class ref_adaptor;

template <class T>
inline constexpr bool is_ref_adaptor = false;
template <class CcclRef>
inline constexpr bool is_ref_adaptor<ref_adaptor<CcclRef>> = true;

template <class CcclRef>
inline constexpr bool is_async_cccl_ref = false;
template <class... Properties>
inline constexpr bool is_async_cccl_ref<cuda::mr::async_resource_ref<Properties...>> = true;

/**
 * @brief A CCCL < 3.1 resource ref with the member names of CCCL 3.1 and later, and only those.
 *
 * Binds to a resource lvalue exactly as `CcclRef` does, converts to `CcclRef` (it is one), and
 * converts from any adaptor whose CCCL ref converts to `CcclRef` (a superset of properties).
 * CCCL 3.0's own names (`allocate(bytes, alignment)`, `allocate_async`, ...) are hidden: CCCL 3.1
 * and later do not have them, so code using them would break when CCCL is upgraded.
 */
template <class CcclRef>
class ref_adaptor : public CcclRef, public stream_first {
 public:
  /** @brief Binds to `resource`, which must outlive the ref. */
  template <class Resource>
    requires(!is_ref_adaptor<std::remove_cv_t<Resource>> &&
             std::is_constructible_v<CcclRef, Resource&>)
  ref_adaptor(Resource& resource) noexcept : CcclRef(resource)  // NOLINT(implicit)
  {
  }

  /** @brief Wraps a CCCL ref. */
  ref_adaptor(CcclRef const& ref) noexcept : CcclRef(ref) {}  // NOLINT(implicit)

  /** @brief Converts from a ref with a superset of the properties. */
  template <class OtherRef>
    requires(!std::is_same_v<OtherRef, CcclRef> &&
             std::is_constructible_v<CcclRef, OtherRef const&>)
  ref_adaptor(ref_adaptor<OtherRef> const& other) noexcept  // NOLINT(implicit)
    : CcclRef(static_cast<OtherRef const&>(other))
  {
  }

  ref_adaptor(ref_adaptor const&) noexcept            = default;
  ref_adaptor& operator=(ref_adaptor const&) noexcept = default;

  // `allocate` and `deallocate` below hide CCCL 3.0's synchronous overloads; these hide the rest.
  // A literal 0 for the stream is a compile error that says what to pass (`stream_first`).
  using stream_first::allocate;
  using stream_first::deallocate;
  template <class... Args>
  void* allocate_async(Args&&...) = delete;  ///< CCCL 3.0 only: use `allocate(stream, ...)`
  template <class... Args>
  void deallocate_async(Args&&...) = delete;  ///< CCCL 3.0 only: use `deallocate(stream, ...)`

  /** @brief Allocates memory usable at once by the host and any stream. */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    return CcclRef::allocate(bytes, alignment);
  }

  /** @brief Frees memory from `allocate_sync` at once. */
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment)
  {
    CcclRef::deallocate(ptr, bytes, alignment);
  }

  /** @brief Allocates in the order of `stream`. */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
    requires is_async_cccl_ref<CcclRef>
  {
    return CcclRef::allocate_async(bytes, alignment, stream);
  }

  /** @brief Frees in the order of `stream`. */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment)
    requires is_async_cccl_ref<CcclRef>
  {
    CcclRef::deallocate_async(ptr, bytes, alignment, stream);
  }
};

/** @brief The stream-ordered ref to memory with `Properties`, on this CCCL. */
template <class... Properties>
using async_ref = ref_adaptor<cuda::mr::async_resource_ref<Properties...>>;
/** @brief The synchronous ref to memory with `Properties`, on this CCCL. */
template <class... Properties>
using sync_ref = ref_adaptor<cuda::mr::resource_ref<Properties...>>;
}  // namespace detail

#endif

/** @brief Stream-ordered ref to device-accessible memory. */
using device_async_resource_ref = detail::async_ref<cuda::mr::device_accessible>;
/** @brief Synchronous ref to device-accessible memory. */
using device_resource_ref = detail::sync_ref<cuda::mr::device_accessible>;
/** @brief Stream-ordered ref to memory accessible from host and device. */
using host_device_async_resource_ref =
  detail::async_ref<cuda::mr::host_accessible, cuda::mr::device_accessible>;
/** @brief Synchronous ref to memory accessible from host and device. */
using host_device_resource_ref =
  detail::sync_ref<cuda::mr::host_accessible, cuda::mr::device_accessible>;
/** @brief Stream-ordered ref to host-accessible memory. */
using host_async_resource_ref = detail::async_ref<cuda::mr::host_accessible>;
/** @brief Synchronous ref to host-accessible memory. */
using host_resource_ref = detail::sync_ref<cuda::mr::host_accessible>;

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
