/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <atomic>

/**
 * @file
 * @brief Whether this process is a child forked after the plugin made its state. `fork()` copies
 * the calling thread only: such a child holds the parent's state (resources, pools and streams of
 * a CUDA the driver refuses in a child, and locks that threads absent from the child may hold),
 * which nothing in the child may use.
 */

namespace rmm_next::plugin {

/** @brief Set by the plugin's fork handler in a child whose parent had made the plugin's state. */
inline std::atomic<bool>& state_inherited_by_fork() noexcept
{
  static std::atomic<bool> inherited{false};
  return inherited;
}

}  // namespace rmm_next::plugin
