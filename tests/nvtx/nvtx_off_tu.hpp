/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include "support/fake_resource.hpp"

#include <cstdint>

namespace rmm_next_test::nvtx {

/**
 * @brief From a translation unit compiled with NVTX off: `pairs` times, an allocate_sync +
 * deallocate_sync pair and a stream-ordered pair through a statistics_adaptor over `upstream`,
 * plus a region registered and unregistered by the helpers. Returns the adaptor's total bytes.
 */
std::int64_t allocate_with_nvtx_off(rmm_next::test::fake_resource const& upstream, int pairs);

}  // namespace rmm_next_test::nvtx
