/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/export.hpp>

#include <concepts>
#include <cstddef>

/**
 * @file
 * @brief Calls a resource's synchronous or stream-ordered members by whichever name it has:
 * CCCL 3.1+ names (`allocate_sync`, `allocate(stream, ...)`) or CCCL 3.0 names
 * (`allocate(bytes, alignment)`, `allocate_async`). Adaptors and allocators call upstream
 * resources through these, so they work with resources written for either CCCL.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

// Which member names `R` has, one concept per spelling. Only the calls below and
// `compat_members` (which adds the names a class lacks) ask about a spelling; everything else asks
// `stream_ordered_upstream` / `synchronous_upstream` (either spelling), or, for conformance to the
// CCCL in use, `stream_ordered_resource_with` / `synchronous_resource_with` (detail/cccl.hpp).

template <class R>
concept has_stream_allocate = requires(R& r, cuda::stream_ref s, void* p, std::size_t n) {
  { r.allocate(s, n, n) } -> std::same_as<void*>;
  r.deallocate(s, p, n, n);
};

template <class R>
concept has_allocate_async = requires(R& r, cuda::stream_ref s, void* p, std::size_t n) {
  { r.allocate_async(n, n, s) } -> std::same_as<void*>;
  r.deallocate_async(p, n, n, s);
};

template <class R>
concept has_allocate_sync = requires(R& r, void* p, std::size_t n) {
  { r.allocate_sync(n, n) } -> std::same_as<void*>;
  r.deallocate_sync(p, n, n);
};

template <class R>
concept has_plain_allocate = requires(R& r, void* p, std::size_t n) {
  { r.allocate(n, n) } -> std::same_as<void*>;
  r.deallocate(p, n, n);
};

/** @brief `R` allocates in stream order under one of the two spellings. */
template <class R>
concept stream_ordered_upstream = has_stream_allocate<R> || has_allocate_async<R>;

/** @brief `R` allocates synchronously under one of the two spellings. */
template <class R>
concept synchronous_upstream = has_allocate_sync<R> || has_plain_allocate<R>;

template <stream_ordered_upstream R>
void* stream_allocate(R& r, cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
{
  if constexpr (has_stream_allocate<R>) {
    return r.allocate(stream, bytes, alignment);
  } else {
    return r.allocate_async(bytes, alignment, stream);
  }
}

template <stream_ordered_upstream R>
void stream_deallocate(
  R& r, cuda::stream_ref stream, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
{
  if constexpr (has_stream_allocate<R>) {
    r.deallocate(stream, ptr, bytes, alignment);
  } else {
    r.deallocate_async(ptr, bytes, alignment, stream);
  }
}

template <synchronous_upstream R>
void* sync_allocate(R& r, std::size_t bytes, std::size_t alignment)
{
  if constexpr (has_allocate_sync<R>) {
    return r.allocate_sync(bytes, alignment);
  } else {
    return r.allocate(bytes, alignment);
  }
}

template <synchronous_upstream R>
void sync_deallocate(R& r, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
{
  if constexpr (has_allocate_sync<R>) {
    r.deallocate_sync(ptr, bytes, alignment);
  } else {
    r.deallocate(ptr, bytes, alignment);
  }
}

/**
 * @brief The device of `upstream`: `upstream.device()` where it has one, else the current device
 * (`no_device` when none can be found).
 */
template <class Upstream>
int device_of_upstream(Upstream const& upstream)
{
  if constexpr (requires {
                  { upstream.device() } -> std::convertible_to<int>;
                }) {
    return upstream.device();
  } else {
    return current_device_or_none();
  }
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
