/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/handle_names_and_fabric.hpp>
#include <rmm_next/detail/imported_pointer_registry.hpp>
#include <rmm_next/detail/pool_errors.hpp>
#include <rmm_next/detail/pool_location_and_access.hpp>
#include <rmm_next/detail/pool_state.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_handle_socket.hpp>  // sending the handles: part of IPC for includers
#include <rmm_next/pool_options.hpp>
#include <rmm_next/shareable_pool_handle.hpp>

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief Sharing pool memory between processes: export a pool once as an OS handle, export each
 * allocation as a few bytes, import both in the other process (see docs/ipc.md). The handle is
 * `shareable_pool_handle.hpp`'s; sending it over a Unix-domain socket, `pool_handle_socket.hpp`'s
 * (both included here).
 *
 * Every driver call here runs in relaxed capture mode: a graph captured on another thread in
 * global mode, or on the calling thread, is never invalidated by an export, an import or a
 * release (the driver refuses these calls to a thread in global mode then, and none of them is
 * stream-ordered work that a capture could hold up).
 *
 * One allocation imported several times in a process is mapped once: the driver returns the same
 * address to every import, and the `imported_pointer`s share that mapping, which is freed once,
 * by the last of them (see `imported_pointer`).
 *
 * In a child forked after its parent used CUDA, and once the process is exiting, the driver cannot
 * be used: exports and imports throw `cuda_error` saying so, and what the child destroys makes no
 * CUDA call (the parent's imports stay the parent's).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief What another process needs to import one allocation of an exported pool
 * (`cudaMemPoolPtrExportData`): plain bytes, to be sent by any means.
 */
struct pool_pointer_export {
  cudaMemPoolPtrExportData data;  ///< the driver's opaque description of the allocation
};
static_assert(std::is_trivially_copyable_v<pool_pointer_export>);
static_assert(std::is_standard_layout_v<pool_pointer_export>);

namespace detail {

/**
 * @brief Throws `cuda_error` (`cudaErrorInitializationError`) for the IPC call `who` where CUDA
 * cannot be used any more: in a child forked after its parent used CUDA, or once the process is
 * exiting (`runtime_unloading`).
 */
inline void refuse_where_cuda_is_gone(char const* who)
{
  if (!runtime_unloading().load(std::memory_order_relaxed)) { return; }
  throw cuda_error{cudaErrorInitializationError,
                   error_message(who,
                                 "CUDA cannot be used in this process: it is a child forked after "
                                 "its parent used CUDA, or it is exiting; make IPC calls in the "
                                 "parent, or start the child with exec (posix_spawn)")};
}

/** @brief Destroys an imported pool, unless the runtime is already unloading. */
struct imported_pool_destroyer {
  void operator()(cudaMemPool_t pool) const noexcept
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) { return; }
    pool_destroyer{}(pool);  // in relaxed capture mode
  }
};

/** @brief `export_pool` for a pool of `device` (`no_device`: the current device, for messages
 * only). */
inline shareable_pool_handle export_pool(cudaMemPool_t pool,
                                         allocation_handle_type type,
                                         int device)
{
  if (pool == nullptr) { throw_error<logic_error>("export_pool", "the pool is null"); }
  if (type != allocation_handle_type::posix_file_descriptor &&
      type != allocation_handle_type::fabric) {
    throw_error<logic_error>("export_pool",
                             "handle type " + handle_type_label(type) +
                               " is not one export_pool makes; use posix_file_descriptor or "
                               "fabric");
  }
  refuse_where_cuda_is_gone("export_pool");
  if (!is_device_id(device)) { device = current_device_or_none(); }
  relaxed_capture_mode const relaxed;
  if (type == allocation_handle_type::posix_file_descriptor) {
    int fd = -1;
    cudaError_t const s =
      cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0);
    if (s != cudaSuccess) { throw_export_failure(s, type, device); }
    shareable_pool_handle handle{fd};
    watch_runtime_teardown();
    return handle;
  }
  cudaMemFabricHandle_t fabric{};
  cudaError_t const s =
    cudaMemPoolExportToShareableHandle(&fabric, pool, cudaMemHandleTypeFabric, 0);
  if (s != cudaSuccess) { throw_export_failure(s, type, device); }
  watch_runtime_teardown();
  return shareable_pool_handle{fabric};
}

}  // namespace detail

/**
 * @brief Exports `pool` as a handle another process can import (`import_pool`).
 *
 * Export a pool once; share its allocations one by one with `export_pointer`.
 * @param pool a pool created with `pool_options::export_handle_type` equal to `type` (or a mask
 * containing it).
 * @param type `posix_file_descriptor` (processes of one node; send the descriptor with
 * `send_pool_handle`) or `fabric` (also across nodes joined by multi-node NVLink).
 * @throws logic_error if the pool is null, `type` is another type, or the pool was not created
 * for `type`; the message names the handle type.
 * @throws not_supported for `fabric` where the device, driver or system has no fabric handles.
 * @throws cuda_error in a child forked after its parent used CUDA (`cudaErrorInitializationError`,
 * saying so), and for any other failure.
 */
[[nodiscard]] inline shareable_pool_handle export_pool(cudaMemPool_t pool,
                                                       allocation_handle_type type)
{
  return detail::export_pool(pool, type, detail::no_device);
}

/**
 * @brief Exports the pool of `resource` (an `async_device_resource` with an owned pool created
 * with `pool_options::export_handle_type`); as `export_pool(cudaMemPool_t, type)`.
 */
template <class Resource>
  requires requires(Resource const& r) {
    { r.pool_handle() } -> std::same_as<cudaMemPool_t>;
    { r.device() } -> std::same_as<int>;
  }
[[nodiscard]] shareable_pool_handle export_pool(Resource const& resource,
                                                allocation_handle_type type)
{
  return detail::export_pool(resource.pool_handle(), type, resource.device());
}

class imported_pool;

/**
 * @brief Imports a pool another process exported (`export_pool`) and grants `device` read-write
 * access to its memory.
 *
 * `handle` may be destroyed (its descriptor closed) once this returns.
 * @param handle received from the exporter, e.g. with `receive_pool_handle`.
 * @param device the device whose kernels will use the memory; the current device if none.
 * @throws logic_error if `handle` is empty.
 * @throws not_supported for a fabric handle this process may not import (no shared IMEX channel).
 * @throws cuda_error when no usable driver or device exists, in a child forked after its parent
 * used CUDA (`cudaErrorInitializationError`, saying so), or when the import fails.
 * @throws std::out_of_range if `device` is not a visible device.
 */
[[nodiscard]] inline imported_pool import_pool(shareable_pool_handle const& handle,
                                               std::optional<int> device = std::nullopt);

/**
 * @brief A pool imported from another process: it cannot allocate, only import the exporter's
 * allocations (`import_pointer`).
 *
 * A cheap copyable handle, like the resources: copies share the imported pool, which is destroyed
 * (`cudaMemPoolDestroy`, in this process only) with the last copy and the last `imported_pointer`
 * from it. Empty when default-constructed.
 */
class imported_pool {
 public:
  /** @brief An empty handle. */
  imported_pool() noexcept = default;

  /** @brief The imported `cudaMemPool_t` (null when empty). */
  [[nodiscard]] cudaMemPool_t pool_handle() const noexcept { return pool_.get(); }

  /** @brief The device whose kernels use the memory; it was current during the import. */
  [[nodiscard]] int device() const noexcept { return device_; }

  /** @brief True unless empty. */
  explicit operator bool() const noexcept { return pool_ != nullptr; }

  /** @brief True when both name the same imported pool. */
  friend bool operator==(imported_pool const& lhs, imported_pool const& rhs) noexcept
  {
    return lhs.pool_ == rhs.pool_;
  }

 private:
  friend imported_pool import_pool(shareable_pool_handle const& handle, std::optional<int> device);

  /** @brief Owns `pool` from here on; destroys it if this throws. */
  imported_pool(cudaMemPool_t pool, int device)
    : pool_{pool, detail::imported_pool_destroyer{}}, device_{device}
  {
  }

  std::shared_ptr<std::remove_pointer_t<cudaMemPool_t>> pool_;
  int device_{detail::no_device};
};

inline imported_pool import_pool(shareable_pool_handle const& handle, std::optional<int> device)
{
  char const* const who = "import_pool";
  if (!handle) { detail::throw_error<logic_error>(who, "the shareable_pool_handle is empty"); }
  detail::refuse_where_cuda_is_gone(who);
  int const id = detail::device_or_current(device, who);
  detail::relaxed_capture_mode const relaxed;
  detail::device_guard const on_device{id};

  bool const fabric                   = handle.type() == allocation_handle_type::fabric;
  cudaMemFabricHandle_t fabric_handle = handle.fabric_handle();
  void* const os_handle               = fabric
                                          ? static_cast<void*>(&fabric_handle)
                                          : reinterpret_cast<void*>(static_cast<std::uintptr_t>(handle.fd()));
  cudaMemPool_t pool{};
  cudaError_t const s = cudaMemPoolImportFromShareableHandle(
    &pool, os_handle, static_cast<cudaMemAllocationHandleType>(handle.type()), 0);
  if (s != cudaSuccess) {
    if (fabric && (s == cudaErrorNotPermitted || s == cudaErrorNotSupported)) {
      detail::throw_fabric_not_supported(
        "import_pool", id, "cudaMemPoolImportFromShareableHandle", s);
    }
    detail::throw_cuda_error(s, "cudaMemPoolImportFromShareableHandle", who);
  }
  imported_pool imported{pool, id};
  if (!detail::has_read_write_access(pool, id)) {
    detail::grant_device_access(pool, std::span<int const>{&id, 1}, who);
  }
  detail::watch_runtime_teardown();
  return imported;
}

/**
 * @brief Describes the allocation at `ptr` for another process that imported its pool.
 *
 * `ptr` is an allocation (its start) of a pool created with an export handle type. Before the
 * importer uses the memory, the allocation must have completed in this process (synchronize the
 * stream it was allocated on, or make the importer wait for it); this process must not free it
 * before every importer has freed its imported pointer.
 * @throws logic_error if `ptr` is null or not an allocation of an exportable pool.
 * @throws cuda_error in a child forked after its parent used CUDA (`cudaErrorInitializationError`,
 * saying so), and for any other failure.
 */
[[nodiscard]] inline pool_pointer_export export_pointer(void* ptr)
{
  if (ptr == nullptr) { detail::throw_error<logic_error>("export_pointer", "the pointer is null"); }
  detail::refuse_where_cuda_is_gone("export_pointer");
  pool_pointer_export exported{};
  detail::relaxed_capture_mode const relaxed;
  cudaError_t const s = cudaMemPoolExportPointer(&exported.data, ptr);
  if (s == cudaErrorInvalidValue || s == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    detail::throw_error<logic_error>("export_pointer",
                                     std::string{"the pointer is not an allocation of a pool "
                                                 "created with an export handle type "
                                                 "(cudaMemPoolExportPointer returned "} +
                                       cudaGetErrorName(s) +
                                       "); allocate it from a resource built with "
                                       "pool_options::export_handle_type");
  }
  if (s != cudaSuccess) {
    detail::throw_cuda_error(s, "cudaMemPoolExportPointer", "export_pointer");
  }
  detail::watch_runtime_teardown();
  return exported;
}

namespace detail {

/** @brief Frees an imported address (`cudaFree`, in relaxed capture mode, on `device`); failures
 * are reported, not thrown. */
inline void free_imported_address(void* address, int device) noexcept
{
  relaxed_capture_mode const relaxed;
  device_guard const on_device{device, std::nothrow};
  if (cudaError_t const s = cudaFree(address); s != cudaSuccess) {
    report_release_failure(s, "cudaFree of an imported pointer");
  }
}

}  // namespace detail

/**
 * @brief An allocation of another process, imported into this one (`import_pointer`).
 *
 * Move-only. The driver maps an allocation once per process: importing it again while it is
 * mapped returns the same address, and the `imported_pointer`s of that address share the one
 * mapping (they are counted per address, process-wide, thread-safely). Destroying or `reset()`ting
 * the last of them frees the imported memory with `cudaFree`, which has completed when it returns:
 * then, and only then, the exporter may free the allocation. Destroying any other leaves the
 * memory mapped for the rest. Keeps its imported pool alive.
 *
 * In a child forked after its parent used CUDA, and once the process is exiting, destroying it
 * makes no CUDA call: the memory is the parent's, or goes with the process.
 */
class imported_pointer {
 public:
  /** @brief An empty object. */
  imported_pointer() noexcept = default;

  imported_pointer(imported_pointer const&)            = delete;
  imported_pointer& operator=(imported_pointer const&) = delete;

  /** @brief Takes over `other`'s share of the mapping; `other` is left empty. */
  imported_pointer(imported_pointer&& other) noexcept
    : pool_{std::move(other.pool_)}, ptr_{std::exchange(other.ptr_, nullptr)}
  {
  }

  /** @brief Gives up this object's share (see `reset()`), then takes over `other`'s. */
  imported_pointer& operator=(imported_pointer&& other) noexcept
  {
    if (this != &other) {
      reset();
      pool_ = std::move(other.pool_);
      ptr_  = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }

  /** @brief Gives up this object's share of the mapping (see `reset()`). */
  ~imported_pointer() { reset(); }

  /** @brief The memory, usable by kernels on the pool's device (null when empty). */
  [[nodiscard]] void* get() const noexcept { return ptr_; }

  /** @brief The pool the memory was imported from. */
  [[nodiscard]] imported_pool const& pool() const noexcept { return pool_; }

  /**
   * @brief Gives up the memory: the caller frees it with `cudaFree`, or with `cudaFreeAsync`
   * whose completion it awaits before the exporter frees. The caller also keeps `pool()` alive
   * until then, and imports the allocation again only after that free (a new import would map the
   * same address without knowing that the caller frees it).
   *
   * Only the sole import of an address can be released.
   * @throws logic_error if other `imported_pointer`s of this process share the mapping (the free
   * is theirs too); nothing changes then: `reset()` or destroy this one instead.
   */
  [[nodiscard]] void* release()
  {
    if (ptr_ != nullptr && !detail::runtime_unloading().load(std::memory_order_relaxed)) {
      if (std::size_t const shares = detail::imported_pointers().take_sole_share(ptr_);
          shares > 1) {
        detail::throw_error<logic_error>(
          "imported_pointer::release",
          "the mapping is shared with " + std::to_string(shares - 1) +
            " other imported_pointer of this process, whose free it is too; reset() or destroy "
            "this one instead (the last of them frees the memory)");
      }
    }
    return std::exchange(ptr_, nullptr);
  }

  /**
   * @brief Gives up this object's share of the mapping and leaves the object empty. The last
   * share frees the imported memory now (`cudaFree`, which waits for the device's pending work).
   * Failures are reported, not thrown.
   */
  void reset() noexcept
  {
    void* const ptr = std::exchange(ptr_, nullptr);
    if (ptr != nullptr && !detail::runtime_unloading().load(std::memory_order_relaxed)) {
      detail::imported_pointers().drop_share(ptr, [device = pool_.device()](void* p) noexcept {
        detail::free_imported_address(p, device);
      });
    }
    pool_ = imported_pool{};
  }

 private:
  friend imported_pointer import_pointer(imported_pool const& pool,
                                         pool_pointer_export const& exported);

  /** @brief Holds one share of `ptr`, counted already. */
  imported_pointer(imported_pool pool, void* ptr) noexcept : pool_{std::move(pool)}, ptr_{ptr} {}

  imported_pool pool_;
  void* ptr_{};
};

/**
 * @brief Imports the allocation `exported` describes from `pool`, the import of the pool it was
 * allocated from.
 *
 * Use it only once the allocation has completed in the exporting process; free it (destroy the
 * result, and every other import of it) before the exporter frees the allocation. Importing an
 * allocation that this process holds already returns another `imported_pointer` of the same
 * address, sharing its mapping.
 * @throws logic_error if `pool` is empty.
 * @throws cuda_error in a child forked after its parent used CUDA (`cudaErrorInitializationError`,
 * saying so), or if the import fails (e.g. `exported` comes from another pool, or the exporter
 * has freed the allocation).
 */
[[nodiscard]] inline imported_pointer import_pointer(imported_pool const& pool,
                                                     pool_pointer_export const& exported)
{
  char const* const who = "import_pointer";
  if (!pool) { detail::throw_error<logic_error>(who, "the imported_pool is empty"); }
  detail::refuse_where_cuda_is_gone(who);
  detail::relaxed_capture_mode const relaxed;
  detail::device_guard const on_device{pool.device()};
  cudaMemPoolPtrExportData data = exported.data;  // the driver takes a non-const pointer
  void* const ptr               = detail::imported_pointers().add_share(
    [&] {
      void* mapped{};
      if (cudaError_t const s = cudaMemPoolImportPointer(&mapped, pool.pool_handle(), &data);
          s != cudaSuccess) {
        detail::throw_cuda_error(s, "cudaMemPoolImportPointer", who);
      }
      return mapped;
    },
    [&](void* mapped) noexcept { detail::free_imported_address(mapped, pool.device()); });
  return imported_pointer{pool, ptr};
}

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
