/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// For tests of CCCL features newer than some CCCL the tests are built against: a version check
// for #if, and the line a test that skips prints.

#include <cuda/std/version>

#include <sstream>
#include <string>

/** @brief True when the CCCL in use is `major.minor` or later. */
#define RMM_NEXT_TEST_CCCL_AT_LEAST(major, minor) \
  (CCCL_MAJOR_VERSION > (major) || (CCCL_MAJOR_VERSION == (major) && CCCL_MINOR_VERSION >= (minor)))

namespace rmm_next::test {

/** @brief "<feature> needs CCCL <version> or later; this build has CCCL x.y.z". */
[[maybe_unused]] inline std::string needs_cccl(char const* feature, char const* version)
{
  std::ostringstream out;
  out << feature << " needs CCCL " << version << " or later; this build has CCCL "
      << CCCL_MAJOR_VERSION << "." << CCCL_MINOR_VERSION << "." << CCCL_PATCH_VERSION;
  return out.str();
}

}  // namespace rmm_next::test
