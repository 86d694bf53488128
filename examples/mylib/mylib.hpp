/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// mylib: an example library that keeps its memory in rmm_next::resource_context objects instead
// of the process-wide resource. It names the kinds of memory it allocates, gives each a default,
// and lets its users override any kind on any device. Plain C++ may include this header.

#include <rmm_next/resource_context.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cstddef>
#include <span>
#include <utility>

namespace mylib {

/** @brief The kinds of device-accessible memory mylib allocates. */
enum class allocation_kind {
  temporaries,  ///< device scratch space, freed before a call returns
  results,      ///< memory handed back to the caller in a `mylib::buffer`
  count_        ///< the number of kinds (read by rmm_next::allocation_kind_count)
};

/**
 * @brief The kinds of memory mylib writes from the host: their refs must be host-accessible
 * too, so they have their own enum and context (`host_device_async_resource_ref`).
 */
enum class host_allocation_kind {
  pinned_staging,  ///< page-locked buffers the host fills before a copy to the device
  count_
};

/** @brief mylib's device-accessible memory per kind and device. */
using context = rmm_next::resource_context<allocation_kind, rmm_next::device_async_resource_ref>;

/** @brief mylib's host-and-device-accessible memory per kind and device. */
using host_context =
  rmm_next::resource_context<host_allocation_kind, rmm_next::host_device_async_resource_ref>;

/**
 * @brief The memory mylib allocates, per kind and device; applications may `set` any kind.
 *
 * Defaults: `temporaries` from the device's current pool (`async_device_resource`), `results`
 * from the process-wide resource of the device (`rmm_next::get_per_device_resource_ref`, read on
 * first use), as RMM-based code would allocate them.
 */
context& resources();

/** @brief mylib's host-written memory. Default: the host's current pinned pool. */
host_context& host_resources();

/**
 * @brief `size` elements of `T` in memory from a device-accessible ref, freed in the order of the
 * stream it was allocated on. Move-only; the ref's resource must outlive it.
 */
template <class T>
class buffer {
 public:
  /** @brief Allocates `size` elements from `memory` in the order of `stream`. */
  buffer(rmm_next::device_async_resource_ref memory, std::size_t size, cuda::stream_ref stream)
    : memory_{memory},
      stream_{stream},
      size_{size},
      data_{static_cast<T*>(memory_.allocate(stream, size * sizeof(T), alignof(T)))}
  {
  }

  buffer(buffer&& other) noexcept
    : memory_{other.memory_},
      stream_{other.stream_},
      size_{std::exchange(other.size_, 0)},
      data_{std::exchange(other.data_, nullptr)}
  {
  }
  buffer(buffer const&)            = delete;
  buffer& operator=(buffer const&) = delete;
  buffer& operator=(buffer&&)      = delete;

  /** @brief Frees the memory in the order of the stream it was allocated on. */
  ~buffer()
  {
    if (data_ != nullptr) { memory_.deallocate(stream_, data_, size_ * sizeof(T), alignof(T)); }
  }

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<T> span() const noexcept { return {data_, size_}; }

 private:
  rmm_next::device_async_resource_ref memory_;
  cuda::stream_ref stream_;
  std::size_t size_;
  T* data_;
};

/**
 * @brief Counts `values` (host memory) into `bins` equal bins over [lo, hi) on the current device;
 * values outside it are not counted.
 *
 * Copies the values through `pinned_staging` memory into `temporaries`, and returns the counts in
 * `results` memory, ready in the order of `stream`.
 *
 * @throws std::invalid_argument if `bins` is not positive or `lo >= hi`.
 */
buffer<unsigned int> histogram(
  std::span<float const> values, int bins, float lo, float hi, cuda::stream_ref stream);

}  // namespace mylib
