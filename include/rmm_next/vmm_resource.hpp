/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/alignment_arithmetic.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/vmm_state.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

namespace detail {

struct vmm_resource_nvtx;

/** @brief The NVTX range names "vmm_resource::allocate", ... */
inline decltype(auto) vmm_nvtx_names() noexcept
{
  return nvtx_names<vmm_resource_nvtx>("vmm_resource");
}

}  // namespace detail

/**
 * @brief Device memory sub-allocated from large `cuMemCreate` segments with shareable handles:
 * buffers that NCCL can register (`ncclCommRegister`, symmetric windows), made as
 * `ncclMemAlloc` makes them (POSIX_FD | FABRIC handles with FABRIC dropped when refused,
 * `gpuDirectRDMACapable` where the device has it, sizes rounded to the granularity, access for
 * every peer or for this device only). See `vmm_options`.
 *
 * Each segment is mapped once and announced once through `on_segment_map` (unmapped only when
 * the last copy goes, after `on_segment_unmap`), so a communicator registers it once and every
 * block inside is registered memory. Segment sizes depend only on the options, the granularity
 * and the sequence of requests: ranks that make equal requests get equal segments.
 *
 * Stream order: a block freed on stream `s` may be handed out again on `s` at once; on any other
 * stream the new user's stream first waits on an event recorded at the free (`cuStreamWaitEvent`,
 * never a synchronization); `allocate_sync` waits on the host for such events. The event is one
 * of the device's primary context, also for a free on a stream of another context (a context
 * made with `cuCtxCreate`): that context may be destroyed afterwards and the block stays usable.
 *
 * Captures: allocating during stream capture is refused (`not_supported`). A block allocated
 * before a capture may be freed on the capturing stream, in any capture mode: the graph then frees
 * it, when it first runs past the free (a host node; its earlier work is done by then), and until
 * then no one else gets it. A graph destroyed without ever running keeps its frees' blocks out of
 * use until the resource goes, as does a capture that was invalidated. Like `cudaFreeAsync` inside
 * a capture, the free is the graph's: launching the graph again uses memory that is no longer the
 * caller's. A graph being captured on any thread, in any mode, is never invalidated by a call
 * here: the driver accepts the segment, event and host-node calls beside a capture, and the host
 * waits run in relaxed capture mode (they wait only for uncaptured work).
 *
 * A forked child and a process whose CUDA runtime is unloading get a `cuda_error` from every
 * allocation (CUDA cannot run there), and their frees make no CUDA call.
 *
 * A cheap copyable handle: copies share the segments; the last copy unmaps and releases them,
 * after waiting for the events of the pending frees. Every block must be freed by then.
 * Thread-safe. The driver is reached through `cudaGetDriverEntryPointByVersion` (libcuda is not
 * linked).
 */
class RMM_NEXT_NVTX_ABI vmm_resource : public detail::compat_members<vmm_resource> {
 public:
  /** @brief Segments on the current device with the default `vmm_options`. */
  vmm_resource() : vmm_resource(vmm_options{}) {}

  /**
   * @brief Segments made with `options` on `device` (the current device if none). No segment is
   * made before the first allocation.
   * @throws std::out_of_range if `device` is not a visible device.
   * @throws not_supported when the driver or device lacks virtual memory management, a handle
   * type asked for, or (for `vmm_granularity::multicast`) multicast.
   * @throws cuda_error when no usable driver or device exists.
   */
  explicit vmm_resource(vmm_options options, std::optional<int> device = std::nullopt)
    : state_{std::make_shared<detail::vmm_state>(std::move(options), device)}
  {
  }

  vmm_resource(vmm_resource const&) noexcept            = default;
  vmm_resource& operator=(vmm_resource const&) noexcept = default;
  ~vmm_resource()                                       = default;

  /**
   * @brief `bytes` (rounded up to 256) in the order of `stream`.
   * @return nullptr for 0 bytes.
   * @throws bad_alloc if `alignment` is not a power of two or exceeds the granularity.
   * @throws out_of_memory naming the segment and request sizes when no segment can be made.
   * @throws not_supported while `stream` is being captured.
   * @throws cuda_error in a forked child, or once the CUDA runtime is unloading.
   */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().allocate};
    constexpr std::string_view what = "vmm_resource::allocate";
    check_alignment(what, alignment);
    if (bytes == 0) { return nullptr; }
    refuse_without_cuda(what);
    cudaStream_t const handle = stream.get();
    if (!detail::stream_is_eager(handle)) {
      detail::throw_error<not_supported>(what,
                                         "allocating during stream capture is not supported; "
                                         "allocate before the capture begins");
    }
    detail::taken_block block = state_->take(block_size(what, bytes), alignment);
    std::uint64_t const mine  = detail::stream_lane(handle);
    for (auto const& f : block.fences) {
      if (mine != 0 && f->stream == mine) { continue; }  // same stream: ordered already
      if (!detail::wait_for_fence(reinterpret_cast<CUstream>(handle), f->event)) {
        wait_on_host(block,
                     *f,
                     what,
                     "could not order the stream after an earlier free of the block "
                     "(cuStreamWaitEvent failed)");
      }
    }
    return reinterpret_cast<void*>(block.address);
  }

  /**
   * @brief Frees `ptr` in the order of `stream`: the block is reused on `stream` at once, on other
   * streams after an event recorded now; on a stream being captured, once the graph has run past
   * the free. nullptr does nothing.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = default_alignment) noexcept
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().deallocate};
    if (ptr == nullptr) { return; }
    state_->free_on(reinterpret_cast<std::uintptr_t>(ptr), stream.get());
  }

  /**
   * @brief Memory any stream may use as soon as this returns: events of earlier frees of the
   * block are waited for on the host.
   * @throws as `allocate`, but never `not_supported`.
   */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().allocate_sync};
    constexpr std::string_view what = "vmm_resource::allocate_sync";
    check_alignment(what, alignment);
    if (bytes == 0) { return nullptr; }
    refuse_without_cuda(what);
    detail::taken_block block = state_->take(block_size(what, bytes), alignment);
    for (auto const& f : block.fences) {
      wait_on_host(block,
                   *f,
                   what,
                   "could not wait for an earlier free of the block (cuEventSynchronize failed)");
    }
    return reinterpret_cast<void*>(block.address);
  }

  /** @brief Frees memory no pending work uses any more; nullptr does nothing. */
  void deallocate_sync(void* ptr,
                       std::size_t /*bytes*/,
                       std::size_t /*alignment*/ = default_alignment) noexcept
  {
    if (ptr == nullptr) { return; }
    state_->give_back(reinterpret_cast<std::uintptr_t>(ptr), {});
  }

  using detail::compat_members<vmm_resource>::allocate;
  using detail::compat_members<vmm_resource>::deallocate;

  /** @brief The device whose memory the segments are. */
  [[nodiscard]] int device() const noexcept { return state_->device(); }

  /** @brief The granularity segments are rounded to (and the largest alignment allowed). */
  [[nodiscard]] std::size_t granularity() const noexcept { return granularity_; }

  /** @brief The size of a segment made for a request no larger than it. */
  [[nodiscard]] std::size_t segment_size() const { return state_->config().segment_size; }

  /** @brief The handle types segments are made with now (FABRIC dropped once refused). */
  [[nodiscard]] vmm_handle_types handle_types() const
  {
    return static_cast<vmm_handle_types>(state_->config().handle_types);
  }

  /** @brief True when segments are made `gpuDirectRDMACapable`. */
  [[nodiscard]] bool gpu_direct_rdma() const { return state_->config().gpu_direct_rdma; }

  /** @brief The devices granted read-write access to the segments, this device first. */
  [[nodiscard]] std::vector<int> access_devices() const { return state_->config().access_devices; }

  /** @brief The segments mapped now, in the order they were made. */
  [[nodiscard]] std::vector<vmm_segment> segments() const { return state_->segments(); }

  /** @brief Bytes handed out and not yet freed (each request rounded up to 256). */
  [[nodiscard]] std::size_t allocated_bytes() const { return state_->allocated_bytes(); }

  /**
   * @brief Bytes freed on a stream being captured whose graph has not yet run past the free: no
   * one else gets them until it has (and never, for a graph destroyed without running).
   */
  [[nodiscard]] std::size_t graph_pending_bytes() const { return state_->graph_pending_bytes(); }

  /** @brief The segment that holds `ptr`, or nullopt when `ptr` is not in any segment. */
  [[nodiscard]] std::optional<vmm_segment> segment_of(void const* ptr) const
  {
    auto const s = state_->segment_of(ptr);
    if (!s) { return std::nullopt; }
    return vmm_segment{reinterpret_cast<void*>(s->base), s->bytes};
  }

  /**
   * @brief A POSIX file descriptor for the segment holding `ptr` (`cuMemExportToShareableHandle`);
   * the caller owns it and closes it. Another process imports it with
   * `cuMemImportFromShareableHandle` and maps it at the segment's size.
   * @throws logic_error if `ptr` is in no segment.
   * @throws not_supported if the segments have no POSIX_FD handle type.
   */
  [[nodiscard]] int export_segment_fd(void const* ptr) const
  {
    auto const s = state_->segment_of(ptr);
    if (!s) {
      detail::throw_error<logic_error>("vmm_resource::export_segment_fd",
                                       "the pointer is in no segment of this resource");
    }
    if ((state_->config().handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
      detail::throw_error<not_supported>("vmm_resource::export_segment_fd",
                                         "the segments were made without POSIX_FD handles; ask "
                                         "for vmm_handle_types::posix_fd");
    }
    auto const fn = detail::driver().mem_export_to_shareable_handle;
    if (fn == nullptr) {
      detail::throw_error<not_supported>("vmm_resource::export_segment_fd",
                                         "the driver lacks cuMemExportToShareableHandle");
    }
    int fd{-1};
    if (CUresult const r = fn(&fd, s->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        r != CUDA_SUCCESS) {
      detail::throw_driver_error(
        r, "cuMemExportToShareableHandle", "vmm_resource::export_segment_fd");
    }
    return fd;
  }

  /** @brief True when both share the same segments (one is a copy of the other). */
  friend bool operator==(vmm_resource const& lhs, vmm_resource const& rhs) noexcept
  {
    return lhs.state_ == rhs.state_;
  }

  /** @brief The memory is accessible from device code. */
  friend constexpr void get_property(vmm_resource const&, cuda::mr::device_accessible) noexcept {}

 private:
  /** @brief `bytes` rounded up to 256. @throws out_of_memory when that does not fit. */
  static std::size_t block_size(std::string_view what, std::size_t bytes)
  {
    std::size_t rounded{};
    if (!detail::round_up(bytes, default_alignment, rounded)) {
      detail::throw_error<out_of_memory>(
        what,
        "out_of_memory: a request of " + std::to_string(bytes) + " bytes cannot be rounded up to " +
          std::to_string(default_alignment) + " bytes; no segment can hold it");
    }
    return rounded;
  }

  void check_alignment(std::string_view what, std::size_t alignment) const
  {
    detail::check_power_of_two_alignment(what, alignment);
    if (alignment > granularity_) {
      detail::throw_error<bad_alloc>(
        what,
        "alignment " + std::to_string(alignment) + " exceeds the segment granularity " +
          std::to_string(granularity_) + "; ask for at most the granularity");
    }
  }

  /** @brief Throws `cuda_error` naming `what` in a forked child or while the runtime unloads. */
  static void refuse_without_cuda(std::string_view what)
  {
    if (detail::runtime_unloading().load(std::memory_order_relaxed)) {
      throw cuda_error{cudaErrorInitializationError,
                       detail::error_message(
                         what,
                         "CUDA cannot be used here: this process is a child forked after CUDA was "
                         "initialized, or its CUDA runtime is unloading; allocate in the parent, "
                         "or start the child with the spawn method")};
    }
  }

  /**
   * @brief Waits on the host for `fence` of `block` (relaxed capture mode: a capture on any thread
   * refuses no host wait for uncaptured work). When the wait fails, gives the block back, still
   * unwaited, and throws `cuda_error` with `what` and `failed`.
   */
  void wait_on_host(detail::taken_block& block,
                    detail::free_fence const& fence,
                    std::string_view what,
                    char const* failed) const
  {
    if (detail::wait_for_fence_on_host(fence.event)) { return; }
    state_->give_back(block.address, std::move(block.fences));
    throw cuda_error{cudaErrorUnknown, detail::error_message(what, failed)};
  }

  std::shared_ptr<detail::vmm_state> state_;
  std::size_t granularity_{state_->granularity()};  ///< read on every allocation: held by value
};

static_assert(detail::stream_ordered_resource_with<vmm_resource, cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<vmm_resource, cuda::mr::device_accessible>);
static_assert(!cuda::has_property<vmm_resource, cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
