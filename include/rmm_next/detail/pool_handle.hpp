/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cuda_check.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

/** @brief What a pool hands out: the one thing that sets the three async resources apart. */
enum class memory_kind { device, managed, pinned };

/** @brief The public class name of the resource of `kind`, for messages. */
constexpr char const* resource_name(memory_kind kind) noexcept
{
  switch (kind) {
    case memory_kind::device: return "async_device_resource";
    case memory_kind::managed: return "async_managed_resource";
    default: return "async_pinned_resource";
  }
}

inline constexpr std::uint64_t keep_all_threshold = UINT64_MAX;

/**
 * @brief What tools call the allocations of a resource (see `nvtx_name_region`): its class, device
 * and pool, "async_device_resource dev 0 pool 0x7f3a2c000b40", or without the pool where that
 * would exceed the 49 printable ASCII characters compute-sanitizer accepts.
 */
inline std::array<char, 50> allocation_name(memory_kind kind, int device, cudaMemPool_t pool)
{
  std::array<char, 50> name{};
  int const n = std::snprintf(name.data(), name.size(), "%s dev %d pool %p", resource_name(kind),
                              device, static_cast<void*>(pool));
  if (n < 0 || static_cast<std::size_t>(n) >= name.size()) {
    std::snprintf(name.data(), name.size(), "%s dev %d", resource_name(kind), device);
  }
  return name;
}

inline std::uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr)
{
  std::uint64_t value{};
  RMM_NEXT_CUDA_TRY(cudaMemPoolGetAttribute(pool, attr, &value));
  return value;
}

inline void set_pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr, std::uint64_t value)
{
  RMM_NEXT_CUDA_TRY(cudaMemPoolSetAttribute(pool, attr, &value));
}

/** @brief True when kernels on `device` may read and write `pool`'s memory (`cudaMemPoolGetAccess`;
 * a failed query, cleared, says no). */
inline bool has_read_write_access(cudaMemPool_t pool, int device) noexcept
{
  cudaMemLocation location{};
  location.type = cudaMemLocationTypeDevice;
  location.id   = device;
  cudaMemAccessFlags flags{};
  if (cudaMemPoolGetAccess(&flags, pool, &location) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return flags == cudaMemAccessFlagsProtReadWrite;
}

/**
 * @brief Destroys a pool the resource created. Memory still allocated from it, or frees not yet
 * executed, make the driver release the pool's memory once they are gone (`cudaMemPoolDestroy`
 * returns at once).
 */
struct pool_destroyer {
  void operator()(cudaMemPool_t pool) const noexcept
  {
    if (cudaError_t const s = cudaMemPoolDestroy(pool); s != cudaSuccess) {
      report_release_failure(s, "cudaMemPoolDestroy");
    }
  }
};

/** @brief Ownership of a pool the resource created, from `cudaMemPoolCreate` on. */
using owned_pool = std::unique_ptr<std::remove_pointer_t<cudaMemPool_t>, pool_destroyer>;

/**
 * @brief What the copies of one resource share: the pool (destroyed with the last copy when the
 * resource created it) and the stream on which `allocate_sync` works.
 */
class pool_state {
 public:
  /** @brief `owner` owns `pool` when the resource created it, else is empty. */
  pool_state(memory_kind kind, cudaMemPool_t pool, int device, owned_pool owner)
    : pool_{pool},
      owner_{std::move(owner)},
      allocation_name_{detail::allocation_name(kind, device, pool)}
  {
    // A stream of the resource's own, non-blocking, so that synchronous allocations wait neither
    // for the legacy default stream nor for any other stream's work. If this throws, `owner_`
    // destroys the pool.
    device_guard guard{device};
    RMM_NEXT_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    watch_runtime_teardown();
  }

  pool_state(pool_state const&)            = delete;
  pool_state& operator=(pool_state const&) = delete;

  ~pool_state()
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) {
      (void)owner_.release();  // the runtime is going: no CUDA call any more
      return;
    }
    if (cudaError_t const s = cudaStreamDestroy(stream_); s != cudaSuccess) {
      report_release_failure(s, "cudaStreamDestroy");
    }
    // owner_ destroys an owned pool after this.
  }

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

  /** @brief What tools call the pool's allocations (`allocation_name`). */
  [[nodiscard]] char const* allocation_name() const noexcept { return allocation_name_.data(); }

  /**
   * @brief True when kernels on `device` may read and write the pool's memory
   * (`cudaMemPoolGetAccess`). A positive answer is kept for devices below 64; access is taken
   * back only by the pool's owner, never while the resource hands out its memory.
   */
  [[nodiscard]] bool accessible_from(int device) noexcept
  {
    std::uint64_t const bit = device < 64 ? std::uint64_t{1} << device : 0;
    if ((accessible_.load(std::memory_order_relaxed) & bit) != 0) { return true; }
    if (!has_read_write_access(pool_, device)) { return false; }
    accessible_.fetch_or(bit, std::memory_order_relaxed);
    return true;
  }

 private:
  cudaMemPool_t pool_;
  owned_pool owner_;
  cudaStream_t stream_{};
  std::atomic<std::uint64_t> accessible_{0};  ///< devices known to have read-write access
  std::array<char, 50> allocation_name_;
};

/** @brief A pool chosen for a resource: the handle and its shared state. */
struct pool_binding {
  cudaMemPool_t pool{};
  int device{};
  std::shared_ptr<pool_state> state;
  bool check_streams{false};  ///< whether `allocate` checks the stream's device
  /// The driver's current or default pool, shared with others: the release-threshold rule
  /// (`adopt_release_threshold`) applies, once nothing can fail any more.
  bool adopted{false};
  std::optional<std::size_t> release_threshold{};  ///< the caller's threshold for `adopted`
};

/** @brief The name of `type` as `allocation_handle_type` spells it, "unknown" for a mask. */
constexpr char const* handle_type_name(allocation_handle_type type) noexcept
{
  switch (type) {
    case allocation_handle_type::none: return "none";
    case allocation_handle_type::posix_file_descriptor: return "posix_file_descriptor";
    case allocation_handle_type::win32: return "win32";
    case allocation_handle_type::win32_kmt: return "win32_kmt";
    case allocation_handle_type::fabric: return "fabric";
  }
  return "unknown";
}

/** @brief `type` for messages: "fabric (8)", or "mask 9" for a combination of types. */
inline std::string handle_type_label(allocation_handle_type type)
{
  auto const value = std::to_string(static_cast<int>(type));
  std::string const name{handle_type_name(type)};
  return name == "unknown" ? "mask " + value : name + " (" + value + ")";
}

/** @brief True when `type` includes fabric handles. */
constexpr bool exports_as_fabric(allocation_handle_type type) noexcept
{
  return (static_cast<int>(type) & static_cast<int>(allocation_handle_type::fabric)) != 0;
}

/** @brief What fabric handles need beyond the device attribute, for messages. */
inline constexpr char const* fabric_requirements =
  "a driver and system with fabric support (multi-node NVLink) and an IMEX channel the process "
  "may open (/dev/nvidia-caps-imex-channels)";

/** @brief The statuses with which the driver refuses fabric handles it cannot provide. */
constexpr bool is_fabric_refusal(cudaError_t status) noexcept
{
  return status == cudaErrorNotPermitted || status == cudaErrorNotSupported ||
         status == cudaErrorInvalidValue;
}

[[noreturn]] inline void throw_not_supported(memory_kind kind, std::string const& what)
{
  throw not_supported{std::string{"rmm_next::"} + resource_name(kind) + ": " + what};
}

/**
 * @brief Checks at run time that `device` and the driver support pools of `kind`; throws
 * `not_supported` naming the feature, what it needs and what was found.
 */
inline void check_support(memory_kind kind, int device)
{
  auto const dev = "device " + std::to_string(device);
  if (device_attribute(cudaDevAttrMemoryPoolsSupported, device) == 0) {
    throw_not_supported(kind, "stream-ordered memory pools need a device with "
                              "cudaDevAttrMemoryPoolsSupported; " + dev + " reports 0");
  }
  if (kind == memory_kind::managed) {
#if CUDART_VERSION < 13000
    throw_not_supported(kind, "managed memory pools need CUDA 13.0 or later; this program was "
                              "compiled against CUDA " + version_string(CUDART_VERSION));
#else
    if (device_attribute(cudaDevAttrConcurrentManagedAccess, device) == 0) {
      throw_not_supported(kind, "managed memory pools need a device with "
                                "cudaDevAttrConcurrentManagedAccess; " + dev + " reports 0");
    }
#endif
  }
  if (kind == memory_kind::pinned) {
#if CUDART_VERSION < 12060
    throw_not_supported(kind, "pinned memory pools need CUDA 12.6 or later; this program was "
                              "compiled against CUDA " + version_string(CUDART_VERSION));
#else
    if (int const v = driver_version(); v < 12060) {
      throw_not_supported(kind, "pinned memory pools need a CUDA driver of version 12.6 or "
                                "later; the installed driver is " + version_string(v));
    }
#if CUDART_VERSION >= 13000
    if (device_attribute(cudaDevAttrHostMemoryPoolsSupported, device) == 0) {
      throw_not_supported(kind, "pinned memory pools need a device with "
                                "cudaDevAttrHostMemoryPoolsSupported; " + dev + " reports 0");
    }
#endif
#endif
  }
}

/** @brief The device the resource works for: `device`, or the current one; validated. */
inline int resolve_device(memory_kind kind, std::optional<int> device)
{
  int count{};
  if (cudaError_t const s = cudaGetDeviceCount(&count); s != cudaSuccess) {
    throw_cuda_error(s, "cudaGetDeviceCount", resource_name(kind));
  }
  int const id = device ? checked_device(*device, count) : current_device();
  check_support(kind, id);
  return id;
}

/**
 * @brief The device a resource viewing the caller's `pool` works for. A device pool belongs to
 * the device whose kernels use it without a grant: it is found among the devices with read-write
 * access (`cudaMemPoolGetAccess`), not taken from whichever device is current. A device the
 * caller names must have that access; when several devices have it (peer access granted), the
 * caller must name one. Other kinds of pool: as `resolve_device`.
 */
inline int resolve_view_device(memory_kind kind, cudaMemPool_t pool, std::optional<int> device)
{
  if (kind != memory_kind::device || pool == nullptr) { return resolve_device(kind, device); }
  int count{};
  if (cudaError_t const s = cudaGetDeviceCount(&count); s != cudaSuccess) {
    throw_cuda_error(s, "cudaGetDeviceCount", resource_name(kind));
  }
  if (device) { checked_device(*device, count); }
  std::vector<int> users;
  std::string listed;
  for (int d = 0; d < count; ++d) {
    if (has_read_write_access(pool, d)) {
      listed += (users.empty() ? "" : ", ") + std::to_string(d);
      users.push_back(d);
    }
  }
  std::string const who = std::string{"rmm_next::"} + resource_name(kind) + ": ";
  if (device && std::find(users.begin(), users.end(), *device) == users.end()) {
    throw logic_error{who + "the viewed pool is not accessible from device " +
                      std::to_string(*device) + "; name the device the pool belongs to"};
  }
  if (!device && users.size() > 1) {
    throw logic_error{who + "the viewed pool is accessible from devices " + listed +
                      ", so its own device cannot be told; name it: " + resource_name(kind) +
                      "{pool, device}"};
  }
  int const id = device ? *device : users.empty() ? current_device() : users.front();
  check_support(kind, id);
  return id;
}

/** @brief The location a pool of `kind` for `device` lives at, unless told otherwise. */
inline cudaMemLocation default_location(memory_kind kind, int device)
{
  cudaMemLocation loc{};
  if (kind != memory_kind::pinned) {
    loc.type = cudaMemLocationTypeDevice;
    loc.id   = device;
    return loc;
  }
#if CUDART_VERSION >= 13000
  loc.type = cudaMemLocationTypeHost;
  loc.id   = 0;
#else
  // Before CUDA 13.0 host pools are made per NUMA node: the node closest to the device.
  int numa = -1;
  if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, device) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  loc.type = cudaMemLocationTypeHostNuma;
  loc.id   = numa < 0 ? 0 : numa;
#endif
  return loc;
}

#if CUDART_VERSION >= 13000
inline cudaMemAllocationType allocation_type(memory_kind kind) noexcept
{
  return kind == memory_kind::managed ? cudaMemAllocationTypeManaged : cudaMemAllocationTypePinned;
}
#else
inline cudaMemAllocationType allocation_type(memory_kind) noexcept
{
  return cudaMemAllocationTypePinned;
}
#endif

/**
 * @brief Grants kernels on `devices` (null: every visible device) read-write access to a
 * host-located pool, which starts host-only.
 */
inline void grant_device_access(cudaMemPool_t pool, std::vector<int> const* devices)
{
  std::vector<int> ids;
  if (devices != nullptr) {
    for (int const d : *devices) { ids.push_back(checked_device(d)); }
  } else {
    int const count = device_count();
    for (int d = 0; d < count; ++d) {
      if (device_attribute(cudaDevAttrMemoryPoolsSupported, d) != 0) { ids.push_back(d); }
    }
  }
  std::vector<cudaMemAccessDesc> descs;
  for (int const d : ids) {
    cudaMemAccessDesc desc{};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id   = d;
    desc.flags         = cudaMemAccessFlagsProtReadWrite;
    descs.push_back(desc);
  }
  if (!descs.empty()) { RMM_NEXT_CUDA_TRY(cudaMemPoolSetAccess(pool, descs.data(), descs.size())); }
}

/** @brief Applies the release-threshold rule for pools the resource adopts but does not own. */
inline void adopt_release_threshold(cudaMemPool_t pool, std::optional<std::size_t> threshold)
{
  if (threshold) {
    set_pool_attribute(pool, cudaMemPoolAttrReleaseThreshold, *threshold);
  } else if (pool_attribute(pool, cudaMemPoolAttrReleaseThreshold) == 0) {
    // With 0 every synchronization hands memory back and the next allocation maps it again.
    set_pool_attribute(pool, cudaMemPoolAttrReleaseThreshold, keep_all_threshold);
  }
}

/** @brief Binds `pool`; `owner` owns it when the resource created it (and destroys it if this
 * throws). */
inline pool_binding bind(memory_kind kind, cudaMemPool_t pool, int device, owned_pool owner = {})
{
  return pool_binding{
    pool, device, std::make_shared<pool_state>(kind, pool, device, std::move(owner))};
}

inline pool_binding create_pool(memory_kind kind, int device, pool_options const& opts);

/** @brief The driver's current pool of `kind` for `device` (`cudaMemGetMemPool`). */
inline cudaMemPool_t driver_pool(memory_kind kind, int device, current_pool const&)
{
  cudaMemPool_t pool{};
#if CUDART_VERSION >= 13000
  cudaMemLocation loc = default_location(kind, device);
  RMM_NEXT_CUDA_TRY(cudaMemGetMemPool(&pool, &loc, allocation_type(kind)));
#else
  (void)kind;
  RMM_NEXT_CUDA_TRY(cudaDeviceGetMemPool(&pool, device));
#endif
  return pool;
}

/** @brief The driver's default pool of `kind` for `device` (`cudaMemGetDefaultMemPool`). */
inline cudaMemPool_t driver_pool(memory_kind kind, int device, default_pool const&)
{
  cudaMemPool_t pool{};
#if CUDART_VERSION >= 13000
  cudaMemLocation loc = default_location(kind, device);
  RMM_NEXT_CUDA_TRY(cudaMemGetDefaultMemPool(&pool, &loc, allocation_type(kind)));
#else
  (void)kind;
  RMM_NEXT_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, device));
#endif
  return pool;
}

/** @brief Binds the driver's current or default pool of `kind` for `device`. */
template <class Source>
  requires std::is_same_v<Source, current_pool> || std::is_same_v<Source, default_pool>
pool_binding acquire_pool(memory_kind kind, int device, Source const& src)
{
#if CUDART_VERSION < 13000
  if (kind == memory_kind::pinned) {
    // No host pool is current or default before CUDA 13.0: the resource creates its own.
    return create_pool(kind, device, pool_options{.release_threshold = src.release_threshold});
  }
#endif
  pool_binding binding      = bind(kind, driver_pool(kind, device, src), device);
  binding.adopted           = true;
  binding.release_threshold = src.release_threshold;
  return binding;
}

/** @brief Binds a pool the caller owns; it is never modified beyond access grants nor destroyed. */
inline pool_binding acquire_pool(memory_kind kind, int device, cudaMemPool_t pool)
{
  if (pool == nullptr) {
    throw logic_error{std::string{"rmm_next::"} + resource_name(kind) +
                      ": the cudaMemPool_t to view is null"};
  }
  return bind(kind, pool, device);
}

/** @brief Creates a pool from `opts` that the resource owns. */
inline pool_binding acquire_pool(memory_kind kind, int device, pool_options const& opts)
{
  return create_pool(kind, device, opts);
}

inline pool_binding create_pool(memory_kind kind, int device, pool_options const& opts)
{
  if (opts.maximum_pool_size && opts.initial_pool_size &&
      *opts.initial_pool_size > *opts.maximum_pool_size) {
    throw logic_error{std::string{"rmm_next::"} + resource_name(kind) + ": initial_pool_size (" +
                      std::to_string(*opts.initial_pool_size) + " bytes) exceeds " +
                      "maximum_pool_size (" + std::to_string(*opts.maximum_pool_size) + " bytes)"};
  }
  if (opts.export_handle_type != allocation_handle_type::none) {
    int const supported = device_attribute(cudaDevAttrMemoryPoolSupportedHandleTypes, device);
    int const wanted    = static_cast<int>(opts.export_handle_type);
    if ((supported & wanted) != wanted) {
      throw_not_supported(kind, "export handle type " + handle_type_label(opts.export_handle_type) +
                                  " needs device support (cudaDevAttrMemoryPoolSupportedHandleTypes);"
                                  " device " + std::to_string(device) + " supports the mask " +
                                  std::to_string(supported));
    }
  }

  cudaMemPoolProps props{};
  props.allocType   = allocation_type(kind);
  props.handleTypes = static_cast<cudaMemAllocationHandleType>(opts.export_handle_type);
  props.location    = opts.location.value_or(default_location(kind, device));
  props.maxSize     = opts.maximum_pool_size.value_or(0);
  if (opts.hardware_decompress) {
#ifdef cudaMemPoolCreateUsageHwDecompress
    props.usage = cudaMemPoolCreateUsageHwDecompress;
#else
    throw_not_supported(kind, "hardware-decompress pools need CUDA 12.8 or later; this program "
                              "was compiled against CUDA " + version_string(CUDART_VERSION));
#endif
  }

  cudaMemPool_t pool{};
  if (cudaError_t const s = cudaMemPoolCreate(&pool, &props); s != cudaSuccess) {
    if (kind == memory_kind::managed && opts.maximum_pool_size && s == cudaErrorInvalidValue) {
      (void)cudaGetLastError();
      throw not_supported{std::string{"rmm_next::"} + resource_name(kind) +
                            ": maximum_pool_size needs a driver that bounds managed pools; "
                            "cudaMemPoolCreate with maxSize " +
                            std::to_string(*opts.maximum_pool_size) + " on device " +
                            std::to_string(device) + " returned " + cudaGetErrorName(s),
                          s};
    }
    if (opts.hardware_decompress && (s == cudaErrorNotSupported || s == cudaErrorInvalidValue)) {
      (void)cudaGetLastError();
      throw not_supported{std::string{"rmm_next::"} + resource_name(kind) +
                            ": hardware-decompress pools need a device with a decompression "
                            "engine; cudaMemPoolCreate on device " + std::to_string(device) +
                            " returned " + cudaGetErrorName(s),
                          s};
    }
    if (exports_as_fabric(opts.export_handle_type) && is_fabric_refusal(s)) {
      (void)cudaGetLastError();
      throw not_supported{std::string{"rmm_next::"} + resource_name(kind) + ": export handle type " +
                            handle_type_label(opts.export_handle_type) + " needs " +
                            fabric_requirements + "; cudaMemPoolCreate on device " +
                            std::to_string(device) + " returned " + cudaGetErrorName(s),
                          s};
    }
    throw_cuda_error(s, "cudaMemPoolCreate", resource_name(kind));
  }
  // From here the pool is owned, and destroyed if anything below throws.
  pool_binding binding = bind(kind, pool, device, owned_pool{pool});
  set_pool_attribute(pool, cudaMemPoolAttrReleaseThreshold,
                     opts.release_threshold.value_or(keep_all_threshold));
  if (opts.initial_pool_size && *opts.initial_pool_size > 0) {
    void* ptr{};
    cudaStream_t const stream = binding.state->stream();
    if (cudaError_t const s = cudaMallocFromPoolAsync(&ptr, *opts.initial_pool_size, pool, stream);
        s != cudaSuccess) {
      (void)cudaGetLastError();
      throw out_of_memory{std::string{"rmm_next::out_of_memory: "} + resource_name(kind) +
                          " could not reserve initial_pool_size of " +
                          std::to_string(*opts.initial_pool_size) + " bytes on device " +
                          std::to_string(device) + " (" + cudaGetErrorName(s) + ")"};
    }
    RMM_NEXT_CUDA_TRY(cudaFreeAsync(ptr, stream));
    RMM_NEXT_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  return binding;
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail
