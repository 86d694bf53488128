/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

/**
 * @file
 * @brief The C interface of `librmm_next_allocator.so` (CMake target `rmm-next::allocator_plugin`):
 * allocation functions with the signatures PyTorch's `CUDAPluggableAllocator`, CuPy's
 * `CFunctionAllocator` and a Numba EMM plugin expect, over the process-wide per-device resources
 * of `<rmm_next/per_device_resource.hpp>`.
 *
 * Every function is safe to call from any thread. None lets an exception out: a failed
 * allocation returns NULL, any other failure returns -1 (or 0 where documented), and
 * `rmm_next_last_error()` then says what happened on the calling thread.
 *
 * Streams: `0` is the legacy default stream. A device of -1 means the current device, except in
 * the resource-choice functions, where it means every device.
 *
 * Frees: the library records every block it hands out, from every allocation function, and a free
 * uses the size, device (and for CuPy the stream) recorded then. A free of anything else (a host
 * address, a pointer into a block, a block freed already, a block of the other kind: the
 * `rmm_next_vmm_*` functions' and the others' do not mix) is refused: nothing is freed or counted,
 * and `rmm_next_last_error()` says "<function> was given a pointer this allocator did not hand out
 * (or freed already); it is not freed".
 */

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Changes whenever a signature or structure below changes; see `rmm_next_abi_version`. */
#define RMM_NEXT_ALLOCATOR_ABI_VERSION 5

/** @brief The `RMM_NEXT_ALLOCATOR_ABI_VERSION` the library was built with. */
int rmm_next_abi_version(void);

/** @brief What the last failed call on this thread reported ("" if none); valid until the next. */
char const* rmm_next_last_error(void);

/** @brief The number of visible CUDA devices, or -1 (see `rmm_next_last_error`). */
int rmm_next_device_count(void);

/** @brief Free and total memory of `device` (`cudaMemGetInfo`). @return 0, or -1. */
int rmm_next_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

/* ---- Choosing each device's resource -------------------------------------------------------
 * Each call replaces the process-wide resource of `device` (`set_per_device_resource_ref`), so
 * C++ code using `get_per_device_resource_ref` sees the same choice. With device -1 the choice is
 * the default for every device, made when this library first uses the device (and at once for
 * devices it already used). A device that still has memory allocated through this library is
 * left alone: the call fails. Choose the resource first, then the thread cache. */

/** @brief Options of a pool the library creates and owns (`cudaMemPoolCreate`). */
typedef struct rmm_next_pool_options {
  size_t initial_pool_size; /**< bytes reserved at creation; 0: none */
  size_t release_threshold; /**< bytes kept across synchronizations; SIZE_MAX: all (default) */
  size_t maximum_pool_size; /**< upper bound of the pool; 0: none */
} rmm_next_pool_options;

/** @brief Limits of the thread cache (see `thread_cache_options`); 0 keeps a field's default. */
typedef struct rmm_next_thread_cache_options {
  size_t max_cached_bytes_per_thread; /**< default 32 MiB */
  size_t max_block_size;              /**< default 1 MiB */
  size_t max_streams_per_thread;      /**< default 8 */
  int skip_capture_detection;         /**< nonzero: `detect_capture = false` */
} rmm_next_thread_cache_options;

/** @brief Limits of the segment cache (see `segment_cache_options`). */
typedef struct rmm_next_segment_cache_options {
  /** idle segment bytes kept at least; SIZE_MAX: the default (16 MiB, with a quarter of the peak
   * live bytes since the last trim when that is more); any other value: that bound (0: none),
   * with no fraction unless `max_idle_fraction` gives one */
  size_t max_idle_bytes;
  size_t fence_interval; /**< most frees on a stream between its fences; 0: the default (64) */
  /** the fraction of the peak live bytes idle segments may also reach while the live bytes are
   * that far below the peak (`segment_cache_options::max_idle_fraction`); 0: the default (as
   * `max_idle_bytes` says), negative: none, NaN: refused */
  double max_idle_fraction;
} rmm_next_segment_cache_options;

/** @brief The device's current pool (`cudaMemGetMemPool`), shared with every
 * `cudaMallocAsync` user in the process: the initial resource. @return 0, or -1. */
int rmm_next_use_current_pool(int device);

/** @brief A pool of the library's own (NULL: default options), kept apart from other pools.
 * @return 0, or -1. */
int rmm_next_use_owned_pool(int device, rmm_next_pool_options const* options);

/** @brief Managed memory from the device's current managed pool (CUDA 13). @return 0, or -1. */
int rmm_next_use_managed_memory(int device);

/** @brief Puts a `thread_cache_adaptor` in front of the device's resource (NULL: default
 * options). Calling it again while the cache is in place changes nothing. @return 0, or -1. */
int rmm_next_enable_thread_cache(int device, rmm_next_thread_cache_options const* options);

/** @brief Removes the library's thread cache from `device`, returning its blocks.
 * @return 0, or -1. */
int rmm_next_disable_thread_cache(int device);

/** @brief Gives unused memory back: returns the thread caches' blocks, the segment caches' idle
 * segments and frees that waited for a stream capture to end, and trims the pool to what is in
 * use (without synchronizing the device: frees still queued on a stream go back at a later call).
 * Only devices this library has used (all with -1). @return 0, or -1. */
int rmm_next_release_unused(int device);

/* ---- Stream-ordered allocation ------------------------------------------------------------- */

/** @brief `size` bytes (256-byte aligned) in the order of `stream`; NULL for 0 bytes or on
 * failure (out of memory included). */
void* rmm_next_allocate(size_t size, int device, cudaStream_t stream);

/** @brief Frees `ptr` (from `rmm_next_allocate`) in the order of `stream`. */
void rmm_next_deallocate(void* ptr, size_t size, int device, cudaStream_t stream);

/* ---- PyTorch: torch.cuda.memory.CUDAPluggableAllocator ------------------------------------- */

/** @brief PyTorch's alloc function: `size` bytes on `device` in the order of `stream`; NULL on
 * failure, which PyTorch reports as its own error. 0 bytes: NULL, not a failure; a negative size
 * is refused (NULL and a message). */
void* rmm_next_torch_alloc(ssize_t size, int device, cudaStream_t stream);

/** @brief PyTorch's free function: frees on the stream the block was allocated on, after the
 * work already queued on every stream `rmm_next_torch_record_stream` named for it. A negative
 * size is refused: nothing is freed, and `rmm_next_last_error` says why. */
void rmm_next_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream);

/** @brief PyTorch's record-stream hook (`Tensor.record_stream`): the free of `ptr` will wait for
 * the work queued on `stream` up to that free. A pointer the library did not hand out is refused
 * (`rmm_next_last_error`). */
void rmm_next_torch_record_stream(void* ptr, cudaStream_t stream);

/** @brief PyTorch's reset hook (`torch.cuda.empty_cache()`): `rmm_next_release_unused(-1)`. */
void rmm_next_torch_empty_cache(void);

/** @brief The alloc function for a `torch.cuda.MemPool`, whose segments PyTorch's caching
 * allocator keeps and hands to any stream: `size` bytes on `device`, allocated on a stream of the
 * library's own and complete before it returns, so never part of a stream capture. `stream` is
 * ignored; free with `rmm_next_torch_free`. NULL on failure, also for a size that is not
 * positive. */
void* rmm_next_torch_segment_alloc(ssize_t size, int device, cudaStream_t stream);

/* ---- CuPy: cupy.cuda.memory.CFunctionAllocator ---------------------------------------------- */

/** @brief CuPy's malloc function. `param` is the stream to allocate on (the Python module makes
 * one allocator per CuPy stream; NULL: the legacy default stream). The size and stream are kept
 * in a table, since CuPy's free passes neither. */
void* rmm_next_cupy_malloc(void* param, size_t size, int device_id);

/** @brief CuPy's free function: frees on the stream `ptr` was allocated on. */
void rmm_next_cupy_free(void* param, void* ptr, int device_id);

/** @brief Says that `stream` is destroyed: memory CuPy allocated on it and still holds is then
 * freed on the legacy default stream, after a device synchronization made now (only when such
 * memory exists) lets the destroyed stream's work finish. */
void rmm_next_cupy_forget_stream(cudaStream_t stream);

/* ---- Numba: an EMM plugin's memalloc and finalizer ------------------------------------------ */

/** @brief `size` bytes on `device`, ordered on the legacy default stream, so that work on the
 * default stream and every blocking stream may use it. NULL on failure. */
void* rmm_next_numba_alloc(size_t size, int device);

/** @brief Frees memory from `rmm_next_numba_alloc` on the legacy default stream, after all work
 * queued so far on the default stream and every blocking stream. */
void rmm_next_numba_free(void* ptr, size_t size, int device);

/* ---- Statistics ----------------------------------------------------------------------------- */

/** @brief Which resource serves a device. */
typedef enum rmm_next_resource_kind {
  rmm_next_resource_current_pool = 0, /**< the device's current pool (the initial resource) */
  rmm_next_resource_owned_pool   = 1, /**< a pool of this library's own */
  rmm_next_resource_managed      = 2, /**< managed memory */
  rmm_next_resource_external     = 3 /**< a resource C++ code set (`set_per_device_resource_ref`) */
} rmm_next_resource_kind;

/** @brief What went through this library for one device, and the state of its pool. */
typedef struct rmm_next_statistics {
  uint64_t allocations;              /**< successful allocations, every framework */
  uint64_t deallocations;            /**< frees */
  uint64_t failed_allocations;       /**< allocation calls that returned NULL with a message: a bad
                                          size as well as out of memory (0 bytes is no failure;
                                          a device that does not exist is counted nowhere) */
  uint64_t allocated_bytes;          /**< bytes allocated and not yet freed */
  uint64_t total_allocated_bytes;    /**< bytes ever allocated */
  uint64_t torch_allocations;        /**< of `allocations`: through the PyTorch functions */
  uint64_t cupy_allocations;         /**< ... the CuPy functions */
  uint64_t numba_allocations;        /**< ... the Numba functions */
  uint64_t other_allocations;        /**< ... `rmm_next_allocate` */
  uint64_t pool_reserved_bytes;      /**< the pool serving the device (current pool unless owned
                                          or managed): memory it holds */
  uint64_t pool_reserved_bytes_high; /**< its high watermark */
  uint64_t pool_used_bytes;          /**< memory it has handed out, to every user */
  uint64_t pool_used_bytes_high;     /**< its high watermark */
  uint64_t cache_hits;               /**< thread cache (0 without one): allocations it served */
  uint64_t cache_misses;             /**< cacheable allocations that went to the pool */
  uint64_t cache_bypasses;           /**< allocations it could not cache */
  uint64_t cached_bytes;             /**< bytes it holds now */
  uint64_t deferred_frees;           /**< frees waiting for a stream capture to end */
  int32_t resource_kind;             /**< an `rmm_next_resource_kind` */
  int32_t thread_cache_enabled;      /**< nonzero when this library's thread cache is in place */
  uint64_t allocated_bytes_high;     /**< high watermark of `allocated_bytes` since the start or
                                          the last `rmm_next_reset_peak_statistics` */
} rmm_next_statistics;

/** @brief Puts a `segment_cache_adaptor` over the device's resource (NULL: default options), under
 * the thread cache when one is in place; -1 for every device, also those used later. Calling it
 * again while the cache is in place changes nothing. @return 0, or -1. */
int rmm_next_enable_segment_cache(int device, rmm_next_segment_cache_options const* options);

/** @brief Takes the device's segment cache out (-1: every device); its idle segments go back to
 * the pool, and blocks still live go back through it when freed. @return 0, or -1. */
int rmm_next_disable_segment_cache(int device);

/** @brief What a device's segment cache holds and has done (`segment_cache_statistics`). */
typedef struct rmm_next_segment_cache_statistics {
  uint64_t enabled;             /**< 1 when the device has a segment cache of this library's */
  uint64_t hits;                /**< allocations served from a cached block */
  uint64_t misses;              /**< allocations that took a new segment */
  uint64_t bypasses;            /**< allocations it never serves (captured streams, bad input) */
  uint64_t segments;            /**< segments held now */
  uint64_t segment_bytes;       /**< their bytes */
  uint64_t live_bytes;          /**< bytes of live blocks */
  uint64_t idle_bytes;          /**< bytes of segments with no live block */
  uint64_t released_segments;   /**< segments given back to the pool so far */
  uint64_t unproven_bytes;      /**< idle bytes no fence proves free yet */
  uint64_t graph_pending_bytes; /**< freed in captures whose graphs have not run the free */
  uint64_t lost_bytes;          /**< blocks nothing will prove free */
} rmm_next_segment_cache_statistics;

/** @brief Fills `out` for `device` (-1: the current device); all 0 without a segment cache.
 * @return 0, or -1. */
int rmm_next_get_segment_cache_statistics(int device, rmm_next_segment_cache_statistics* out);

/** @brief Fills `out` for `device` (-1: the current device). @return 0, or -1. */
int rmm_next_get_statistics(int device, rmm_next_statistics* out);

/** @brief Reads `attribute` (a `cudaMemPoolAttr`) of the pool serving `device` (-1: the current
 * device) into `value`; the reuse flags read as 0 or 1. @return 0, or -1 (no pool: managed memory
 * without one, or a resource set from C++). */
int rmm_next_get_pool_attribute(int device, int attribute, uint64_t* value);

/* ---- Logging and tracking ------------------------------------------------------------------
 * Process-wide, for every device and framework: a logging adaptor (RMM's CSV format) over a
 * tracking adaptor (one per device) over each device's resource (thread cache, pool), whatever
 * resource is chosen later. Environment: RMM_NEXT_LOG=<path> starts a log and RMM_NEXT_TRACK=1
 * (or `stacks`, with stack traces) turns tracking on, at the library's first allocation or call
 * of these functions; the calls below change what they set. */

/** @brief Starts logging to `path` (created or truncated); a log already open is flushed and
 * closed first. NULL or "": only ends the log. What is buffered is also written at exit.
 * @return 0, or -1 (the file cannot be opened: logging is left as it was). */
int rmm_next_set_log(char const* path);

/** @brief Writes out what the log has buffered. @return 1, 0 when no log is open, or -1. */
int rmm_next_flush_log(void);

/** @brief Tracking on (nonzero `enabled`; kept as it is when already on) or off (its records are
 * forgotten); `stack_traces` nonzero records each allocation's stack. @return 0, or -1. */
int rmm_next_set_tracking(int enabled, int stack_traces);

/** @brief Whether a log is open and whether tracking is on (nonzero). @return 0, or -1. */
int rmm_next_get_tracing(int* logging, int* tracking);

/** @brief One live allocation the tracking recorded. */
typedef struct rmm_next_allocation {
  void* ptr;               /**< the address handed out */
  size_t size;             /**< the size asked for */
  size_t alignment;        /**< the alignment asked for */
  cudaStream_t stream;     /**< its stream (0: the legacy default stream) */
  uint64_t thread;         /**< the allocating thread's `pthread_self()` */
  int64_t time_ns;         /**< when it was allocated, in ns since the Unix epoch */
  int32_t device;          /**< its device */
  int32_t reserved;        /**< 0 */
  char const* stack_trace; /**< one frame a line; "" unless stack traces are on */
} rmm_next_allocation;

/** @brief Takes a snapshot of the live allocations of `device` (-1: every device), oldest first,
 * kept for the calling thread until its next call. @return how many, or -1 (tracking is off). */
int64_t rmm_next_outstanding(int device);

/** @brief Copies entry `index` of the calling thread's snapshot into `out` (its `stack_trace`
 * valid until the thread's next `rmm_next_outstanding`). @return 0, or -1. */
int rmm_next_outstanding_entry(size_t index, rmm_next_allocation* out);

/** @brief Restarts the high watermarks of `device` (-1: the current device) from the current
 * values: `allocated_bytes_high`, and those of the pool serving it (`pool_reserved_bytes_high`,
 * `pool_used_bytes_high`: the pool's own, so for every user of a shared pool). @return 0, or -1. */
int rmm_next_reset_peak_statistics(int device);

/* ---- Memory NCCL can register: a vmm_resource per device ------------------------------------
 * Apart from the resource of the functions above: each device has its own `vmm_resource`
 * (<rmm_next/vmm_resource.hpp>), made on first use, that sub-allocates from `cuMemCreate`
 * segments with shareable handles, the memory `ncclCommRegister` and NCCL's symmetric windows
 * take. PyTorch reaches it through a `torch.cuda.MemPool` over `rmm_next_vmm_alloc` /
 * `rmm_next_vmm_free` (`rmm_next.torch.nccl_mem_pool()`). Its segments stay mapped for the life
 * of the process. */

/** @brief Handle type bits of `rmm_next_vmm_options::handle_types` (CUmemAllocationHandleType). */
#define RMM_NEXT_VMM_HANDLE_POSIX_FD 0x1u
#define RMM_NEXT_VMM_HANDLE_FABRIC   0x8u

/** @brief `rmm_next_vmm_options::granularity`. */
typedef enum rmm_next_vmm_granularity {
  rmm_next_vmm_granularity_recommended = 0, /**< CU_MEM_ALLOC_GRANULARITY_RECOMMENDED */
  rmm_next_vmm_granularity_minimum     = 1, /**< CU_MEM_ALLOC_GRANULARITY_MINIMUM */
  rmm_next_vmm_granularity_multicast   = 2  /**< cuMulticastGetGranularity (recommended) */
} rmm_next_vmm_granularity;

/** @brief How a device's `vmm_resource` makes its segments (see `vmm_options`). */
typedef struct rmm_next_vmm_options {
  size_t segment_size;     /**< bytes of a segment, rounded up to the granularity; 0: 64 MiB */
  uint32_t handle_types;   /**< RMM_NEXT_VMM_HANDLE_* bits; FABRIC is dropped when refused */
  int32_t granularity;     /**< an `rmm_next_vmm_granularity` */
  int32_t peer_access;     /**< nonzero: every peer that can reach the device; 0: the device only */
  int32_t gpu_direct_rdma; /**< nonzero: `gpuDirectRDMACapable` where the device has it */
} rmm_next_vmm_options;

/** @brief The options of `device` (-1: the current device) from now on (NULL: the defaults,
 * POSIX_FD | FABRIC, RDMA, recommended granularity, every peer, 64 MiB). Calling it again with
 * equal options changes nothing; other options are refused while the device's resource has made
 * a segment. @return 0, or -1. */
int rmm_next_vmm_configure(int device, rmm_next_vmm_options const* options);

/** @brief A block of `size` bytes from the `vmm_resource` of `device`, ready for any stream when
 * this returns (earlier frees of it are waited for on the host); `stream` is ignored. The alloc
 * function of a `torch.cuda.MemPool`. NULL on failure. */
void* rmm_next_vmm_alloc(ssize_t size, int device, cudaStream_t stream);

/** @brief Frees a block of `rmm_next_vmm_alloc` in the order of `stream` (0: the legacy default
 * stream of the block's device): it is handed out again only after the work queued on `stream` so
 * far. On a stream being captured, in any capture mode, the free is the graph's: the block is
 * handed out again once the graph has run past the free (never, for a graph destroyed without
 * running). */
void rmm_next_vmm_free(void* ptr, ssize_t size, int device, cudaStream_t stream);

/** @brief The state of one device's `vmm_resource`. */
typedef struct rmm_next_vmm_statistics {
  uint64_t allocations;        /**< successful `rmm_next_vmm_alloc` calls */
  uint64_t deallocations;      /**< `rmm_next_vmm_free` calls */
  uint64_t failed_allocations; /**< allocation calls that returned NULL with a message */
  uint64_t allocated_bytes;    /**< bytes handed out and not freed (each rounded up to 256) */
  uint64_t segment_count;      /**< segments mapped */
  uint64_t segment_bytes;      /**< their bytes */
  uint64_t segment_size;       /**< the size of a segment made for a smaller request */
  uint64_t granularity;        /**< what segments are rounded to */
  uint32_t handle_types;       /**< RMM_NEXT_VMM_HANDLE_* bits segments are made with now */
  int32_t gpu_direct_rdma;     /**< nonzero: segments are `gpuDirectRDMACapable` */
  int32_t access_devices;      /**< devices granted read-write access, the device included */
  int32_t made;                /**< nonzero once the resource exists (0: nothing else is set) */
} rmm_next_vmm_statistics;

/** @brief Fills `out` for `device` (-1: the current device) without making the resource.
 * @return 0, or -1. */
int rmm_next_vmm_get_statistics(int device, rmm_next_vmm_statistics* out);

/** @brief Copies the base and size of up to `capacity` segments of `device`'s `vmm_resource`, in
 * the order they were made, into `bases` and `sizes` (either may be NULL when `capacity` is 0).
 * @return the number of segments (which may exceed `capacity`), or -1. */
int64_t rmm_next_vmm_segments(int device, void** bases, size_t* sizes, size_t capacity);

#ifdef __cplusplus
}
#endif
