/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// An NVTX injection library that records calls, for the NVTX tests. NVTX loads it from
// NVTX_INJECTION64_PATH and calls
//   InitializeInjectionNvtx2(getExportTable)        for the core API: the library fills the CORE2
//       callback table (domains, registered strings, push/pop);
//   InitializeInjectionNvtxExtension(moduleInfo)    for each extension: the library fills the
//       memory extension's slots (region register/unregister/name).
// Calls without a recorder stay unset, so NVTX turns them into no-ops.

#define NVTX_NO_IMPL  // a tool: the NVTX types and ids, not the client implementation
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include "recorder.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace rmm_next_test::nvtx {
namespace {

struct recorder {
  std::mutex mutex;
  std::vector<event> since_clear;
  std::vector<event> all;
  // Handles are addresses of these strings (never freed: handles live as long as the process).
  std::deque<std::string> domains;
  std::deque<std::pair<std::string, std::string>> strings;  // (domain, text)
  std::atomic<bool> core{false};
  std::atomic<bool> memory{false};
};

recorder& rec()
{
  static recorder* const r = new recorder;  // never destroyed: NVTX may call during exit
  return *r;
}

std::uint64_t thread_number()
{
  static std::atomic<std::uint64_t> next{1};
  thread_local std::uint64_t const mine = next.fetch_add(1);
  return mine;
}

std::string domain_name(nvtxDomainHandle_t domain)
{
  return domain == nullptr ? std::string{} : *reinterpret_cast<std::string const*>(domain);
}

event make_event(call kind, nvtxDomainHandle_t domain, std::string text = {})
{
  event e;
  e.kind   = kind;
  e.domain = domain_name(domain);
  e.text   = std::move(text);
  return e;
}

void record(event e)
{
  e.thread = thread_number();
  auto& r  = rec();
  std::lock_guard const lock{r.mutex};
  r.since_clear.push_back(e);
  r.all.push_back(std::move(e));
}

// ---- Core API ----------------------------------------------------------------------------------

nvtxDomainHandle_t domain_create(char const* name)
{
  auto& r = rec();
  std::string* handle{};
  {
    std::lock_guard const lock{r.mutex};
    handle = &r.domains.emplace_back(name);
  }
  event e;
  e.kind   = call::domain_create;
  e.domain = name;
  e.text   = name;
  record(std::move(e));
  return reinterpret_cast<nvtxDomainHandle_t>(handle);
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, char const* text)
{
  auto& r = rec();
  std::pair<std::string, std::string>* handle{};
  {
    std::lock_guard const lock{r.mutex};
    handle = &r.strings.emplace_back(domain_name(domain), text);
  }
  record(make_event(call::register_string, domain, text));
  return reinterpret_cast<nvtxStringHandle_t>(handle);
}

int range_push(nvtxDomainHandle_t domain, nvtxEventAttributes_t const* attributes)
{
  std::string text;
  if (attributes != nullptr) {
    switch (attributes->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII: text = attributes->message.ascii; break;
      case NVTX_MESSAGE_TYPE_REGISTERED:
        text = attributes->message.registered == nullptr
                 ? std::string{"<null registered string>"}
                 : reinterpret_cast<std::pair<std::string, std::string> const*>(
                     attributes->message.registered)
                     ->second;
        break;
      default: text = "<message type " + std::to_string(attributes->messageType) + ">";
    }
  }
  record(make_event(call::range_push, domain, std::move(text)));
  return 0;
}

int range_pop(nvtxDomainHandle_t domain)
{
  record(make_event(call::range_pop, domain));
  return 0;
}

// ---- Memory extension
// ----------------------------------------------------------------------------

void regions_register(nvtxDomainHandle_t domain, nvtxMemRegionsRegisterBatch_t const* batch)
{
  if (batch == nullptr) { return; }
  for (std::size_t i = 0; i < batch->regionCount; ++i) {
    event e = make_event(call::region_register, domain);
    e.heap  = batch->heap;
    e.type  = batch->regionType;
    if (batch->regionType == NVTX_MEM_TYPE_VIRTUAL_ADDRESS) {
      auto const* bytes = static_cast<unsigned char const*>(batch->regionDescElements);
      auto const* desc  = reinterpret_cast<nvtxMemVirtualRangeDesc_t const*>(
        bytes + i * batch->regionDescElementSize);
      e.ptr   = desc->ptr;
      e.bytes = desc->size;
    }
    if (batch->regionHandleElementsOut != nullptr) {
      batch->regionHandleElementsOut[i] = reinterpret_cast<nvtxMemRegionHandle_t>(
        const_cast<void*>(e.ptr));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    }
    record(std::move(e));
  }
}

void regions_unregister(nvtxDomainHandle_t domain, nvtxMemRegionsUnregisterBatch_t const* batch)
{
  if (batch == nullptr) { return; }
  auto const* bytes = reinterpret_cast<unsigned char const*>(batch->refElements);
  for (std::size_t i = 0; i < batch->refCount; ++i) {
    auto const* ref =
      reinterpret_cast<nvtxMemRegionRef_t const*>(bytes + i * batch->refElementSize);
    event e = make_event(call::region_unregister, domain);
    e.type  = batch->refType;
    e.ptr   = batch->refType == NVTX_MEM_REGION_REF_TYPE_POINTER
                ? ref->pointer
                : static_cast<void const*>(ref->handle);
    record(std::move(e));
  }
}

void regions_name(nvtxDomainHandle_t domain, nvtxMemRegionsNameBatch_t const* batch)
{
  if (batch == nullptr) { return; }
  auto const* bytes = reinterpret_cast<unsigned char const*>(batch->regionElements);
  for (std::size_t i = 0; i < batch->regionCount; ++i) {
    auto const* desc =
      reinterpret_cast<nvtxMemRegionNameDesc_t const*>(bytes + i * batch->regionElementSize);
    event e     = make_event(call::region_name, domain);
    e.type      = desc->regionRefType;
    e.name_type = desc->nameType;
    e.ptr       = desc->regionRefType == NVTX_MEM_REGION_REF_TYPE_POINTER
                    ? desc->region.pointer
                    : static_cast<void const*>(desc->region.handle);
    if (desc->nameType == NVTX_MESSAGE_TYPE_ASCII && desc->name.ascii != nullptr) {
      e.text = desc->name.ascii;
    }
    record(std::move(e));
  }
}

template <class Fn>
void set_slot(NvtxFunctionTable table, unsigned size, unsigned id, Fn* fn)
{
  if (id < size && table[id] != nullptr) { *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn); }
}

}  // namespace

bool core_attached() { return rec().core.load(); }
bool memory_attached() { return rec().memory.load(); }

std::vector<event> events()
{
  auto& r = rec();
  std::lock_guard const lock{r.mutex};
  return r.since_clear;
}

std::vector<event> all_events()
{
  auto& r = rec();
  std::lock_guard const lock{r.mutex};
  return r.all;
}

void clear()
{
  auto& r = rec();
  std::lock_guard const lock{r.mutex};
  r.since_clear.clear();
}

}  // namespace rmm_next_test::nvtx

using namespace rmm_next_test::nvtx;

extern "C" RMM_NEXT_TEST_NVTX_EXPORT int InitializeInjectionNvtx2(
  NvtxGetExportTableFunc_t get_export_table)
{
  auto const* callbacks =
    static_cast<NvtxExportTableCallbacks const*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) { return 0; }
  NvtxFunctionTable table{};
  unsigned size{};
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) == 0 ||
      table == nullptr) {
    return 0;
  }
  set_slot(table, size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  set_slot(table, size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  if (auto const* version =
        static_cast<NvtxExportTableVersionInfo const*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  rec().core.store(true);
  return 1;
}

extern "C" RMM_NEXT_TEST_NVTX_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info)
{
  if (info == nullptr) { return 0; }
  if (info->moduleId != NVTX_EXT_MODULEID_MEM) { return 1; }  // other extensions: no-ops
  if (info->segmentsCount < 1 || info->segments == nullptr) { return 0; }
  nvtxExtModuleSegment_t& segment = info->segments[0];
  auto set                        = [&segment](std::size_t id, auto* fn) {
    if (id < segment.slotCount) { segment.functionSlots[id] = reinterpret_cast<intptr_t>(fn); }
  };
  set(NVTX3EXT_CBID_nvtxMemRegionsRegister, &regions_register);
  set(NVTX3EXT_CBID_nvtxMemRegionsUnregister, &regions_unregister);
  set(NVTX3EXT_CBID_nvtxMemRegionsName, &regions_name);
  rec().memory.store(true);
  return 1;
}
