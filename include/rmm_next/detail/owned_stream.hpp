/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/error_macros.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <new>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief A non-blocking stream of `device`'s primary context (also when the constructing thread
 * has another context of `device` current), owned: made at construction, destroyed on its device
 * with the object, and never touched once the runtime is unloading (or
 * in a forked child). Work on it waits neither for the legacy default stream nor for other
 * streams: what a resource's synchronous calls run on.
 */
class owned_stream {
 public:
  /** @throws cuda_error naming `what` when the stream cannot be made. */
  explicit owned_stream(int device, char const* what = "cuda_error") : device_{device}
  {
    relaxed_capture_mode const relaxed;  // a capture on any thread refuses nothing here
    device_guard const guard{device, primary_context};
    RMM_NEXT_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), what);
    context_ = current_context_or_null();  // the device's primary context, which the guard made
    watch_runtime_teardown();
  }

  owned_stream(owned_stream const&)            = delete;
  owned_stream& operator=(owned_stream const&) = delete;

  ~owned_stream()
  {
    if (runtime_unloading().load(std::memory_order_relaxed)) { return; }
    // On its device: on a thread without a current context, the runtime would otherwise make
    // device 0's primary context for the call.
    relaxed_capture_mode const relaxed;
    device_guard const on_device{device_, primary_context, std::nothrow};
    if (cudaError_t const s = cudaStreamDestroy(stream_); s != cudaSuccess) {
      report_release_failure(s, "cudaStreamDestroy");
    }
  }

  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

  /** @brief The context the stream belongs to (null if the driver could not say). */
  [[nodiscard]] CUcontext context() const noexcept { return context_; }

 private:
  int device_;
  cudaStream_t stream_{};
  CUcontext context_{};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
