/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What the test suite's NVTX injection library (injection.cpp) records. NVTX loads the library
// from NVTX_INJECTION64_PATH; the test programs link the same library and read the recording
// through these functions (one copy of the library per process, whichever way it was loaded).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#define RMM_NEXT_TEST_NVTX_EXPORT __attribute__((visibility("default")))

namespace rmm_next_test::nvtx {

/** @brief The NVTX calls the library records. */
enum class call {
  domain_create,      ///< nvtxDomainCreateA: `domain` and `text` are the name
  register_string,    ///< nvtxDomainRegisterStringA: `text` is the string
  range_push,         ///< nvtxDomainRangePushEx: `text` is the message
  range_pop,          ///< nvtxDomainRangePop
  region_register,    ///< one region of nvtxMemRegionsRegister: `ptr`, `bytes`, `heap`
  region_unregister,  ///< one region of nvtxMemRegionsUnregister: `ptr`
  region_name,        ///< one region of nvtxMemRegionsName: `ptr`, `text`, `type`, `name_type`
};

/** @brief One recorded call. */
struct event {
  call kind{};
  std::string domain;         ///< the domain's name ("" for the default domain)
  std::string text;           ///< registered string or range message
  void const* ptr{};          ///< region start
  std::size_t bytes{};        ///< region size
  void const* heap{};         ///< region heap (nullptr: NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE)
  std::uint32_t type{};       ///< region type (NVTX_MEM_TYPE_*) or unregister/name ref type
  std::uint32_t name_type{};  ///< message type of a region name (NVTX_MESSAGE_TYPE_*)
  std::uint64_t thread{};     ///< a small number per recording thread
};

/** @brief True once NVTX called InitializeInjectionNvtx2 (the core API is attached). */
RMM_NEXT_TEST_NVTX_EXPORT bool core_attached();

/** @brief True once NVTX attached the memory extension (InitializeInjectionNvtxExtension). */
RMM_NEXT_TEST_NVTX_EXPORT bool memory_attached();

/** @brief The calls recorded since the last `clear()`. */
RMM_NEXT_TEST_NVTX_EXPORT std::vector<event> events();

/** @brief Every call recorded since the library was loaded. */
RMM_NEXT_TEST_NVTX_EXPORT std::vector<event> all_events();

/** @brief Forgets what `events()` returns (not `all_events()`). */
RMM_NEXT_TEST_NVTX_EXPORT void clear();

}  // namespace rmm_next_test::nvtx
