/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The bytes a program has allocated from the heap now, for tests that check that memory stays
// constant over many operations.

#include <cstddef>

#if defined(__SANITIZE_THREAD__)
// From <sanitizer/allocator_interface.h>, which not every toolchain installs.
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#endif

namespace rmm_next::test {

/** @brief The bytes the program has allocated from the heap now. */
inline std::size_t heap_bytes()
{
#if defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 const info = mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}

}  // namespace rmm_next::test
