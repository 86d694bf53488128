/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

/**
 * @file
 * @brief Registration of every segment of a `vmm_resource` with an NCCL communicator. Declares
 * nothing where NCCL's header `nccl.h` is not on the include path; NCCL itself is looked up at
 * run time (libnccl is never linked).
 */

#if __has_include(<nccl.h>)

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/nccl_library.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>

#include <nccl.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#define RMM_NEXT_HAS_NCCL 1

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief How `nccl_registered` registers each segment. */
enum class nccl_registration {
  buffer,             ///< `ncclCommRegister` (zero-copy and user-buffer paths)
  window,             ///< `ncclCommWindowRegister` with NCCL_WIN_COLL_SYMMETRIC (NCCL 2.27+)
  buffer_and_window,  ///< both
};

namespace detail {

/** @brief The registrations of one communicator's segments, shared by the two hooks. */
struct nccl_segment_registry {
  ncclComm_t comm{};
  nccl_registration what{};
  std::mutex mutex;
  struct entry {
    void* handle{};
    ncclWindow_t window{};
  };
  std::map<void*, entry> segments;

  [[noreturn]] static void fail(ncclResult_t r, char const* call)
  {
    char const* text = nccl().get_error_string != nullptr ? nccl().get_error_string(r) : nullptr;
    throw cuda_error{
      cudaErrorUnknown,
      error_message("nccl_registered",
                    std::string{call} + " returned " + std::to_string(static_cast<int>(r)) +
                      (text != nullptr ? std::string{" ("} + text + ")" : ""))};
  }

  void register_segment(void* base, std::size_t bytes)
  {
    nccl_api const& api = nccl();
    entry e{};
    bool const buffer = what != nccl_registration::window;
    bool const window = what != nccl_registration::buffer;
    if (buffer) {
      if (ncclResult_t const r = api.comm_register(comm, base, bytes, &e.handle);
          r != ncclSuccess) {
        fail(r, "ncclCommRegister");
      }
    }
    if (window) {
      if (ncclResult_t const r =
            api.comm_window_register(comm, base, bytes, &e.window, NCCL_WIN_COLL_SYMMETRIC);
          r != ncclSuccess) {
        if (buffer) { (void)api.comm_deregister(comm, e.handle); }
        fail(r, "ncclCommWindowRegister");
      }
    }
    std::lock_guard const lock{mutex};
    segments[base] = e;
  }

  void deregister_segment(void* base) noexcept
  {
    entry e{};
    {
      std::lock_guard const lock{mutex};
      auto const it = segments.find(base);
      if (it == segments.end()) { return; }
      e = it->second;
      segments.erase(it);
    }
    nccl_api const& api = nccl();
    if (e.window != nullptr) { (void)api.comm_window_deregister(comm, e.window); }
    if (e.handle != nullptr) { (void)api.comm_deregister(comm, e.handle); }
  }
};

}  // namespace detail

/**
 * @brief `options` with hooks that register each segment of a `vmm_resource` with `comm` once,
 * when it is mapped (before the options' own `on_segment_map`), and deregister it before it is
 * unmapped (after the options' own `on_segment_unmap`). Every block of the resource is then
 * registered memory for `comm`.
 *
 * Window registration is collective: every rank must make its segments in the same order, which
 * equal sequences of requests give. The resource must be destroyed before `comm`.
 * @throws not_supported when NCCL, or the window API for `window` registration, is not found.
 */
inline vmm_options nccl_registered(ncclComm_t comm,
                                   vmm_options options    = {},
                                   nccl_registration what = nccl_registration::buffer)
{
  detail::nccl_api const& api = detail::nccl();
  if (api.comm_register == nullptr || api.comm_deregister == nullptr) {
    detail::throw_error<not_supported>("nccl_registered",
                                       "NCCL was not found (ncclCommRegister): load libnccl.so.2 "
                                       "or put it on the library path");
  }
  if (what != nccl_registration::buffer &&
      (api.comm_window_register == nullptr || api.comm_window_deregister == nullptr)) {
    detail::throw_error<not_supported>("nccl_registered",
                                       "this NCCL lacks ncclCommWindowRegister (NCCL 2.27 or "
                                       "newer has it); register with nccl_registration::buffer");
  }
  auto registry          = std::make_shared<detail::nccl_segment_registry>();
  registry->comm         = comm;
  registry->what         = what;
  options.on_segment_map = [registry, user = std::move(options.on_segment_map)](void* base,
                                                                                std::size_t bytes) {
    registry->register_segment(base, bytes);
    if (user) {
      try {
        user(base, bytes);
      } catch (...) {
        registry->deregister_segment(base);
        throw;
      }
    }
  };
  options.on_segment_unmap = [registry, user = std::move(options.on_segment_unmap)](
                               void* base, std::size_t bytes) {
    if (user) {
      try {
        user(base, bytes);
      } catch (...) {  // NOLINT(bugprone-empty-catch): deregistered below all the same
      }
    }
    registry->deregister_segment(base);
  };
  return options;
}

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next

#endif  // __has_include(<nccl.h>)
