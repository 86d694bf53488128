/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

/**
 * @file
 * @brief The segments of vmm_resource: what the device supports (probed once), and one segment's
 * life through the driver's virtual memory calls (create, reserve, map, grant access; and back).
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

inline constexpr char const* vmm_name = "vmm_resource";

/** @brief What every segment of one resource is made with, fixed at construction. */
struct vmm_config {
  int device{};
  unsigned handle_types{};  ///< CUmemAllocationHandleType bits; FABRIC may be dropped later
  bool gpu_direct_rdma{};
  std::size_t granularity{};
  std::size_t segment_size{};
  std::vector<int> access_devices;  ///< the device first
};

/** @brief One segment: a physical allocation mapped at `base`. */
struct vmm_segment_handle {
  CUdeviceptr base{};
  std::size_t bytes{};
  CUmemGenericAllocationHandle handle{};
};

inline bool vmm_driver_available() noexcept
{
  driver_api const& a = driver();
  return a.device_get_attribute != nullptr && a.mem_create != nullptr && a.mem_release != nullptr &&
         a.mem_address_reserve != nullptr && a.mem_address_free != nullptr &&
         a.mem_map != nullptr && a.mem_unmap != nullptr && a.mem_set_access != nullptr &&
         a.mem_get_allocation_granularity != nullptr;
}

inline int vmm_device_attribute(CUdevice_attribute attr, int device)
{
  int value{};
  if (CUresult const r = driver().device_get_attribute(&value, attr, device); r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuDeviceGetAttribute", vmm_name);
  }
  return value;
}

/** @brief The allocation properties of a segment of `config`. */
inline CUmemAllocationProp segment_properties(vmm_config const& config) noexcept
{
  CUmemAllocationProp prop{};
  prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id          = config.device;
  prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(config.handle_types);
  prop.allocFlags.gpuDirectRDMACapable = config.gpu_direct_rdma ? 1 : 0;
  return prop;
}

/**
 * @brief Resolves `options` for `device` (the current device if none): checks support, probes the
 * handle types and the RDMA flag, reads the granularity, lists the devices granted access.
 * @throws not_supported, std::out_of_range, bad_alloc (segment size 0 is fine: one granule).
 */
inline vmm_config resolve_vmm_config(vmm_options const& options, std::optional<int> device)
{
  int const count = device_count(vmm_name);
  int const id    = device ? checked_device(*device, count, vmm_name) : current_device(vmm_name);
  if (!vmm_driver_available()) {
    throw_error<not_supported>(vmm_name,
                               "the CUDA driver lacks the virtual memory management entry points "
                               "(cuMemCreate, cuMemMap, ...); it needs a driver for CUDA 10.2 or "
                               "newer");
  }
  std::string const on = " (device " + std::to_string(id) + ")";
  if (vmm_device_attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, id) == 0) {
    throw_error<not_supported>(vmm_name,
                               "the device does not support virtual memory management" + on +
                                 "; CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0");
  }
  vmm_config config;
  config.device         = id;
  unsigned requested    = static_cast<unsigned>(options.handle_types);
  unsigned const posix  = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  unsigned const fabric = CU_MEM_HANDLE_TYPE_FABRIC;
  if ((requested & ~(posix | fabric)) != 0) {
    throw_error<logic_error>(vmm_name,
                             "handle_types holds a type other than posix_fd and fabric (" +
                               std::to_string(requested) + ")");
  }
  if ((requested & posix) != 0 &&
      vmm_device_attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, id) ==
        0) {
    throw_error<not_supported>(vmm_name,
                               "POSIX file descriptor handles are not supported" + on +
                                 "; ask for vmm_handle_types::none to make segments that cannot "
                                 "be exported");
  }
  if ((requested & fabric) != 0 &&
      vmm_device_attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, id) == 0) {
    if (requested == fabric) {
      throw_error<not_supported>(
        vmm_name, "fabric handles are not supported" + on + "; ask for vmm_handle_types::posix_fd");
    }
    requested &= ~fabric;  // as ncclMemAlloc: FABRIC only where the device has it
  }
  config.handle_types = requested;
  config.gpu_direct_rdma =
    options.gpu_direct_rdma &&
    vmm_device_attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, id) != 0;

  config.access_devices.push_back(id);
  if (options.access == vmm_access::all_peers && driver().device_can_access_peer != nullptr) {
    for (int peer = 0; peer < count; ++peer) {
      int can{};
      if (peer != id && driver().device_can_access_peer(&can, peer, id) == CUDA_SUCCESS &&
          can != 0) {
        config.access_devices.push_back(peer);
      }
    }
  }

  CUmemAllocationProp const prop = segment_properties(config);
  std::size_t granularity{};
  if (options.granularity == vmm_granularity::multicast) {
    if (driver().multicast_get_granularity == nullptr ||
        vmm_device_attribute(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, id) == 0) {
      throw_error<not_supported>(vmm_name,
                                 "multicast granularity needs a device with multicast support" +
                                   on + "; ask for vmm_granularity::recommended");
    }
    CUmulticastObjectProp mc{};
    mc.numDevices  = static_cast<unsigned>(config.access_devices.size());
    mc.size        = options.segment_size == 0 ? 1 : options.segment_size;
    mc.handleTypes = config.handle_types;
    if (CUresult const r = driver().multicast_get_granularity(
          &granularity, &mc, CU_MULTICAST_GRANULARITY_RECOMMENDED);
        r != CUDA_SUCCESS) {
      throw_driver_error(r, "cuMulticastGetGranularity", vmm_name);
    }
  } else {
    auto const flag = options.granularity == vmm_granularity::minimum
                        ? CU_MEM_ALLOC_GRANULARITY_MINIMUM
                        : CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;
    if (CUresult const r = driver().mem_get_allocation_granularity(&granularity, &prop, flag);
        r != CUDA_SUCCESS) {
      throw_driver_error(r, "cuMemGetAllocationGranularity", vmm_name);
    }
  }
  if (granularity == 0) { granularity = std::size_t{2} << 20; }
  config.granularity = granularity;
  if (!round_up_to_multiple(
        options.segment_size == 0 ? 1 : options.segment_size, granularity, config.segment_size)) {
    throw_error<bad_alloc>(vmm_name,
                           "segment_size " + std::to_string(options.segment_size) +
                             " cannot be rounded up to the granularity " +
                             std::to_string(granularity) + "; ask for a smaller segment_size");
  }
  return config;
}

/** @brief Releases what `create_segment` made; failures are reported, never thrown. */
inline void destroy_segment(vmm_segment_handle const& s, bool mapped = true) noexcept
{
  if (runtime_unloading().load(std::memory_order_relaxed)) { return; }
  driver_api const& a = driver();
  if (mapped && a.mem_unmap(s.base, s.bytes) != CUDA_SUCCESS) {
    report_release_failure(cudaErrorUnknown, "cuMemUnmap");
  }
  if (a.mem_address_free(s.base, s.bytes) != CUDA_SUCCESS) {
    report_release_failure(cudaErrorUnknown, "cuMemAddressFree");
  }
  if (a.mem_release(s.handle) != CUDA_SUCCESS) {
    report_release_failure(cudaErrorUnknown, "cuMemRelease");
  }
}

/**
 * @brief A new segment of `bytes` (a multiple of the granularity) mapped and accessible to
 * `config.access_devices`. When `cuMemCreate` refuses FABRIC (CUDA_ERROR_NOT_PERMITTED or
 * CUDA_ERROR_NOT_SUPPORTED: no IMEX channel, no fabric manager) and POSIX_FD was asked for too, it
 * retries without FABRIC and drops it from `config` for the segments after.
 * @throws out_of_memory naming `bytes`, `request` and the device; cuda_error otherwise.
 */
inline vmm_segment_handle create_segment(vmm_config& config, std::size_t bytes, std::size_t request)
{
  driver_api const& a = driver();
  device_guard const on_device{config.device};
  std::string const sizes = "failed to create a segment of " + std::to_string(bytes) +
                            " bytes for a request of " + std::to_string(request) +
                            " bytes on device " + std::to_string(config.device);
  vmm_segment_handle s{};
  s.bytes                  = bytes;
  CUmemAllocationProp prop = segment_properties(config);
  CUresult r               = a.mem_create(&s.handle, bytes, &prop, 0);
  unsigned const fabric    = CU_MEM_HANDLE_TYPE_FABRIC;
  if ((r == CUDA_ERROR_NOT_PERMITTED || r == CUDA_ERROR_NOT_SUPPORTED) &&
      (config.handle_types & fabric) != 0 && config.handle_types != fabric) {
    config.handle_types &= ~fabric;
    prop = segment_properties(config);
    r    = a.mem_create(&s.handle, bytes, &prop, 0);
  }
  if (r != CUDA_SUCCESS) { throw_driver_error(r, "cuMemCreate", vmm_name, sizes); }
  if (r = a.mem_address_reserve(&s.base, bytes, config.granularity, 0, 0); r != CUDA_SUCCESS) {
    (void)a.mem_release(s.handle);
    throw_driver_error(r, "cuMemAddressReserve", vmm_name, sizes);
  }
  if (r = a.mem_map(s.base, bytes, 0, s.handle, 0); r != CUDA_SUCCESS) {
    (void)a.mem_address_free(s.base, bytes);
    (void)a.mem_release(s.handle);
    throw_driver_error(r, "cuMemMap", vmm_name, sizes);
  }
  std::vector<CUmemAccessDesc> access;
  for (int d : config.access_devices) {
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id   = d;
    desc.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(desc);
  }
  if (r = a.mem_set_access(s.base, bytes, access.data(), access.size()); r != CUDA_SUCCESS) {
    destroy_segment(s);
    throw_driver_error(r, "cuMemSetAccess", vmm_name, sizes);
  }
  watch_runtime_teardown();
  return s;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
