/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

/**
 * @file
 * @brief The error-check macros, for rmm-next and for users' code: `RMM_NEXT_EXPECTS` (a
 * precondition) and `RMM_NEXT_CUDA_TRY` (a CUDA runtime call); both throw through
 * `detail/throw_error.hpp`, with the message scheme of every rmm-next error.
 */

/**
 * @brief Throws `rmm_next::logic_error` (or the exception type given as third argument) with
 * "rmm_next::" + `msg` when `cond` is false; `msg` reads "<what>: <what happened>", the scheme of
 * `detail::error_message`.
 */
#define RMM_NEXT_EXPECTS(...) \
  RMM_NEXT_EXPECTS_SELECT(__VA_ARGS__, RMM_NEXT_EXPECTS_3, RMM_NEXT_EXPECTS_2, unused)(__VA_ARGS__)
#define RMM_NEXT_EXPECTS_SELECT(_1, _2, _3, name, ...) name
#define RMM_NEXT_EXPECTS_2(cond, msg)                  RMM_NEXT_EXPECTS_3(cond, msg, ::rmm_next::logic_error)
#define RMM_NEXT_EXPECTS_3(cond, msg, exception_type)                      \
  do {                                                                     \
    if (!(cond)) { ::rmm_next::detail::throw_error<exception_type>(msg); } \
  } while (0)

/**
 * @brief Calls a CUDA runtime function; on failure clears the sticky error and throws
 * `rmm_next::cuda_error` ("rmm_next::<what>: <function> returned <error> (<description>)"). The
 * optional second argument `what` names the user's call (default "cuda_error"); the message names
 * the CUDA function without its arguments, never rmm-next's source text or location.
 */
#define RMM_NEXT_CUDA_TRY(...) \
  RMM_NEXT_CUDA_TRY_SELECT(    \
    __VA_ARGS__, RMM_NEXT_CUDA_TRY_2, RMM_NEXT_CUDA_TRY_1, unused)(__VA_ARGS__)
#define RMM_NEXT_CUDA_TRY_SELECT(_1, _2, name, ...) name
#define RMM_NEXT_CUDA_TRY_1(call)                   RMM_NEXT_CUDA_TRY_2(call, "cuda_error")
#define RMM_NEXT_CUDA_TRY_2(call, what)                                    \
  do {                                                                     \
    cudaError_t const rmm_next_status_ = (call);                           \
    if (rmm_next_status_ != cudaSuccess) {                                 \
      ::rmm_next::detail::throw_cuda_error(                                \
        rmm_next_status_, ::rmm_next::detail::function_name(#call), what); \
    }                                                                      \
  } while (0)
