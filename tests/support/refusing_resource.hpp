/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A fake_resource whose allocations fail with out_of_memory while it refuses, for the tests of
// adaptors that must record nothing, or log a failure, when their upstream throws.

#include "fake_resource.hpp"

#include <rmm_next/error.hpp>

#include <cstddef>

namespace rmm_next::test {

/** @brief Throws `out_of_memory{"rmm_next::out_of_memory: refused"}` while `refuse` is set. */
class refusing_resource : public fake_resource {
 public:
  explicit refusing_resource(bool refuse_allocations = true) : refuse{refuse_allocations} {}

  bool refuse;  ///< whether allocations fail now

  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    if (refuse) { throw out_of_memory{"rmm_next::out_of_memory: refused"}; }
    return fake_resource::allocate_sync(bytes, alignment);
  }
  [[nodiscard]] void* allocate(cuda::stream_ref, std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  using fake_resource::deallocate;
  using fake_resource::deallocate_sync;
};

}  // namespace rmm_next::test
