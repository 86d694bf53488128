/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

/**
 * @file
 * @brief The plugin's `vmm_resource` of each device (the rmm_next_vmm_* functions): its options
 * from the C structure, made once per device and kept for the life of the process.
 */

namespace rmm_next::plugin {

inline constexpr char const* plugin_name = "allocator_plugin";

/** @brief The C options' defaults: those of `vmm_options`. */
inline rmm_next_vmm_options default_vmm_options() noexcept
{
  vmm_options const d{};
  return rmm_next_vmm_options{d.segment_size,
                              static_cast<std::uint32_t>(d.handle_types),
                              rmm_next_vmm_granularity_recommended,
                              d.access == vmm_access::all_peers ? 1 : 0,
                              d.gpu_direct_rdma ? 1 : 0};
}

/**
 * @brief `o` (NULL: the defaults) with `segment_size` 0 made the default and the flags made 0/1.
 * @throws std::invalid_argument for handle bits other than POSIX_FD and FABRIC, none
 * at all, or a granularity outside the enumeration.
 */
inline rmm_next_vmm_options normalized_vmm_options(rmm_next_vmm_options const* o)
{
  rmm_next_vmm_options n = o == nullptr ? default_vmm_options() : *o;
  if (n.segment_size == 0) { n.segment_size = default_vmm_options().segment_size; }
  std::uint32_t const known = RMM_NEXT_VMM_HANDLE_POSIX_FD | RMM_NEXT_VMM_HANDLE_FABRIC;
  if (n.handle_types == 0 || (n.handle_types & ~known) != 0) {
    detail::throw_error<std::invalid_argument>(
      plugin_name,
      "handle_types " + std::to_string(n.handle_types) +
        " is not a set of RMM_NEXT_VMM_HANDLE_POSIX_FD and RMM_NEXT_VMM_HANDLE_FABRIC; NCCL "
        "registers memory with at least one of them");
  }
  if (n.granularity < rmm_next_vmm_granularity_recommended ||
      n.granularity > rmm_next_vmm_granularity_multicast) {
    detail::throw_error<std::invalid_argument>(
      plugin_name,
      "granularity " + std::to_string(n.granularity) +
        " is not an rmm_next_vmm_granularity (0 recommended, 1 minimum, 2 multicast)");
  }
  n.peer_access     = n.peer_access != 0 ? 1 : 0;
  n.gpu_direct_rdma = n.gpu_direct_rdma != 0 ? 1 : 0;
  return n;
}

/** @brief True when `a` and `b` (normalized) make the same segments. */
inline bool same_vmm_options(rmm_next_vmm_options const& a, rmm_next_vmm_options const& b) noexcept
{
  return a.segment_size == b.segment_size && a.handle_types == b.handle_types &&
         a.granularity == b.granularity && a.peer_access == b.peer_access &&
         a.gpu_direct_rdma == b.gpu_direct_rdma;
}

/** @brief The `vmm_options` of normalized C options. */
inline vmm_options to_vmm_options(rmm_next_vmm_options const& n)
{
  vmm_options v;
  v.segment_size    = n.segment_size;
  v.handle_types    = static_cast<vmm_handle_types>(n.handle_types);
  v.gpu_direct_rdma = n.gpu_direct_rdma != 0;
  v.access          = n.peer_access != 0 ? vmm_access::all_peers : vmm_access::this_device;
  v.granularity     = n.granularity == rmm_next_vmm_granularity_minimum ? vmm_granularity::minimum
                      : n.granularity == rmm_next_vmm_granularity_multicast
                        ? vmm_granularity::multicast
                        : vmm_granularity::recommended;
  return v;
}

/** @brief One device's `vmm_resource`, its options and its counts. */
class vmm_device {
 public:
  /**
   * @brief Makes the resource with `options` (normalized), or keeps the one there when its options
   * are equal or it has made no segment yet (then it is replaced).
   * @throws std::logic_error when a resource with other options has segments.
   */
  void configure(int device, rmm_next_vmm_options const& options)
  {
    std::lock_guard const lock{mutex_};
    if (resource_) {
      if (same_vmm_options(options_, options)) { return; }
      if (!resource_->segments().empty()) {
        detail::throw_error<std::logic_error>(
          plugin_name,
          "the vmm_resource of device " + std::to_string(device) +
            " already made segments with other options (they stay mapped for the process); "
            "choose its options before its first allocation, or pass the same ones");
      }
    }
    resource_.emplace(to_vmm_options(options), device);
    options_ = options;
  }

  /** @brief The resource (made with the defaults when none was configured). */
  vmm_resource resource(int device)
  {
    {
      std::lock_guard const lock{mutex_};
      if (resource_) { return *resource_; }
    }
    configure(device, default_vmm_options());
    std::lock_guard const lock{mutex_};
    return *resource_;
  }

  /** @brief The resource when it exists. */
  std::optional<vmm_resource> existing() const
  {
    std::lock_guard const lock{mutex_};
    return resource_;
  }

  std::atomic<std::uint64_t> allocations{};
  std::atomic<std::uint64_t> deallocations{};
  std::atomic<std::uint64_t> failures{};

 private:
  mutable std::mutex mutex_;
  rmm_next_vmm_options options_{};
  std::optional<vmm_resource> resource_;
};

/** @brief Fills `out` from `d` (all zero when its resource was never made). */
inline void read_vmm_statistics(vmm_device const& d, rmm_next_vmm_statistics& out)
{
  out                                 = rmm_next_vmm_statistics{};
  out.allocations                     = d.allocations.load(std::memory_order_relaxed);
  out.deallocations                   = d.deallocations.load(std::memory_order_relaxed);
  out.failed_allocations              = d.failures.load(std::memory_order_relaxed);
  std::optional<vmm_resource> const r = d.existing();
  if (!r) { return; }
  out.made            = 1;
  out.allocated_bytes = r->allocated_bytes();
  for (vmm_segment const& s : r->segments()) {
    ++out.segment_count;
    out.segment_bytes += s.bytes;
  }
  out.segment_size    = r->segment_size();
  out.granularity     = r->granularity();
  out.handle_types    = static_cast<std::uint32_t>(r->handle_types());
  out.gpu_direct_rdma = r->gpu_direct_rdma() ? 1 : 0;
  out.access_devices  = static_cast<std::int32_t>(r->access_devices().size());
}

}  // namespace rmm_next::plugin
