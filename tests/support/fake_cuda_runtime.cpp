/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The fake CUDA runtime of fake_cuda_runtime.hpp: definitions of the runtime functions the async
// resources call, which take the place of libcudart's in the program that links this file, the
// driver entry points they look up (contexts stand for devices), and an operator new that can be
// told to fail once, right after a pool was created. As the real driver does, the fake refuses
// every call in a child forked from the process (cudaErrorInitializationError).

#include "fake_cuda_runtime.hpp"
#include "entry_points.hpp"

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <utility>

namespace rmm_next::test::fake_cuda {
namespace {

bool fail_next_new = false;

/** @brief Set in a forked child: its CUDA state is inherited and unusable. */
bool forked_child = false;
[[maybe_unused]] int const fork_watch =
  pthread_atfork(nullptr, nullptr, [] { forked_child = true; });

std::map<std::tuple<int, int, int>, cudaMemPool_t>& driver_pools()
{
  static std::map<std::tuple<int, int, int>, cudaMemPool_t> pools;
  return pools;
}

/** @brief The error the next call of `name` was told to return, once; cudaSuccess otherwise. */
cudaError_t injected(char const* name)
{
  auto& failures = fake().fail_next;
  auto const it  = failures.find(name);
  if (it == failures.end()) { return cudaSuccess; }
  cudaError_t const status = it->second;
  failures.erase(it);
  return status;
}

bool valid_device(int device) { return device >= 0 && device < fake().device_count; }

/** @brief The calling thread's capture mode (cudaThreadExchangeStreamCaptureMode). */
cudaStreamCaptureMode& thread_capture_mode()
{
  thread_local cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  return mode;
}

/** @brief Notes that `call` ran in the calling thread's capture mode (`state::query_modes`). */
void note_query_mode(char const* call)
{
  static std::mutex mutex;  // calls may come from several threads at once
  std::lock_guard const lock{mutex};
  fake().query_modes.emplace_back(call, thread_capture_mode());
}

stream_record const* stream_of(cudaStream_t stream)
{
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return nullptr;
  }
  return reinterpret_cast<stream_record const*>(stream);
}

cudaMemPool_t add_pool(cudaMemLocation location, cudaMemAllocationType type, bool by_library)
{
  auto record                = std::make_unique<pool_record>();
  record->location           = location;
  record->type               = type;
  record->created_by_library = by_library;
  auto* const handle         = reinterpret_cast<cudaMemPool_t>(record.get());
  fake().pools.push_back(std::move(record));
  return handle;
}

cudaMemPool_t driver_pool(cudaMemLocation const* location, cudaMemAllocationType type, int which)
{
  auto const key = std::make_tuple(
    static_cast<int>(location->type) * 2 + which, location->id, static_cast<int>(type));
  auto& pools   = driver_pools();
  auto const it = pools.find(key);
  if (it != pools.end()) { return it->second; }
  return pools[key] = add_pool(*location, type, false);
}

// ---- Driver entry points: the primary context of device d is the address d + 1, its second
// context (see `state::second_context`) the address second_context_base + d --------------------

constexpr std::uintptr_t second_context_base = 0x1000;

CUcontext context_of(int device, bool second)
{
  return reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(device) +
                                     (second ? second_context_base : 1));
}

/** @brief See `unbind_context_on_this_thread`. */
thread_local bool no_context_here = false;

/** @brief True for the handles of a default stream, which name the current context's. */
bool is_default_handle(CUstream stream)
{
  auto const h = reinterpret_cast<cudaStream_t>(stream);
  return h == cudaStream_t{} || h == cudaStreamLegacy || h == cudaStreamPerThread;
}

CUresult ctx_get_current(CUcontext* context)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (no_context_here) {
    *context = nullptr;
    return CUDA_SUCCESS;
  }
  *context = context_of(fake().current_device, fake().second_context);
  return CUDA_SUCCESS;
}

CUresult ctx_set_current(CUcontext context)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  no_context_here = context == nullptr;  // null unbinds the thread's context
  if (context != nullptr) {
    auto const address    = reinterpret_cast<std::uintptr_t>(context);
    bool const second     = address >= second_context_base;
    fake().second_context = second;
    fake().current_device = static_cast<int>(address - (second ? second_context_base : 1));
  }
  return CUDA_SUCCESS;
}

CUresult ctx_get_device(CUdevice* device)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  *device = fake().current_device;
  return CUDA_SUCCESS;
}

CUresult stream_get_device(CUstream stream, CUdevice* device)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  stream_record const* s = stream_of(reinterpret_cast<cudaStream_t>(stream));
  *device                = s != nullptr ? s->device : fake().current_device;
  return CUDA_SUCCESS;
}

CUresult stream_get_ctx(CUstream stream, CUcontext* context)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  stream_record const* s = stream_of(reinterpret_cast<cudaStream_t>(stream));
  *context               = s != nullptr ? context_of(s->device, s->second_context)
                                        : context_of(fake().current_device, fake().second_context);
  return CUDA_SUCCESS;
}

CUresult primary_ctx_get_state(CUdevice device, unsigned int* flags, int* active)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  *flags  = 0;
  *active = valid_device(device) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult primary_ctx_retain(CUcontext* context, CUdevice device)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  *context = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(device + 1));
  return CUDA_SUCCESS;
}

CUresult primary_ctx_release(CUdevice /*device*/) { return CUDA_SUCCESS; }

// ---- Driver events: records, counted; no GPU work to order ------------------------------------

/** @brief A fake event: the context it was made in, and whether a capture recorded it. */
struct fake_event {
  CUcontext context{};
  bool captured{false};
};

bool context_destroyed(CUcontext context)
{
  auto const address = reinterpret_cast<std::uintptr_t>(context);
  if (address < second_context_base) { return false; }
  auto const& gone = fake().destroyed_second_contexts;
  return std::find(gone.begin(), gone.end(), static_cast<int>(address - second_context_base)) !=
         gone.end();
}

stream_record* mutable_stream_of(CUstream stream)
{
  return const_cast<stream_record*>(stream_of(reinterpret_cast<cudaStream_t>(stream)));
}

CUresult event_create(CUevent* event, unsigned int /*flags*/)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  std::lock_guard const lock{event_mutex()};
  *event = reinterpret_cast<CUevent>(
    new fake_event{context_of(fake().current_device, fake().second_context)});
  ++fake().events.created;
  return CUDA_SUCCESS;
}

CUresult event_record(CUevent event, CUstream stream)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  std::lock_guard const lock{event_mutex()};
  fake().events.recorded.emplace_back(event, reinterpret_cast<cudaStream_t>(stream));
  stream_record const* s                         = mutable_stream_of(stream);
  reinterpret_cast<fake_event*>(event)->captured = s != nullptr && s->capture_id != 0;
  return CUDA_SUCCESS;
}

CUresult event_destroy(CUevent event)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  std::lock_guard const lock{event_mutex()};
  delete reinterpret_cast<fake_event*>(event);
  ++fake().events.destroyed;
  return CUDA_SUCCESS;
}

CUresult event_synchronize(CUevent event)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  std::lock_guard const lock{event_mutex()};
  note_query_mode("cuEventSynchronize");
  if (context_destroyed(reinterpret_cast<fake_event*>(event)->context)) {
    ++fake().events.refused_waits;
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  if (injected("cuEventSynchronize") != cudaSuccess) { return CUDA_ERROR_NOT_READY; }
  ++fake().events.synchronized;
  return CUDA_SUCCESS;
}

CUresult stream_wait_event(CUstream stream, CUevent event, unsigned int /*flags*/)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  std::lock_guard const lock{event_mutex()};
  auto const* e = reinterpret_cast<fake_event const*>(event);
  if (context_destroyed(e->context)) {
    ++fake().events.refused_waits;
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  }
  stream_record* const s = mutable_stream_of(stream);
  if (e->captured && (s == nullptr || s->capture_id == 0)) {
    // A wait outside a capture on an event it recorded: the driver refuses it and invalidates
    // every capture the event's stream takes part in.
    for (auto& other : fake().streams) {
      if (other->capture_id != 0) { other->capture_invalidated = true; }
    }
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  fake().events.waits.emplace_back(reinterpret_cast<cudaStream_t>(stream), event);
  return CUDA_SUCCESS;
}

// ---- Driver stream queries, contexts pushed, host nodes and user objects
// -------------------------

CUresult stream_get_id(CUstream stream, unsigned long long* id)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (stream_record* const s = mutable_stream_of(stream)) {
    if (s->capture_id != 0) { s->capture_invalidated = true; }  // as the driver does
  }
  *id = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(stream));
  return CUDA_SUCCESS;
}

CUresult thread_exchange_stream_capture_mode(CUstreamCaptureMode* mode)
{
  // The runtime's call (below) is the one swap: the driver's answers through it.
  auto runtime = static_cast<cudaStreamCaptureMode>(*mode);
  if (cudaThreadExchangeStreamCaptureMode(&runtime) != cudaSuccess) {
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  *mode = static_cast<CUstreamCaptureMode>(runtime);
  return CUDA_SUCCESS;
}

CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (no_context_here && is_default_handle(stream)) { return CUDA_ERROR_INVALID_CONTEXT; }
  stream_record const* s = mutable_stream_of(stream);
  *status                = s != nullptr && s->capture_id != 0 ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                              : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult stream_get_capture_info(CUstream stream,
                                 CUstreamCaptureStatus* status,
                                 cuuint64_t* id,
                                 CUgraph* graph,
                                 CUgraphNode const** dependencies,
                                 std::size_t* count)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (no_context_here && is_default_handle(stream)) { return CUDA_ERROR_INVALID_CONTEXT; }
  stream_record const* s           = mutable_stream_of(stream);
  unsigned long long const capture = s != nullptr ? s->capture_id : 0;
  *status                          = capture == 0             ? CU_STREAM_CAPTURE_STATUS_NONE
                                     : s->capture_invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id != nullptr) { *id = capture; }
  if (graph != nullptr) {
    *graph = capture == 0 ? nullptr : reinterpret_cast<CUgraph>(&fake().graphs[capture]);
  }
  if (dependencies != nullptr) { *dependencies = nullptr; }
  if (count != nullptr) { *count = 0; }
  return CUDA_SUCCESS;
}

thread_local std::vector<CUcontext> pushed_contexts;

CUresult ctx_push_current(CUcontext context)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  pushed_contexts.push_back(context_of(fake().current_device, fake().second_context));
  return ctx_set_current(context);
}

CUresult ctx_pop_current(CUcontext* popped)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (pushed_contexts.empty()) { return CUDA_ERROR_INVALID_CONTEXT; }
  *popped = context_of(fake().current_device, fake().second_context);
  (void)ctx_set_current(pushed_contexts.back());
  pushed_contexts.pop_back();
  return CUDA_SUCCESS;
}

CUresult launch_host_func(CUstream stream, CUhostFn fn, void* data)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (cudaError_t const s = injected("cuLaunchHostFunc"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  stream_record const* s = mutable_stream_of(stream);
  if (s != nullptr && s->capture_id != 0) {
    fake().graphs[s->capture_id].host_nodes.emplace_back(fn, data);
  } else {
    fn(data);  // no GPU work to wait for
  }
  return CUDA_SUCCESS;
}

/** @brief A fake user object: its data, destructor and references. */
struct fake_user_object {
  void* data;
  CUhostFn destroy;
  unsigned references;
};

CUresult user_object_release(CUuserObject object, unsigned int count)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  auto* o = reinterpret_cast<fake_user_object*>(object);
  if (count > o->references) { return CUDA_ERROR_INVALID_VALUE; }
  o->references -= count;
  if (o->references == 0) {
    o->destroy(o->data);
    delete o;
    --fake().user_objects_live;
  }
  return CUDA_SUCCESS;
}

CUresult user_object_create(
  CUuserObject* object, void* data, CUhostFn destroy, unsigned int references, unsigned int flags)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC || references == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *object = reinterpret_cast<CUuserObject>(new fake_user_object{data, destroy, references});
  ++fake().user_objects_live;
  return CUDA_SUCCESS;
}

CUresult graph_retain_user_object(CUgraph graph,
                                  CUuserObject object,
                                  unsigned int count,
                                  unsigned int flags)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (cudaError_t const s = injected("cuGraphRetainUserObject"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  auto* g = reinterpret_cast<graph_record*>(graph);
  auto* o = reinterpret_cast<fake_user_object*>(object);
  if ((flags & CU_GRAPH_USER_OBJECT_MOVE) == 0) { o->references += count; }
  for (unsigned i = 0; i < count; ++i) {
    g->user_objects.push_back(object);
  }
  return CUDA_SUCCESS;
}

// ---- Driver virtual memory management ----------------------------------------------------------

CUresult device_get_attribute(int* value, CUdevice_attribute attr, CUdevice device)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (!valid_device(device)) { return CUDA_ERROR_INVALID_DEVICE; }
  auto const& attributes = fake().vmm.attributes;
  auto const it          = attributes.find(static_cast<int>(attr));
  *value                 = it == attributes.end() ? 1 : it->second;
  return CUDA_SUCCESS;
}

CUresult device_can_access_peer(int* can, CUdevice device, CUdevice peer)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  auto const& none = fake().vmm.no_peer_access;
  bool const refused =
    std::find(none.begin(), none.end(), static_cast<int>(device)) != none.end() ||
    std::find(none.begin(), none.end(), static_cast<int>(peer)) != none.end();
  *can = device != peer && !refused ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult get_error_name(CUresult result, char const** name)
{
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_NOT_PERMITTED: *name = "CUDA_ERROR_NOT_PERMITTED"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

vmm_allocation_record* allocation_of(CUmemGenericAllocationHandle handle)
{
  auto& all = fake().vmm.allocations;
  if (handle == 0 || handle > all.size()) { return nullptr; }
  return all[handle - 1].get();
}

CUresult mem_create(CUmemGenericAllocationHandle* handle,
                    std::size_t bytes,
                    CUmemAllocationProp const* prop,
                    unsigned long long /*flags*/)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  vmm_driver& vmm = fake().vmm;
  vmm.calls.emplace_back("cuMemCreate");
  auto const types = static_cast<unsigned>(prop->requestedHandleTypes);
  vmm.create_attempts.push_back(types);
  if (cudaError_t const s = injected("cuMemCreate"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  if (vmm.refuse_fabric && (types & CU_MEM_HANDLE_TYPE_FABRIC) != 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  if (bytes == 0 || bytes % vmm.minimum_granularity != 0) { return CUDA_ERROR_INVALID_VALUE; }
  int const device = prop->location.id;
  if (vmm.in_use[device] + bytes > vmm.memory) { return CUDA_ERROR_OUT_OF_MEMORY; }
  vmm.in_use[device] += bytes;
  auto record             = std::make_unique<vmm_allocation_record>();
  record->bytes           = bytes;
  record->handle_types    = types;
  record->gpu_direct_rdma = prop->allocFlags.gpuDirectRDMACapable != 0;
  record->device          = device;
  vmm.allocations.push_back(std::move(record));
  *handle = vmm.allocations.size();
  return CUDA_SUCCESS;
}

CUresult mem_release(CUmemGenericAllocationHandle handle)
{
  vmm_allocation_record* const a = allocation_of(handle);
  if (a == nullptr || a->released) { return CUDA_ERROR_INVALID_VALUE; }
  fake().vmm.calls.emplace_back("cuMemRelease");
  a->released = true;
  fake().vmm.in_use[a->device] -= a->bytes;
  return CUDA_SUCCESS;
}

CUresult mem_address_reserve(CUdeviceptr* ptr,
                             std::size_t bytes,
                             std::size_t alignment,
                             CUdeviceptr /*hint*/,
                             unsigned long long /*flags*/)
{
  vmm_driver& vmm = fake().vmm;
  vmm.calls.emplace_back("cuMemAddressReserve");
  if (cudaError_t const s = injected("cuMemAddressReserve"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  std::size_t const align = alignment == 0 ? vmm.minimum_granularity : alignment;
  std::uintptr_t const at = (vmm.next_address + align - 1) / align * align;
  vmm.next_address        = at + bytes + vmm.minimum_granularity;  // a gap: no two touch
  vmm.reserved[at]        = bytes;
  *ptr                    = at;
  return CUDA_SUCCESS;
}

CUresult mem_address_free(CUdeviceptr ptr, std::size_t bytes)
{
  vmm_driver& vmm = fake().vmm;
  auto const it   = vmm.reserved.find(ptr);
  if (it == vmm.reserved.end() || it->second != bytes) { return CUDA_ERROR_INVALID_VALUE; }
  vmm.calls.emplace_back("cuMemAddressFree");
  vmm.reserved.erase(it);
  return CUDA_SUCCESS;
}

CUresult mem_map(CUdeviceptr ptr,
                 std::size_t bytes,
                 std::size_t /*offset*/,
                 CUmemGenericAllocationHandle handle,
                 unsigned long long /*flags*/)
{
  vmm_driver& vmm = fake().vmm;
  vmm.calls.emplace_back("cuMemMap");
  if (cudaError_t const s = injected("cuMemMap"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  vmm_allocation_record* const a = allocation_of(handle);
  if (a == nullptr || a->bytes != bytes || !vmm.reserved.contains(ptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  a->mapped_at = ptr;
  ++vmm.maps;
  return CUDA_SUCCESS;
}

CUresult mem_unmap(CUdeviceptr ptr, std::size_t bytes)
{
  vmm_driver& vmm = fake().vmm;
  for (auto& a : vmm.allocations) {
    if (a->mapped_at == ptr && a->bytes == bytes) {
      vmm.calls.emplace_back("cuMemUnmap");
      a->mapped_at = 0;
      ++vmm.unmaps;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult mem_set_access(CUdeviceptr ptr,
                        std::size_t bytes,
                        CUmemAccessDesc const* desc,
                        std::size_t count)
{
  vmm_driver& vmm = fake().vmm;
  vmm.calls.emplace_back("cuMemSetAccess");
  if (cudaError_t const s = injected("cuMemSetAccess"); s != cudaSuccess) {
    return static_cast<CUresult>(s);
  }
  for (auto& a : vmm.allocations) {
    if (a->mapped_at == ptr && a->bytes == bytes) {
      for (std::size_t i = 0; i < count; ++i) {
        if (!valid_device(desc[i].location.id)) { return CUDA_ERROR_INVALID_DEVICE; }
        a->access.push_back(desc[i].location.id);
      }
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult mem_get_allocation_granularity(std::size_t* granularity,
                                        CUmemAllocationProp const* prop,
                                        CUmemAllocationGranularity_flags option)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  if (!valid_device(prop->location.id)) { return CUDA_ERROR_INVALID_DEVICE; }
  *granularity = option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED ? fake().vmm.recommended_granularity
                                                                : fake().vmm.minimum_granularity;
  return CUDA_SUCCESS;
}

CUresult multicast_get_granularity(std::size_t* granularity,
                                   CUmulticastObjectProp const* /*prop*/,
                                   CUmulticastGranularity_flags /*option*/)
{
  if (forked_child) { return CUDA_ERROR_NOT_INITIALIZED; }
  *granularity = fake().vmm.multicast_granularity;
  return CUDA_SUCCESS;
}

CUresult mem_export_to_shareable_handle(void* shareable,
                                        CUmemGenericAllocationHandle handle,
                                        CUmemAllocationHandleType type,
                                        unsigned long long /*flags*/)
{
  vmm_allocation_record* const a = allocation_of(handle);
  if (a == nullptr || (a->handle_types & static_cast<unsigned>(type)) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  ++fake().vmm.exports;
  int const fd = 100 + static_cast<int>(handle);  // a number, never a descriptor to close
  std::memcpy(shareable, &fd, sizeof(fd));
  return CUDA_SUCCESS;
}

}  // namespace

std::mutex& event_mutex()
{
  static std::mutex m;
  return m;
}

std::mutex& ipc_mutex()
{
  static std::mutex m;
  return m;
}

bool is_mapped(void const* address)
{
  std::lock_guard const lock{ipc_mutex()};
  auto const at = reinterpret_cast<std::uintptr_t>(address);
  return std::any_of(fake().ipc.mapped.begin(), fake().ipc.mapped.end(), [&](auto const& m) {
    return m.second == at;
  });
}

state& fake()
{
  static state s;
  return s;
}

void reset(int device_count)
{
  driver_pools().clear();
  fake()              = state{};
  fake().device_count = device_count;
  fail_next_new       = false;
}

cudaMemPool_t make_pool(cudaMemLocation location, cudaMemAllocationType type)
{
  return add_pool(location, type, false);
}

pool_record& record(cudaMemPool_t pool) { return *reinterpret_cast<pool_record*>(pool); }

void run_graph(unsigned long long capture)
{
  for (auto const& [fn, data] : fake().graphs[capture].host_nodes) {
    fn(data);
  }
}

void destroy_graph(unsigned long long capture)
{
  auto const it = fake().graphs.find(capture);
  if (it == fake().graphs.end()) { return; }
  std::vector<void*> const held = std::move(it->second.user_objects);
  fake().graphs.erase(it);
  for (void* object : held) {
    (void)user_object_release(reinterpret_cast<CUuserObject>(object), 1);
  }
}

void destroy_second_context(int device) { fake().destroyed_second_contexts.push_back(device); }

void unbind_context_on_this_thread() { no_context_here = true; }

cudaStream_t make_stream(int device)
{
  auto record    = std::make_unique<stream_record>();
  record->device = device;
  auto* handle   = reinterpret_cast<cudaStream_t>(record.get());
  fake().streams.push_back(std::move(record));
  return handle;
}

int pools_created()
{
  int n = 0;
  for (auto const& p : fake().pools) {
    n += p->created_by_library ? 1 : 0;
  }
  return n;
}

int pools_destroyed()
{
  int n = 0;
  for (auto const& p : fake().pools) {
    n += p->created_by_library && p->destroyed ? 1 : 0;
  }
  return n;
}

cudaMemPool_t current_pool(cudaMemLocation location, cudaMemAllocationType type)
{
  return driver_pool(&location, type, 0);
}

}  // namespace rmm_next::test::fake_cuda

namespace fc = rmm_next::test::fake_cuda;

// ---- The runtime ------------------------------------------------------------------------------

cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaPeekAtLastError() { return cudaSuccess; }

cudaError_t cudaGetDeviceCount(int* count)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *count = fc::fake().device_count;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *device = fc::fake().current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (!fc::valid_device(device)) { return cudaErrorInvalidDevice; }
  fc::fake().current_device = device;
  fc::fake().second_context = false;  // the runtime binds the device's primary context
  fc::no_context_here       = false;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (!fc::valid_device(device)) { return cudaErrorInvalidDevice; }
  *value = attr == cudaDevAttrHostNumaId ? 0 : 1;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(char const* symbol,
                                             void** function,
                                             unsigned int /*version*/,
                                             unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* status)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  static rmm_next::test::entry_point_table const entries{
    {"cuCtxGetCurrent", reinterpret_cast<void*>(&fc::ctx_get_current)},
    {"cuCtxSetCurrent", reinterpret_cast<void*>(&fc::ctx_set_current)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(&fc::ctx_get_device)},
    {"cuStreamGetDevice", reinterpret_cast<void*>(&fc::stream_get_device)},
    {"cuStreamGetCtx", reinterpret_cast<void*>(&fc::stream_get_ctx)},
    {"cuDevicePrimaryCtxGetState", reinterpret_cast<void*>(&fc::primary_ctx_get_state)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&fc::primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&fc::primary_ctx_release)},
    {"cuEventCreate", reinterpret_cast<void*>(&fc::event_create)},
    {"cuEventRecord", reinterpret_cast<void*>(&fc::event_record)},
    {"cuEventDestroy", reinterpret_cast<void*>(&fc::event_destroy)},
    {"cuEventSynchronize", reinterpret_cast<void*>(&fc::event_synchronize)},
    {"cuStreamWaitEvent", reinterpret_cast<void*>(&fc::stream_wait_event)},
    {"cuStreamGetId", reinterpret_cast<void*>(&fc::stream_get_id)},
    {"cuStreamIsCapturing", reinterpret_cast<void*>(&fc::stream_is_capturing)},
    {"cuThreadExchangeStreamCaptureMode",
     reinterpret_cast<void*>(&fc::thread_exchange_stream_capture_mode)},
    {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&fc::stream_get_capture_info)},
    {"cuCtxPushCurrent", reinterpret_cast<void*>(&fc::ctx_push_current)},
    {"cuCtxPopCurrent", reinterpret_cast<void*>(&fc::ctx_pop_current)},
    {"cuLaunchHostFunc", reinterpret_cast<void*>(&fc::launch_host_func)},
    {"cuUserObjectCreate", reinterpret_cast<void*>(&fc::user_object_create)},
    {"cuUserObjectRelease", reinterpret_cast<void*>(&fc::user_object_release)},
    {"cuGraphRetainUserObject", reinterpret_cast<void*>(&fc::graph_retain_user_object)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(&fc::device_get_attribute)},
    {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&fc::device_can_access_peer)},
    {"cuGetErrorName", reinterpret_cast<void*>(&fc::get_error_name)},
    {"cuMemCreate", reinterpret_cast<void*>(&fc::mem_create)},
    {"cuMemRelease", reinterpret_cast<void*>(&fc::mem_release)},
    {"cuMemAddressReserve", reinterpret_cast<void*>(&fc::mem_address_reserve)},
    {"cuMemAddressFree", reinterpret_cast<void*>(&fc::mem_address_free)},
    {"cuMemMap", reinterpret_cast<void*>(&fc::mem_map)},
    {"cuMemUnmap", reinterpret_cast<void*>(&fc::mem_unmap)},
    {"cuMemSetAccess", reinterpret_cast<void*>(&fc::mem_set_access)},
    {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&fc::mem_get_allocation_granularity)},
    {"cuMulticastGetGranularity", reinterpret_cast<void*>(&fc::multicast_get_granularity)},
    {"cuMemExportToShareableHandle", reinterpret_cast<void*>(&fc::mem_export_to_shareable_handle)},
  };
  return rmm_next::test::answer_entry_point(entries, symbol, function, status);
}

cudaError_t cudaMemGetMemPool(cudaMemPool_t* pool,
                              cudaMemLocation* location,
                              cudaMemAllocationType type)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *pool = fc::driver_pool(location, type, 0);
  return cudaSuccess;
}

cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t* pool,
                                     cudaMemLocation* location,
                                     cudaMemAllocationType type)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *pool = fc::driver_pool(location, type, 1);
  return cudaSuccess;
}

// The device's pools as CUDA 12 programs ask for them: the pools of its Device location.
cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  cudaMemLocation location{cudaMemLocationTypeDevice, device};
  return cudaMemGetMemPool(pool, &location, cudaMemAllocationTypePinned);
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  cudaMemLocation location{cudaMemLocationTypeDevice, device};
  return cudaMemGetDefaultMemPool(pool, &location, cudaMemAllocationTypePinned);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, cudaMemPoolProps const* props)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolCreate");
  if (cudaError_t const s = fc::injected("cudaMemPoolCreate"); s != cudaSuccess) { return s; }
  *pool                          = fc::add_pool(props->location, props->allocType, true);
  fc::record(*pool).max_size     = props->maxSize;
  fc::record(*pool).handle_types = static_cast<unsigned>(props->handleTypes);
#ifdef cudaMemPoolCreateUsageHwDecompress
  fc::record(*pool).hw_decompress = (props->usage & cudaMemPoolCreateUsageHwDecompress) != 0;
#endif
  if (fc::fake().fail_new_after_pool_create) {
    fc::fake().fail_new_after_pool_create = false;
    fc::fail_next_new                     = true;
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolDestroy");
  fc::record(pool).destroyed = true;
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolGetAttribute");
  fc::pool_record const& r = fc::record(pool);
#if CUDART_VERSION >= 13030
  // The attributes CUDA 13.3 added, each as wide as its documented value type; an older driver
  // refuses them.
  auto const answer = [value](auto v) {
    if (!fc::fake().knows_pool_attributes_13_3) { return cudaErrorInvalidValue; }
    std::memcpy(value, &v, sizeof(v));
    return cudaSuccess;
  };
  switch (attr) {
    case cudaMemPoolAttrAllocationType: return answer(r.type);
    case cudaMemPoolAttrExportHandleTypes:
      return answer(static_cast<cudaMemAllocationHandleType>(r.handle_types));
    case cudaMemPoolAttrLocationId: return answer(r.location.id);
    case cudaMemPoolAttrLocationType: return answer(r.location.type);
    case cudaMemPoolAttrMaxPoolSize: return answer(r.max_size);
    case cudaMemPoolAttrHwDecompressEnabled: return answer(static_cast<int>(r.hw_decompress));
    default: break;
  }
#endif
  std::uint64_t v{};
  switch (attr) {
    case cudaMemPoolAttrReleaseThreshold: v = r.release_threshold; break;
    case cudaMemPoolAttrUsedMemCurrent:
    case cudaMemPoolAttrReservedMemCurrent: v = r.used_bytes; break;
    default: break;
  }
  std::memcpy(value, &v, sizeof(v));
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolSetAttribute");
  if (cudaError_t const s = fc::injected("cudaMemPoolSetAttribute"); s != cudaSuccess) { return s; }
  if (attr == cudaMemPoolAttrReleaseThreshold) {
    std::uint64_t v{};
    std::memcpy(&v, value, sizeof(v));
    fc::record(pool).release_threshold = v;
    fc::fake().threshold_sets.emplace_back(pool, v);
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, cudaMemAccessDesc const* descs, size_t count)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolSetAccess");
  for (size_t i = 0; i < count; ++i) {
    if (!fc::valid_device(descs[i].location.id)) { return cudaErrorInvalidDevice; }
    fc::record(pool).access[descs[i].location.id] = descs[i].flags;
  }
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags,
                                 cudaMemPool_t pool,
                                 cudaMemLocation* location)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolGetAccess");
  if (!fc::valid_device(location->id)) { return cudaErrorInvalidDevice; }
  fc::pool_record const& r = fc::record(pool);
  if (r.location.type == cudaMemLocationTypeDevice && r.location.id == location->id) {
    *flags = cudaMemAccessFlagsProtReadWrite;
  } else {
    auto const it = r.access.find(location->id);
    *flags        = it == r.access.end() ? cudaMemAccessFlagsProtNone : it->second;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (cudaError_t const s = fc::injected("cudaStreamCreateWithFlags"); s != cudaSuccess) {
    return s;
  }
  *stream = fc::make_stream(fc::fake().current_device);
  reinterpret_cast<fc::stream_record*>(*stream)->second_context = fc::fake().second_context;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  reinterpret_cast<fc::stream_record*>(stream)->destroyed = true;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  return fc::injected("cudaStreamSynchronize");
}

cudaError_t cudaDeviceSynchronize()
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  std::swap(*mode, fc::thread_capture_mode());
  return cudaSuccess;
}

namespace {
/** @brief The id of the capture `stream` takes part in (`stream_record::capture_id`), or 0. */
unsigned long long capture_id_of(cudaStream_t stream)
{
  fc::stream_record const* s = fc::stream_of(stream);
  return s != nullptr ? s->capture_id : 0;
}
}  // namespace

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *status =
    capture_id_of(stream) != 0 ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

#if CUDART_VERSION >= 13000
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     cudaStreamCaptureStatus* status,
                                     unsigned long long* id,
                                     cudaGraph_t* graph,
                                     cudaGraphNode_t const** dependencies,
                                     cudaGraphEdgeData const** edges,
                                     size_t* count)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  unsigned long long const capture = capture_id_of(stream);
  *status = capture != 0 ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id != nullptr) { *id = capture; }
  if (graph != nullptr) { *graph = nullptr; }
  if (dependencies != nullptr) { *dependencies = nullptr; }
  if (edges != nullptr) { *edges = nullptr; }
  if (count != nullptr) { *count = 0; }
  return cudaSuccess;
}
#endif

// Events order nothing here: there is no GPU work to wait for.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  *event = reinterpret_cast<cudaEvent_t>(new int{});
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  delete reinterpret_cast<int*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t stream)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (auto* s = const_cast<fc::stream_record*>(fc::stream_of(stream))) { ++s->events_recorded; }
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t, unsigned int)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (auto* s = const_cast<fc::stream_record*>(fc::stream_of(stream))) { ++s->event_waits; }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemGetInfo");
  *free_bytes = *total_bytes = std::size_t{16} << 30;
  return cudaSuccess;
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolTrimTo");
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  if (cudaError_t const s = fc::injected("cudaMallocFromPoolAsync"); s != cudaSuccess) { return s; }
  // Threads allocate at once (the plugin's and the adaptors' concurrency tests): each address once.
  static std::mutex addresses;
  std::lock_guard const lock{addresses};
  *ptr = reinterpret_cast<void*>(fc::fake().next_address);
  fc::fake().next_address += (size + 255) / 256 * 256 + 256;
  fc::record(pool).used_bytes += size;
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void*, cudaStream_t)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  return fc::injected("cudaFreeAsync");
}

// ---- Stream-ordered IPC: pools imported as records, allocations mapped once each ----------------

cudaError_t cudaMemPoolImportFromShareableHandle(cudaMemPool_t* pool,
                                                 void* /*handle*/,
                                                 cudaMemAllocationHandleType /*type*/,
                                                 unsigned int /*flags*/)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolImportFromShareableHandle");
  if (cudaError_t const s = fc::injected("cudaMemPoolImportFromShareableHandle");
      s != cudaSuccess) {
    return s;
  }
  std::lock_guard const lock{fc::ipc_mutex()};
  *pool = fc::add_pool(cudaMemLocation{cudaMemLocationTypeDevice, fc::fake().current_device},
                       cudaMemAllocationTypePinned,
                       false);
  ++fc::fake().ipc.pools_imported;
  return cudaSuccess;
}

cudaError_t cudaMemPoolExportPointer(cudaMemPoolPtrExportData* data, void* ptr)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolExportPointer");
  if (cudaError_t const s = fc::injected("cudaMemPoolExportPointer"); s != cudaSuccess) {
    return s;
  }
  *data              = cudaMemPoolPtrExportData{};
  auto const address = reinterpret_cast<std::uintptr_t>(ptr);
  static_assert(sizeof(data->reserved) >= sizeof(address));
  std::memcpy(data->reserved, &address, sizeof(address));
  return cudaSuccess;
}

cudaError_t cudaMemPoolImportPointer(void** ptr, cudaMemPool_t pool, cudaMemPoolPtrExportData* data)
{
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaMemPoolImportPointer");
  std::function<void()> inside;
  {
    std::lock_guard const lock{fc::ipc_mutex()};
    if (cudaError_t const s = fc::injected("cudaMemPoolImportPointer"); s != cudaSuccess) {
      return s;
    }
    if (fc::record(pool).destroyed) { return cudaErrorInvalidValue; }
    std::uintptr_t exported{};
    std::memcpy(&exported, data->reserved, sizeof(exported));
    fc::ipc_driver& ipc = fc::fake().ipc;
    auto [it, made]     = ipc.mapped.try_emplace(exported, ipc.next_address);
    if (made) {
      ipc.next_address += 0x10000;
      ++ipc.mappings_made;
    }
    ++ipc.pointers_imported;
    *ptr   = reinterpret_cast<void*>(it->second);
    inside = ipc.inside_import;
  }
  if (inside) { inside(); }
  return cudaSuccess;
}

// Only imported addresses are freed with cudaFree here; any other address is not mapped.
cudaError_t cudaFree(void* ptr)
{
  if (ptr == nullptr) { return cudaSuccess; }
  std::lock_guard const lock{fc::ipc_mutex()};
  fc::ipc_driver& ipc = fc::fake().ipc;
  ++ipc.free_calls;
  if (fc::forked_child) { return cudaErrorInitializationError; }
  fc::note_query_mode("cudaFree");
  auto const at = reinterpret_cast<std::uintptr_t>(ptr);
  auto const it = std::find_if(
    ipc.mapped.begin(), ipc.mapped.end(), [&](auto const& m) { return m.second == at; });
  if (it == ipc.mapped.end()) {
    ++ipc.failed_frees;
    return cudaErrorInvalidValue;
  }
  ipc.mapped.erase(it);
  ++ipc.imported_frees;
  return cudaSuccess;
}

// ---- operator new, failing once when told to ------------------------------------------------
// The replacements pair malloc with free, as the library's own do; GCC cannot tell once inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t bytes)
{
  if (fc::fail_next_new) {
    fc::fail_next_new = false;
    throw std::bad_alloc{};
  }
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) { return p; }
  throw std::bad_alloc{};
}

void operator delete(void* ptr) noexcept { std::free(ptr); }
void operator delete(void* ptr, std::size_t) noexcept { std::free(ptr); }
