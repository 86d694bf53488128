/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#if defined(__linux__)
#include <dirent.h>
#include <unistd.h>
#endif

/**
 * @file
 * @brief The export handle types of a pool (`allocation_handle_type`) as messages name them, and
 * what fabric handles need.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

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

/**
 * @brief True when this process may open an IMEX channel (a readable and writable
 * `/dev/nvidia-caps-imex-channels/channel<N>`), which fabric handles need. Checked before a
 * fabric pool is created: where no channel is open to the process, some drivers create the pool,
 * refuse to export it, and then fail inside `cudaMemPoolDestroy`. Other systems: true, and the
 * driver decides.
 */
inline bool imex_channel_available() noexcept
{
#if defined(__linux__)
  char const* const folder = "/dev/nvidia-caps-imex-channels";
  DIR* const dir           = ::opendir(folder);
  if (dir == nullptr) { return false; }
  bool found = false;
  while (dirent const* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, "channel", 7) != 0) { continue; }
    std::string const path = std::string{folder} + "/" + entry->d_name;
    if (::access(path.c_str(), R_OK | W_OK) == 0) {
      found = true;
      break;
    }
  }
  ::closedir(dir);
  return found;
#else
  return true;
#endif
}

/** @brief True when `device` can export and import pools as fabric handles; a failed query
 * (cleared) says no. */
inline bool device_exports_fabric(int device) noexcept
{
  int mask{};
  if (device < 0 || cudaDeviceGetAttribute(
                      &mask, cudaDevAttrMemoryPoolSupportedHandleTypes, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return exports_as_fabric(static_cast<allocation_handle_type>(mask));
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
