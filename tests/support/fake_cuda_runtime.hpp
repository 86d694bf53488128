/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A fake of the CUDA runtime calls the async resources make, for CPU tests of what only a device
// would otherwise show: which pools are created and destroyed, which attributes are set, what
// happens when a step of construction fails. fake_cuda_runtime.cpp defines the runtime functions
// themselves (extern "C", so the program's own definitions take the place of libcudart's) and
// the driver entry points the library looks up; link it into a test program of its own. In a
// child forked from the program every call fails, with cudaErrorInitializationError
// (CUDA_ERROR_NOT_INITIALIZED from the driver entry points), as the real driver's do.
//
// Handles are addresses of records kept here: a pool is its pool_record, a stream its
// stream_record. Allocations are unique addresses never to be dereferenced.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rmm_next::test::fake_cuda {

struct pool_record {
  cudaMemLocation location{};
  cudaMemAllocationType type{};
  bool created_by_library{false};  ///< made by cudaMemPoolCreate (not a driver or test pool)
  bool destroyed{false};
  std::uint64_t release_threshold{0};
  std::map<int, cudaMemAccessFlags> access;  ///< granted to devices (the owner always has it)
  std::size_t used_bytes{0};
  // What cudaMemPoolCreate was given, for the attributes CUDA 13.3 added (0 / none / false for
  // driver and test pools).
  std::uint64_t max_size{0};
  unsigned handle_types{0};
  bool hw_decompress{false};
};

struct stream_record {
  int device{};
  bool second_context{false};  ///< made while the device's second context was current
  bool destroyed{false};
  unsigned long long capture_id{0};  ///< nonzero: captured, as the capture queries then say
  int events_recorded{0};            ///< cudaEventRecord calls on the stream
  int event_waits{0};                ///< cudaStreamWaitEvent calls of the stream
  /// A call the driver refuses on a captured stream was made on it while captured (cuStreamGetId,
  /// a wait outside the capture on an event recorded inside it): the real capture would end with
  /// cudaErrorStreamCaptureInvalidated.
  bool capture_invalidated{false};
};

/** @brief What the capture of one id put into its graph (`cuStreamGetCaptureInfo` names it). */
struct graph_record {
  std::vector<std::pair<void (*)(void*), void*>> host_nodes;  ///< cuLaunchHostFunc, in order
  std::vector<void*> user_objects;                            ///< references the graph holds
};

/** @brief A physical allocation of the fake driver's cuMemCreate (its handle is its index + 1). */
struct vmm_allocation_record {
  std::size_t bytes{};
  unsigned handle_types{};
  bool gpu_direct_rdma{};
  int device{};
  bool released{false};
  std::uintptr_t mapped_at{0};  ///< 0 while not mapped
  std::vector<int> access;      ///< devices granted read-write access
};

/** @brief What the fake driver's virtual memory calls know and count. */
struct vmm_driver {
  std::map<int, int> attributes;  ///< CUdevice_attribute -> value; absent: 1
  std::size_t minimum_granularity{std::size_t{2} << 20};
  std::size_t recommended_granularity{std::size_t{4} << 20};
  std::size_t multicast_granularity{std::size_t{32} << 20};
  bool refuse_fabric{false};  ///< cuMemCreate with FABRIC returns CUDA_ERROR_NOT_PERMITTED
  std::size_t memory{std::size_t{1} << 30};  ///< bytes cuMemCreate can hand out per device
  std::map<int, std::size_t> in_use;         ///< device -> bytes created and not released
  std::vector<int> no_peer_access;           ///< devices that cannot access the others
  std::vector<std::unique_ptr<vmm_allocation_record>> allocations;
  std::vector<unsigned> create_attempts;           ///< the handle types of every cuMemCreate call
  std::map<std::uintptr_t, std::size_t> reserved;  ///< address -> bytes
  std::uintptr_t next_address{std::uintptr_t{1} << 40};
  int maps{0};
  int unmaps{0};
  int exports{0};
  std::vector<std::string> calls;  ///< cuMem* calls in order
};

/** @brief What the fake driver's events saw (guarded by `event_mutex()`). */
struct event_log {
  int created{0};
  int refused_waits{0};  ///< waits and host waits on events of a destroyed context
  int destroyed{0};
  int synchronized{0};
  std::vector<std::pair<void*, cudaStream_t>> recorded;  ///< event, stream
  std::vector<std::pair<cudaStream_t, void*>> waits;     ///< waiting stream, event
};

/**
 * @brief What the fake's stream-ordered IPC calls know and count (guarded by `ipc_mutex()`).
 *
 * `cudaMemPoolExportPointer` describes an allocation by its address. `cudaMemPoolImportPointer`
 * maps each exported allocation once, as the driver does: importing it again while it is mapped
 * returns the same address; `cudaFree` of that address unmaps it, and a second `cudaFree` fails
 * with `cudaErrorInvalidValue`.
 */
struct ipc_driver {
  std::map<std::uintptr_t, std::uintptr_t> mapped;  ///< exported address -> imported address
  int pools_imported{0};     ///< cudaMemPoolImportFromShareableHandle calls that succeeded
  int pointers_imported{0};  ///< cudaMemPoolImportPointer calls that succeeded
  int mappings_made{0};      ///< of those, the ones that mapped an allocation not mapped yet
  int free_calls{0};         ///< every cudaFree call, in a forked child too, null excepted
  int imported_frees{0};     ///< cudaFree calls that unmapped an imported address
  int failed_frees{0};       ///< cudaFree calls of an address not mapped (cudaErrorInvalidValue)
  /// Runs inside every cudaMemPoolImportPointer (without `ipc_mutex()` held), once the address
  /// is chosen, before the call returns: a test holds an import in flight there.
  std::function<void()> inside_import;
  std::uintptr_t next_address{std::uintptr_t{1} << 44};
};

/** @brief Everything the fake knows; `reset()` starts over. */
struct state {
  vmm_driver vmm;
  event_log events;
  ipc_driver ipc;
  int device_count{2};
  int current_device{0};
  /// The current context is a second context of `current_device` (as `cuCtxCreate` makes), not
  /// its primary one. `cuCtxSetCurrent` and `cudaSetDevice` (which binds the primary) change it.
  bool second_context{false};
  std::vector<std::unique_ptr<pool_record>> pools;
  std::vector<std::unique_ptr<stream_record>> streams;
  std::map<std::string, cudaError_t> fail_next;  ///< call name -> error its next call returns
  bool fail_new_after_pool_create{false};  ///< the operator new after cudaMemPoolCreate throws
  /// cudaMemPoolGetAttribute answers the attributes CUDA 13.3 added (allocation type to hardware
  /// decompression); false: refuses them with cudaErrorInvalidValue, as an older driver does.
  bool knows_pool_attributes_13_3{true};
  std::vector<std::pair<cudaMemPool_t, std::uint64_t>> threshold_sets;  ///< every change
  /// The capture mode of the calling thread at each pool-management call (cudaMemPoolCreate,
  /// cudaMemPoolDestroy, cudaMemPoolGet/SetAttribute, cudaMemPoolGet/SetAccess,
  /// cudaMemPoolTrimTo), cudaMemGetInfo, cuEventSynchronize and the IPC calls
  /// (cudaMemPoolImportFromShareableHandle, cudaMemPoolExportPointer, cudaMemPoolImportPointer,
  /// cudaFree): such a call made in global mode
  /// while another thread captures in global mode is refused by the real driver, and invalidates
  /// that capture.
  std::vector<std::pair<std::string, cudaStreamCaptureMode>> query_modes;
  std::uintptr_t next_address{0x10000};
  std::map<unsigned long long, graph_record> graphs;  ///< by capture id
  int user_objects_live{0};                           ///< made and not yet destroyed
  std::vector<int> destroyed_second_contexts;         ///< devices whose second context is gone
};

/** @brief The fake's state. */
state& fake();

/** @brief Held by the fake's event entry points, which may run on several threads at once. */
std::mutex& event_mutex();

/** @brief Held by the fake's IPC entry points, which may run on several threads at once. */
std::mutex& ipc_mutex();

/** @brief True while `address` is an imported address not freed yet (takes `ipc_mutex()`). */
bool is_mapped(void const* address);

/** @brief Forgets every pool, stream and failure; `device_count` devices, device 0 current. */
void reset(int device_count = 2);

/** @brief A pool the test owns (as `cudaMemPoolCreate` by the application would make it). */
cudaMemPool_t make_pool(cudaMemLocation location, cudaMemAllocationType type);

/** @brief The record of `pool`. */
pool_record& record(cudaMemPool_t pool);

/** @brief A stream of `device`. */
cudaStream_t make_stream(int device);

/** @brief Runs the host nodes of the graph of capture `capture`, in order (a launch). */
void run_graph(unsigned long long capture);

/** @brief Destroys the graph of capture `capture`: the user objects it holds are released. */
void destroy_graph(unsigned long long capture);

/**
 * @brief Destroys the second context of `device`: its events can no longer be waited on, and
 * waits on them return CUDA_ERROR_CONTEXT_IS_DESTROYED.
 */
void destroy_second_context(int device);

/**
 * @brief The calling thread has no current context, as a thread that has made no runtime call yet:
 * `cuCtxGetCurrent` answers null, and the capture questions about a default stream (0,
 * `cudaStreamLegacy`, `cudaStreamPerThread`) fail with CUDA_ERROR_INVALID_CONTEXT, as the driver's
 * do. `cudaSetDevice` and `cuCtxSetCurrent` (or `cuCtxPushCurrent`) with a context bind one again.
 */
void unbind_context_on_this_thread();

/** @brief Pools the library created with `cudaMemPoolCreate`, and how many of them it destroyed. */
int pools_created();
int pools_destroyed();

/** @brief The driver's current pool for `location` and `type` (made on first use). */
cudaMemPool_t current_pool(cudaMemLocation location, cudaMemAllocationType type);

}  // namespace rmm_next::test::fake_cuda
