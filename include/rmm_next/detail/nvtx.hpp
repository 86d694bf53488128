/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

/**
 * @file
 * @brief NVTX annotations of rmm-next's resources and adaptors, in the NVTX domain "rmm_next".
 *
 * Each annotated class pushes a range around its allocate and deallocate calls, named
 * "<class>::allocate", "<class>::deallocate" (and "<class>::allocate_sync" for the wait of a
 * synchronous allocation), from strings registered once per class. The classes that own memory
 * (the async resources) also name each allocation with the NVTX memory API
 * (`nvtxMemRegionsName`): pool allocations are allocations to the CUDA tools already, so they are
 * named, not registered as regions. Adaptors push ranges only: the memory belongs to the resource
 * underneath. Heaps and regions would be registered only by an adaptor that sub-allocates.
 *
 * Without a tool attached every NVTX call is a load and a branch on a null function pointer; the
 * handles are made once, in function-local statics, and nothing is allocated.
 *
 * Defining `RMM_NEXT_DISABLE_NVTX` (CMake: `-DRMM_NEXT_ENABLE_NVTX=OFF`) compiles all of it out.
 * So does a toolkit without the NVTX3 headers (`<nvtx3/nvToolsExt.h>`, as the CUDA 12 runtime
 * wheels). The classes that annotate carry `RMM_NEXT_NVTX_ABI`, which gives them different
 * symbol names when NVTX is off, so translation units compiled with and without it can share a
 * program without mixing up each other's inline functions.
 */

#include <cstddef>
#include <cstdlib>

#if !defined(RMM_NEXT_DISABLE_NVTX) && __has_include(<nvtx3/nvToolsExt.h>) && \
  __has_include(<nvtx3/nvToolsExtMem.h>)

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdio>

/// Empty when NVTX is compiled in; see the file comment.
#define RMM_NEXT_NVTX_ABI

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief True when the NVTX annotations are compiled in. */
inline constexpr bool nvtx_enabled = true;

inline namespace nvtx_on {

/** @brief The name of rmm-next's NVTX domain. */
inline constexpr char const* nvtx_domain_name = "rmm_next";

/** @brief The "rmm_next" domain, created on first use. */
inline nvtxDomainHandle_t nvtx_domain() noexcept
{
  static nvtxDomainHandle_t const domain = nvtxDomainCreateA(nvtx_domain_name);
  return domain;
}

/** @brief A range's domain and attributes (a registered name), ready to push. */
struct nvtx_range_name {
  nvtxDomainHandle_t domain{};
  nvtxEventAttributes_t attributes{};
};

/** @brief The range names of one annotated class. */
struct nvtx_class_names {
  nvtx_range_name allocate;
  nvtx_range_name deallocate;
  nvtx_range_name allocate_sync;
};

/** @brief A range name "<class_name>::<operation>" registered in the "rmm_next" domain. */
inline nvtx_range_name make_nvtx_range_name(char const* class_name, char const* operation) noexcept
{
  char text[128];
  std::snprintf(text, sizeof(text), "%s::%s", class_name, operation);
  nvtx_range_name name{};
  name.domain                        = nvtx_domain();
  name.attributes.version            = NVTX_VERSION;
  name.attributes.size               = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  name.attributes.messageType        = NVTX_MESSAGE_TYPE_REGISTERED;
  name.attributes.message.registered = nvtxDomainRegisterStringA(name.domain, text);
  return name;
}

/**
 * @brief The range names of class `Class`, registered on first use under `class_name` (which is
 * read only then).
 */
template <class Class>
nvtx_class_names const& nvtx_names(char const* class_name) noexcept
{
  static nvtx_class_names const names{make_nvtx_range_name(class_name, "allocate"),
                                      make_nvtx_range_name(class_name, "deallocate"),
                                      make_nvtx_range_name(class_name, "allocate_sync")};
  return names;
}

/** @brief Pushes a range on construction and pops it on destruction (also when unwinding). */
class nvtx_range {
 public:
  explicit nvtx_range(nvtx_range_name const& name) noexcept : domain_{name.domain}
  {
    nvtxDomainRangePushEx(domain_, &name.attributes);
  }
  nvtx_range(nvtx_range const&)            = delete;
  nvtx_range& operator=(nvtx_range const&) = delete;
  ~nvtx_range() { nvtxDomainRangePop(domain_); }

 private:
  nvtxDomainHandle_t domain_;
};

/**
 * @brief True when an NVTX tool was injected into the process through the environment
 * (`NVTX_INJECTION64_PATH`, as Nsight Systems and compute-sanitizer do), read once.
 */
inline bool nvtx_tool_injected() noexcept
{
  static bool const injected = std::getenv("NVTX_INJECTION64_PATH") != nullptr ||
                               std::getenv("NVTX_INJECTION32_PATH") != nullptr;
  return injected;
}

/**
 * @brief Names the allocation at `ptr` for NVTX tools (`nvtxMemRegionsName`, by pointer, ASCII),
 * so that compute-sanitizer's reports say what owns it. nullptr: nothing.
 *
 * Pool allocations are whole allocations to the CUDA tools already: they are named, never
 * registered as regions (a region of `NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE` that no heap holds is
 * rejected). compute-sanitizer takes names of 1 to 49 printable ASCII characters.
 */
inline void nvtx_name_region(void const* ptr, char const* name) noexcept
{
  if (ptr == nullptr) { return; }
  nvtxMemRegionNameDesc_t desc{};
  desc.regionRefType  = NVTX_MEM_REGION_REF_TYPE_POINTER;
  desc.nameType       = NVTX_MESSAGE_TYPE_ASCII;
  desc.region.pointer = ptr;
  desc.name.ascii     = name;
  nvtxMemRegionsNameBatch_t batch{};
  batch.extCompatID       = NVTX_EXT_COMPATID_MEM;
  batch.structSize        = sizeof(batch);
  batch.regionCount       = 1;
  batch.regionElementSize = sizeof(desc);
  batch.regionElements    = &desc;
  nvtxMemRegionsName(nvtx_domain(), &batch);
}

}  // namespace nvtx_on
}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next

#else  // NVTX compiled out: the same names, doing nothing

/// Gives the classes that annotate other symbol names when NVTX is off; see the file comment.
#define RMM_NEXT_NVTX_ABI [[gnu::abi_tag("rmm_next_nvtx_off")]]

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief True when the NVTX annotations are compiled in. */
inline constexpr bool nvtx_enabled = false;

inline namespace nvtx_off {

struct nvtx_range_name {};

struct nvtx_class_names {
  nvtx_range_name allocate;
  nvtx_range_name deallocate;
  nvtx_range_name allocate_sync;
};

template <class Class>
constexpr nvtx_class_names nvtx_names(char const* /*class_name*/) noexcept
{
  return {};
}

class nvtx_range {
 public:
  explicit nvtx_range(nvtx_range_name const& /*name*/) noexcept {}
  nvtx_range(nvtx_range const&)            = delete;
  nvtx_range& operator=(nvtx_range const&) = delete;
  ~nvtx_range() {}  // NOLINT(modernize-use-equals-default): non-trivial, so never "unused"
};

inline void nvtx_name_region(void const* /*ptr*/, char const* /*name*/) noexcept {}
constexpr bool nvtx_tool_injected() noexcept { return false; }

}  // namespace nvtx_off
}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next

#endif
