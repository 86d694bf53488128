/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief The kinds of OS handle an owned pool's memory can be exported as (for IPC). */
enum class allocation_handle_type : int {
  none                  = cudaMemHandleTypeNone,
  posix_file_descriptor = cudaMemHandleTypePosixFileDescriptor,
  win32                 = cudaMemHandleTypeWin32,
  win32_kmt             = cudaMemHandleTypeWin32Kmt,
  fabric                = cudaMemHandleTypeFabric,
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
