/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <nccl.h>  // types only: the functions are looked up at run time, libnccl is not linked

#include <dlfcn.h>

/**
 * @file
 * @brief The NCCL functions nccl.hpp calls, looked up at run time: first among the libraries the
 * process has loaded already (the NCCL that made the communicator, e.g. PyTorch's), else in
 * `libnccl.so.2` opened by name. Null members where NCCL or the function is missing.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief NCCL entry points, resolved once per process. */
struct nccl_api {
  ncclResult_t (*comm_register)(ncclComm_t, void*, size_t, void**) = nullptr;
  ncclResult_t (*comm_deregister)(ncclComm_t, void*)               = nullptr;
  ncclResult_t (*comm_window_register)(ncclComm_t, void*, size_t, ncclWindow_t*, int) =
    nullptr;                                                                   ///< NCCL 2.27+
  ncclResult_t (*comm_window_deregister)(ncclComm_t, ncclWindow_t) = nullptr;  ///< NCCL 2.27+
  char const* (*get_error_string)(ncclResult_t)                    = nullptr;
};

template <class Fn>
void resolve_nccl_function(void* library, char const* name, Fn& fn) noexcept
{
  void* address = ::dlsym(RTLD_DEFAULT, name);
  if (address == nullptr && library != nullptr) { address = ::dlsym(library, name); }
  fn = reinterpret_cast<Fn>(address);
}

/** @brief The NCCL functions of this process (null members where unavailable). */
inline nccl_api const& nccl() noexcept
{
  static nccl_api const api = [] {
    nccl_api a;
    void* library = nullptr;
    if (::dlsym(RTLD_DEFAULT, "ncclCommRegister") == nullptr) {
      library = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);  // kept for the process
    }
    resolve_nccl_function(library, "ncclCommRegister", a.comm_register);
    resolve_nccl_function(library, "ncclCommDeregister", a.comm_deregister);
    resolve_nccl_function(library, "ncclCommWindowRegister", a.comm_window_register);
    resolve_nccl_function(library, "ncclCommWindowDeregister", a.comm_window_deregister);
    resolve_nccl_function(library, "ncclGetErrorString", a.get_error_string);
    return a;
  }();
  return api;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
