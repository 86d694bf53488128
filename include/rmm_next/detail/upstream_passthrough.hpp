/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cstddef>
#include <utility>

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief The upstream of an adaptor that acts only on allocation, and the frees it passes
 * straight through: `upstream_resource()`, `deallocate(stream, ...)` where the upstream allocates
 * in stream order and `deallocate_sync` where it allocates synchronously.
 *
 * An adaptor inherits it and brings the frees into scope next to its own overloads:
 * `using detail::upstream_passthrough<Upstream>::deallocate;`.
 */
template <class Upstream>
class upstream_passthrough {
 public:
  /** @brief Frees `ptr` to the upstream in the order of `stream`. */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment = default_alignment) noexcept
    requires stream_ordered_upstream<Upstream>
  {
    stream_deallocate(upstream_, stream, ptr, bytes, alignment);
  }

  /** @brief Frees `ptr` to the upstream synchronously. */
  void deallocate_sync(void* ptr,
                       std::size_t bytes,
                       std::size_t alignment = default_alignment) noexcept
    requires synchronous_upstream<Upstream>
  {
    sync_deallocate(upstream_, ptr, bytes, alignment);
  }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

 protected:
  template <class Arg>
  explicit upstream_passthrough(Arg&& upstream) : upstream_(std::forward<Arg>(upstream))
  {
  }

  /** @brief The upstream, to allocate from. */
  Upstream& mutable_upstream() noexcept { return upstream_; }

 private:
  Upstream upstream_;
};

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
