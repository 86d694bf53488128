/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

/**
 * @file
 * @brief The calling thread's stream-capture interaction mode, relaxed for a scope.
 *
 * While any thread captures a graph in global mode (`cudaStreamCaptureModeGlobal`, PyTorch's
 * default), or the calling thread itself captures in global or thread-local mode, the driver
 * refuses "potentially unsafe" calls from a thread in global mode, the default of every thread,
 * and the refusal invalidates that capture. Measured on an H200 (driver 580): host waits and
 * queries (`cuEventSynchronize`, `cuEventQuery`, `cuStreamSynchronize`, `cuStreamQuery`), pool
 * management (`cudaMemPoolCreate`, `cudaMemPoolDestroy`, `cudaMemPoolTrimTo`, the exports),
 * `cudaMalloc`, `cudaMallocFromPoolAsync` and `cudaFreeAsync`, even on streams no capture uses.
 * Events (create, record, wait, destroy) and the virtual memory calls (`cuMemCreate`,
 * `cuMemMap`, `cuMemSetAccess`, `cuMemUnmap`, `cuMemRelease`, the address reservations and
 * exports) are accepted. In relaxed mode every one of them is accepted.
 *
 * The library relaxes the calls that are never stream-ordered work a capture could hold up, or
 * that wait only for uncaptured work: pool management, attribute queries, access grants, IPC,
 * the host waits of `vmm_resource`, and the thread cache's releases. The stream-ordered calls of
 * the async resources stay the driver's own (see docs/user_guide.md, "Graph captures").
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief Puts the calling thread in relaxed capture mode for its lifetime and then gives the
 * thread its own mode back: a capture running in global mode on another thread, or on this one,
 * then refuses none of the calls made meanwhile.
 */
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() noexcept { exchange(); }
  /** @brief Relaxed for its lifetime when `relax`, else nothing at all. */
  explicit relaxed_capture_mode(bool relax) noexcept : active_{relax}
  {
    if (active_) { exchange(); }
  }
  relaxed_capture_mode(relaxed_capture_mode const&)            = delete;
  relaxed_capture_mode& operator=(relaxed_capture_mode const&) = delete;
  ~relaxed_capture_mode()
  {
    if (active_) { exchange(); }
  }

 private:
  /**
   * @brief Swaps `mode_` with the thread's mode: the driver's call where the driver has it (the
   * runtime's wrapper of it costs more, and the plugin makes two around every allocation and
   * free), else the runtime's.
   */
  void exchange() noexcept
  {
    if (auto const swap = driver().thread_exchange_stream_capture_mode; swap != nullptr) {
      (void)swap(&mode_);
    } else {
      auto mode = static_cast<cudaStreamCaptureMode>(mode_);
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      mode_ = static_cast<CUstreamCaptureMode>(mode);
    }
  }

  CUstreamCaptureMode mode_{CU_STREAM_CAPTURE_MODE_RELAXED};
  bool active_{true};
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
