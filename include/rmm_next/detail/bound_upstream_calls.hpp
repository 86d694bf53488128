/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

/**
 * @file
 * @brief An upstream bound to one way of calling it, stream-ordered on a stream or synchronous,
 * so an adaptor writes its allocate and free logic once for both member pairs:
 * `allocate(bytes, alignment)` and `deallocate(ptr, bytes, alignment)` call the upstream the way
 * the adaptor was called.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief `upstream`'s stream-ordered members, on `stream`. */
template <stream_ordered_upstream Upstream>
struct stream_ordered_calls {
  static constexpr bool synchronous = false;
  Upstream& upstream;
  cuda::stream_ref stream;

  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment) const
  {
    return stream_allocate(upstream, stream, bytes, alignment);
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) const noexcept
  {
    stream_deallocate(upstream, stream, ptr, bytes, alignment);
  }
};

/** @brief `upstream`'s synchronous members. */
template <synchronous_upstream Upstream>
struct synchronous_calls {
  static constexpr bool synchronous = true;
  Upstream& upstream;
  /** @brief What an adaptor that names a stream says for a synchronous call: the default one. */
  cuda::stream_ref stream{cudaStream_t{}};

  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment) const
  {
    return sync_allocate(upstream, bytes, alignment);
  }

  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) const noexcept
  {
    sync_deallocate(upstream, ptr, bytes, alignment);
  }
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
