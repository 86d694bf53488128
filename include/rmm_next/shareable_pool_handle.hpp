/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <utility>

#if !defined(_WIN32)
#include <unistd.h>
#endif

/**
 * @file
 * @brief `shareable_pool_handle`: a pool exported for another process (`export_pool`), as it
 * travels (`send_pool_handle`) and is imported (`import_pool`).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief An exported pool: an owned POSIX file descriptor, or a fabric handle.
 *
 * Move-only. A file descriptor is closed with the object (`release()` gives it up); a fabric
 * handle is plain data that may be copied to another node by any means (`fabric_handle()`).
 * Empty when default-constructed or moved from.
 */
class shareable_pool_handle {
 public:
  /** @brief An empty handle: `type()` is `none`. */
  shareable_pool_handle() noexcept = default;

  /** @brief Takes ownership of the POSIX file descriptor `fd` (empty when `fd` is negative). */
  explicit shareable_pool_handle(int fd) noexcept
    : type_{fd >= 0 ? allocation_handle_type::posix_file_descriptor : allocation_handle_type::none},
      fd_{fd < 0 ? -1 : fd}
  {
  }

  /** @brief Holds the fabric handle `fabric` (`cudaMemHandleTypeFabric`). */
  explicit shareable_pool_handle(cudaMemFabricHandle_t const& fabric) noexcept
    : type_{allocation_handle_type::fabric}, fabric_{fabric}
  {
  }

  shareable_pool_handle(shareable_pool_handle const&)            = delete;
  shareable_pool_handle& operator=(shareable_pool_handle const&) = delete;

  shareable_pool_handle(shareable_pool_handle&& other) noexcept
    : type_{std::exchange(other.type_, allocation_handle_type::none)},
      fd_{std::exchange(other.fd_, -1)},
      fabric_{other.fabric_}
  {
  }

  shareable_pool_handle& operator=(shareable_pool_handle&& other) noexcept
  {
    if (this != &other) {
      reset();
      type_   = std::exchange(other.type_, allocation_handle_type::none);
      fd_     = std::exchange(other.fd_, -1);
      fabric_ = other.fabric_;
    }
    return *this;
  }

  /** @brief Closes an owned file descriptor. */
  ~shareable_pool_handle() { reset(); }

  /** @brief `posix_file_descriptor`, `fabric`, or `none` when empty. */
  [[nodiscard]] allocation_handle_type type() const noexcept { return type_; }

  /** @brief The file descriptor, still owned by this object; -1 unless `type()` is
   * `posix_file_descriptor`. */
  [[nodiscard]] int fd() const noexcept { return fd_; }

  /** @brief The fabric handle; meaningful only when `type()` is `fabric`. */
  [[nodiscard]] cudaMemFabricHandle_t const& fabric_handle() const noexcept { return fabric_; }

  /** @brief True unless empty. */
  explicit operator bool() const noexcept { return type_ != allocation_handle_type::none; }

  /** @brief Gives up the file descriptor, which the caller now closes; leaves the object empty.
   * @return the descriptor, or -1 when `type()` was not `posix_file_descriptor`. */
  [[nodiscard]] int release() noexcept
  {
    type_ = allocation_handle_type::none;
    return std::exchange(fd_, -1);
  }

  /** @brief Closes an owned file descriptor and leaves the object empty. */
  void reset() noexcept
  {
#if !defined(_WIN32)
    if (fd_ >= 0) { (void)::close(fd_); }
#endif
    fd_   = -1;
    type_ = allocation_handle_type::none;
  }

 private:
  allocation_handle_type type_{allocation_handle_type::none};
  int fd_{-1};
  cudaMemFabricHandle_t fabric_{};
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
