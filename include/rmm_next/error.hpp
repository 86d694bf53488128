/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/export.hpp>

#include <cuda_runtime_api.h>

#include <new>
#include <stdexcept>
#include <string>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Thrown when a CUDA runtime call fails.
 *
 * `what()` names the call, the CUDA error name and its description. The sticky error state of
 * the runtime has been cleared before it is thrown.
 */
class cuda_error : public std::runtime_error {
 public:
  /**
   * @brief Constructs an error for the CUDA status `code` with the message `msg`.
   * @param code The CUDA status that caused the error.
   * @param msg Human-readable description.
   */
  cuda_error(cudaError_t code, std::string const& msg) : std::runtime_error{msg}, code_{code} {}

  /** @brief The CUDA status that caused the error. */
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

/**
 * @brief Thrown when a feature is absent from this CUDA runtime, driver or device.
 *
 * The message names the feature, what it needs and what was found.
 */
class not_supported : public cuda_error {
 public:
  /**
   * @brief Constructs the error.
   * @param msg Names the feature, the requirement and what was found.
   * @param code The CUDA status observed, `cudaErrorNotSupported` when there was none.
   */
  explicit not_supported(std::string const& msg, cudaError_t code = cudaErrorNotSupported)
    : cuda_error{code, msg}
  {
  }
};

/**
 * @brief Thrown when an allocation cannot be made: bad alignment, or a failure other than
 * exhausted memory.
 */
class bad_alloc : public std::bad_alloc {
 public:
  /** @brief Constructs the error with the message `msg`. */
  explicit bad_alloc(std::string msg) : msg_{std::move(msg)} {}

  /** @brief The message given at construction. */
  [[nodiscard]] char const* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

/**
 * @brief Thrown when an allocation fails because the memory is exhausted.
 *
 * `what()` contains "out_of_memory", the requested size and the device.
 */
class out_of_memory : public bad_alloc {
 public:
  using bad_alloc::bad_alloc;
};

/** @brief Thrown when a precondition of the library is violated (see `RMM_NEXT_EXPECTS`). */
class logic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/**
 * @brief Thrown when memory is asked for in the order of a stream whose device cannot use it: the
 * stream belongs to another device than the resource's pool, and that device has no read-write
 * access to the pool.
 *
 * `what()` names the resource, both devices and what to do.
 */
class device_mismatch : public logic_error {
 public:
  /**
   * @brief Constructs the error.
   * @param msg Names the resource, both devices and the remedy.
   * @param resource_device The device of the resource.
   * @param stream_device The device of the stream the caller gave.
   */
  device_mismatch(std::string const& msg, int resource_device, int stream_device)
    : logic_error{msg}, resource_device_{resource_device}, stream_device_{stream_device}
  {
  }

  /** @brief The device of the resource. */
  [[nodiscard]] int resource_device() const noexcept { return resource_device_; }

  /** @brief The device of the stream the caller gave. */
  [[nodiscard]] int stream_device() const noexcept { return stream_device_; }

 private:
  int resource_device_;
  int stream_device_;
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
