/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A graph capture held open on another thread while the calling thread works, for GPU tests (and
// their helper processes) that check a call never invalidates a capture it does not take part in.
// No GoogleTest: end() says in words what went wrong.

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace rmm_next::test {

/**
 * @brief Begins a capture in `mode` on a thread of its own, on a stream of its own, capturing one
 * memset of a small buffer; `end()` ends it and runs the graph.
 */
class capture_elsewhere {
 public:
  /** @brief Returns once the capture has begun (or failed to: `end()` says so). */
  explicit capture_elsewhere(cudaStreamCaptureMode mode)
  {
    if (cudaMalloc(&buffer_, bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
      failure_ = "could not set up the capture";
      return;
    }
    thread_ = std::thread{[this, mode] {
      begun_ = cudaStreamBeginCapture(stream_, mode);
      if (begun_ == cudaSuccess) { (void)cudaMemsetAsync(buffer_, value, bytes, stream_); }
      set(1);
      wait_for(2);
      if (begun_ == cudaSuccess) { ended_ = cudaStreamEndCapture(stream_, &graph_); }
    }};
    wait_for(1);
  }
  capture_elsewhere(capture_elsewhere const&)            = delete;
  capture_elsewhere& operator=(capture_elsewhere const&) = delete;
  ~capture_elsewhere()
  {
    (void)end();
    if (graph_ != nullptr) { (void)cudaGraphDestroy(graph_); }
    if (stream_ != nullptr) { (void)cudaStreamDestroy(stream_); }
    if (buffer_ != nullptr) { (void)cudaFree(buffer_); }
  }

  /**
   * @brief Ends the capture and runs its graph: "" when the capture survived and the graph wrote
   * the buffer, else what happened. Only the first call ends it; later ones repeat the answer.
   */
  std::string end()
  {
    if (!thread_.joinable()) { return failure_; }
    set(2);
    thread_.join();
    if (begun_ != cudaSuccess) {
      return failure_ = std::string{"cudaStreamBeginCapture returned "} + cudaGetErrorName(begun_);
    }
    if (ended_ != cudaSuccess) {
      return failure_ =
               std::string{
                 "the capture on another thread was invalidated: "
                 "cudaStreamEndCapture returned "} +
               cudaGetErrorName(ended_);
    }
    cudaGraphExec_t exec{};
    unsigned char host[bytes]{};
    if (cudaGraphInstantiate(&exec, graph_, 0) != cudaSuccess ||
        cudaGraphLaunch(exec, stream_) != cudaSuccess ||
        cudaMemcpyAsync(host, buffer_, bytes, cudaMemcpyDeviceToHost, stream_) != cudaSuccess ||
        cudaStreamSynchronize(stream_) != cudaSuccess) {
      failure_ = "the captured graph did not run";
    } else {
      for (unsigned char const b : host) {
        if (b != value) { failure_ = "the captured graph did not write its buffer"; }
      }
    }
    if (exec != nullptr) { (void)cudaGraphExecDestroy(exec); }
    return failure_;
  }

 private:
  static constexpr std::size_t bytes   = 256;
  static constexpr unsigned char value = 0x5a;

  void set(int phase)
  {
    std::lock_guard const lock{mutex_};
    phase_ = phase;
    cv_.notify_all();
  }
  void wait_for(int phase)
  {
    std::unique_lock lock{mutex_};
    cv_.wait(lock, [&] { return phase_ == phase; });
  }

  void* buffer_{};
  cudaStream_t stream_{};
  cudaGraph_t graph_{};
  cudaError_t begun_{cudaErrorUnknown};
  cudaError_t ended_{cudaErrorUnknown};
  std::string failure_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int phase_{0};  // 1: the capture runs; 2: end it
  std::thread thread_;
};

}  // namespace rmm_next::test
