/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

/**
 * @file
 * @brief Everything rmm-next offers, in one include.
 */

#include <rmm_next/alignment.hpp>
#include <rmm_next/any_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>  // RMM_NEXT_CUDA_TRY, RMM_NEXT_EXPECTS
#include <rmm_next/pool_options.hpp>
#include <rmm_next/pool_statistics.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/version.hpp>

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/ipc.hpp>
#include <rmm_next/vmm_options.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <rmm_next/allocator.hpp>
#include <rmm_next/polymorphic_allocator.hpp>
#include <rmm_next/thrust_allocator.hpp>

#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_context.hpp>

#include <rmm_next/aligned_adaptor.hpp>
#include <rmm_next/failure_callback_adaptor.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/prefetch_adaptor.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/statistics_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>
#include <rmm_next/tracking_adaptor.hpp>
