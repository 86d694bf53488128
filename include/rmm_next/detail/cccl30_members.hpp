/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cstddef>

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/**
 * @brief The CCCL 3.0 member names of a resource written with the CCCL 3.1 names, each forwarding
 * to its counterpart: `allocate(bytes, alignment)` / `deallocate(ptr, bytes, alignment)` to
 * `allocate_sync` / `deallocate_sync`, and `allocate_async` / `deallocate_async` to the
 * stream-ordered `allocate` / `deallocate`. Each exists only where its counterpart does.
 *
 * `Derived` inherits it and brings the names into scope next to its own overloads:
 * `using detail::cccl30_members<Derived>::allocate;` (and `deallocate`).
 */
template <class Derived>
class cccl30_members {
 public:
  /** @brief Same as `allocate_sync`. */
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment = default_alignment)
    requires has_allocate_sync<Derived>
  {
    return self().allocate_sync(bytes, alignment);
  }

  /** @brief Same as `deallocate_sync`. */
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept
    requires has_allocate_sync<Derived>
  {
    self().deallocate_sync(ptr, bytes, alignment);
  }

  /** @brief Same as `allocate(stream, bytes, alignment)`. */
  [[nodiscard]] void* allocate_async(std::size_t bytes,
                                     std::size_t alignment,
                                     cuda::stream_ref stream)
    requires has_stream_allocate<Derived>
  {
    return self().allocate(stream, bytes, alignment);
  }

  /** @brief Same as `deallocate(stream, ptr, bytes, alignment)`. */
  void deallocate_async(void* ptr,
                        std::size_t bytes,
                        std::size_t alignment,
                        cuda::stream_ref stream) noexcept
    requires has_stream_allocate<Derived>
  {
    self().deallocate(stream, ptr, bytes, alignment);
  }

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
};

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
