/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

/**
 * @file
 * @brief Where `RMM_NEXT_CUDA_TRY` and `RMM_NEXT_EXPECTS` used to live; include
 * `<rmm_next/error_macros.hpp>`.
 */

#include <rmm_next/error_macros.hpp>
