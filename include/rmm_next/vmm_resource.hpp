/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/capture_mode.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/stream_fence.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/vmm_free_list.hpp>
#include <rmm_next/detail/vmm_segments.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_options.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief A segment of a `vmm_resource`: where it is mapped and how large it is. */
struct vmm_segment {
  void* base{};
  std::size_t bytes{};
};

namespace detail {

struct vmm_resource_nvtx;

/** @brief The NVTX range names "vmm_resource::allocate", ... */
inline decltype(auto) vmm_nvtx_names() noexcept
{
  return nvtx_names<vmm_resource_nvtx>("vmm_resource");
}

/** @brief What the copies of one `vmm_resource` share: the segments, the blocks, the lock. */
class vmm_state {
 public:
  vmm_state(vmm_options options, std::optional<int> device)
    : config_{resolve_vmm_config(options, device)},
      on_map_{std::move(options.on_segment_map)},
      on_unmap_{std::move(options.on_segment_unmap)}
  {
  }
  vmm_state(vmm_state const&)            = delete;
  vmm_state& operator=(vmm_state const&) = delete;

  /// Waits for the frees still pending on streams, then unmaps every segment (hook first).
  ~vmm_state()
  {
    if (!runtime_unloading().load(std::memory_order_relaxed) &&
        driver().event_synchronize != nullptr) {
      relaxed_capture_mode const relaxed;  // a capture on any thread refuses no host wait
      for (auto const& f : free_.all_fences()) {
        (void)driver().event_synchronize(f->event);
      }
    }
    free_.clear();
    for (auto const& s : segments_) {
      if (on_unmap_) {
        try {
          on_unmap_(reinterpret_cast<void*>(s.base), s.bytes);
        } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports nothing further
        }
      }
      destroy_segment(s);
    }
  }

  /**
   * @brief A block of `bytes` (a multiple of 256) at `alignment`, and the fences its user must
   * wait on; makes a segment when no free block fits.
   */
  taken_block take(std::size_t bytes, std::size_t alignment)
  {
    {
      std::lock_guard const lock{mutex_};
      if (auto block = take_locked(bytes, alignment)) { return std::move(*block); }
    }
    // One segment at a time, the hook outside the block lock: frees and fitting allocations go on.
    std::lock_guard const growing{grow_mutex_};
    {
      std::lock_guard const lock{mutex_};
      if (auto block = take_locked(bytes, alignment)) { return std::move(*block); }
    }
    std::size_t const segment_bytes =
      bytes > config_.segment_size ? round_up_to(bytes, config_.granularity) : config_.segment_size;
    vmm_segment_handle const s = create_segment(config_, segment_bytes, bytes);
    if (on_map_) {
      try {
        on_map_(reinterpret_cast<void*>(s.base), s.bytes);
      } catch (...) {
        destroy_segment(s);
        throw;
      }
    }
    std::lock_guard const lock{mutex_};
    std::size_t const index = segments_.size();
    try {
      segments_.push_back(s);
    } catch (...) {
      if (on_unmap_) { on_unmap_(reinterpret_cast<void*>(s.base), s.bytes); }
      destroy_segment(s);
      throw;
    }
    free_.insert(s.base, s.bytes, index, {});
    auto block = take_locked(bytes, alignment);  // fits: the base is aligned to the granularity
    return std::move(*block);
  }

  /** @brief Returns a block taken at `address` with `fence` (null: nothing to wait for). */
  void give_back(std::uintptr_t address, std::shared_ptr<free_fence const> fence) noexcept
  {
    fence_list fences;
    try {
      if (fence) { fences.push_back(std::move(fence)); }
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory, the block is lost below
      return;
    }
    give_back(address, std::move(fences));
  }

  /** @brief Returns a block taken at `address`, still to be waited for on `fences`. */
  void give_back(std::uintptr_t address, fence_list fences) noexcept
  {
    std::lock_guard const lock{mutex_};
    auto const it = live_.find(address);
    if (it == live_.end()) { return; }  // not ours: reported by the caller's debug check
    try {
      free_.insert(address, it->second.bytes, it->second.segment, std::move(fences));
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory, the block is lost
    }
    allocated_ -= it->second.bytes;
    live_.erase(it);
  }

  /** @brief True when `address` is a live block of this resource. */
  bool owns(std::uintptr_t address) const
  {
    std::lock_guard const lock{mutex_};
    return live_.contains(address);
  }

  /** @brief The next order number of fences. */
  std::uint64_t next_fence_order() noexcept
  {
    std::lock_guard const lock{mutex_};
    return ++fence_order_;
  }

  std::vector<vmm_segment> segments() const
  {
    std::lock_guard const lock{mutex_};
    std::vector<vmm_segment> out;
    for (auto const& s : segments_) {
      out.push_back(vmm_segment{reinterpret_cast<void*>(s.base), s.bytes});
    }
    return out;
  }

  /** @brief The segment holding `ptr`, or nullopt. */
  std::optional<vmm_segment_handle> segment_of(void const* ptr) const
  {
    auto const p = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard const lock{mutex_};
    for (auto const& s : segments_) {
      if (p >= s.base && p < s.base + s.bytes) { return s; }
    }
    return std::nullopt;
  }

  std::size_t allocated_bytes() const
  {
    std::lock_guard const lock{mutex_};
    return allocated_;
  }

  vmm_config config() const
  {
    std::lock_guard const lock{mutex_};
    return config_;
  }

  std::size_t free_block_count() const
  {
    std::lock_guard const lock{mutex_};
    return free_.size();
  }

 private:
  struct live_block {
    std::size_t bytes{};
    std::size_t segment{};
  };

  std::optional<taken_block> take_locked(std::size_t bytes, std::size_t alignment)
  {
    auto block = free_.take(bytes, alignment);
    if (block) {
      std::size_t segment = 0;
      for (std::size_t i = 0; i < segments_.size(); ++i) {
        if (block->address >= segments_[i].base &&
            block->address < segments_[i].base + segments_[i].bytes) {
          segment = i;
          break;
        }
      }
      try {
        live_.emplace(block->address, live_block{bytes, segment});
      } catch (...) {
        free_.insert(block->address, bytes, segment, std::move(block->fences));
        throw;
      }
      allocated_ += bytes;
    }
    return block;
  }

  mutable std::mutex mutex_;
  std::mutex grow_mutex_;
  vmm_config config_;
  std::function<void(void*, std::size_t)> on_map_;
  std::function<void(void*, std::size_t)> on_unmap_;
  std::vector<vmm_segment_handle> segments_;
  vmm_free_list free_;
  std::unordered_map<std::uintptr_t, live_block> live_;
  std::size_t allocated_{};
  std::uint64_t fence_order_{};
};

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
 * never a synchronization); `allocate_sync` waits on the host for such events. Allocating during
 * stream capture is refused (`not_supported`). A graph being captured on any thread, in any mode,
 * is never invalidated by a call here: the driver accepts the segment and event calls beside a
 * capture, and the host waits run in relaxed capture mode (they wait only for uncaptured work).
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
   */
  [[nodiscard]] void* allocate(cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = default_alignment)
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().allocate};
    check_alignment(alignment);
    if (bytes == 0) { return nullptr; }
    if (!detail::stream_is_eager(stream.get())) {
      detail::throw_error<not_supported>("vmm_resource::allocate",
                                         "allocating during stream capture is not supported; "
                                         "allocate before the capture begins");
    }
    detail::taken_block block = state_->take(block_size(bytes), alignment);
    std::uint64_t const mine  = detail::stream_lane(stream.get());
    for (auto const& f : block.fences) {
      if (mine != 0 && f->stream == mine) { continue; }  // same stream: ordered already
      if (!detail::wait_for_fence(reinterpret_cast<CUstream>(stream.get()), f->event)) {
        wait_on_host(block,
                     *f,
                     "vmm_resource::allocate",
                     "could not order the stream after an earlier free of the block "
                     "(cuStreamWaitEvent failed)");
      }
    }
    return reinterpret_cast<void*>(block.address);
  }

  /**
   * @brief Frees `ptr` in the order of `stream`: the block is reused on `stream` at once, on other
   * streams after an event recorded now. nullptr does nothing.
   */
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = default_alignment) noexcept
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().deallocate};
    if (ptr == nullptr) { return; }
    state_->give_back(reinterpret_cast<std::uintptr_t>(ptr), fence_for(stream.get()));
  }

  /**
   * @brief Memory any stream may use as soon as this returns: events of earlier frees of the
   * block are waited for on the host.
   * @throws as `allocate`.
   */
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
  {
    detail::nvtx_range const range{detail::vmm_nvtx_names().allocate_sync};
    check_alignment(alignment);
    if (bytes == 0) { return nullptr; }
    detail::taken_block block = state_->take(block_size(bytes), alignment);
    for (auto const& f : block.fences) {
      wait_on_host(block,
                   *f,
                   "vmm_resource::allocate_sync",
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
    state_->give_back(reinterpret_cast<std::uintptr_t>(ptr), nullptr);
  }

  using detail::compat_members<vmm_resource>::allocate;
  using detail::compat_members<vmm_resource>::deallocate;

  /** @brief The device whose memory the segments are. */
  [[nodiscard]] int device() const { return state_->config().device; }

  /** @brief The granularity segments are rounded to (and the largest alignment allowed). */
  [[nodiscard]] std::size_t granularity() const { return state_->config().granularity; }

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
    auto const fn = driver().mem_export_to_shareable_handle;
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
  static detail::driver_api const& driver() noexcept { return detail::driver(); }

  static constexpr std::size_t block_size(std::size_t bytes) noexcept
  {
    return detail::round_up_to(bytes, default_alignment);
  }

  void check_alignment(std::size_t alignment) const
  {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      detail::throw_error<bad_alloc>(
        "vmm_resource::allocate",
        "alignment " + std::to_string(alignment) + " is not a power of two");
    }
    if (std::size_t const g = granularity(); alignment > g) {
      detail::throw_error<bad_alloc>("vmm_resource::allocate",
                                     "alignment " + std::to_string(alignment) +
                                       " exceeds the segment granularity " + std::to_string(g) +
                                       "; ask for at most the granularity");
    }
  }

  /**
   * @brief Waits on the host for `fence` of `block`, in relaxed capture mode (a capture on any
   * thread refuses no host wait for uncaptured work). When the wait fails, gives the block back,
   * still unwaited, and throws `cuda_error` with `what` and `failed`.
   */
  void wait_on_host(detail::taken_block& block,
                    detail::free_fence const& fence,
                    char const* what,
                    char const* failed) const
  {
    detail::relaxed_capture_mode const relaxed;
    if (driver().event_synchronize != nullptr &&
        driver().event_synchronize(fence.event) == CUDA_SUCCESS) {
      return;
    }
    state_->give_back(block.address, std::move(block.fences));
    throw cuda_error{cudaErrorUnknown, detail::error_message(what, failed)};
  }

  /**
   * @brief An event recorded on `stream` now, in the stream's context; null when none can be
   * made, after synchronizing `stream` instead (the block is then free for everyone).
   */
  std::shared_ptr<detail::free_fence const> fence_for(cudaStream_t stream) const noexcept
  {
    if (detail::runtime_unloading().load(std::memory_order_relaxed) ||
        !detail::fences_available()) {
      return nullptr;
    }
    CUcontext const context = detail::is_default_stream(stream) ? detail::current_context_or_null()
                                                                : detail::stream_context(stream);
    CUevent const event     = detail::make_fence_event(context);
    if (event != nullptr) {
      detail::context_scope const scope{context};
      if (detail::record_fence(event, stream)) {
        try {
          return std::make_shared<detail::free_fence const>(
            event, detail::stream_lane(stream), state_->next_fence_order());
        } catch (...) {  // NOLINT(bugprone-empty-catch): out of host memory: synchronize below
        }
      }
      detail::destroy_fence_event(event);
    }
    if (driver().stream_synchronize != nullptr) {
      detail::relaxed_capture_mode const relaxed;
      (void)driver().stream_synchronize(reinterpret_cast<CUstream>(stream));
    }
    return nullptr;
  }

  std::shared_ptr<detail::vmm_state> state_;
};

static_assert(detail::stream_ordered_resource_with<vmm_resource, cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<vmm_resource, cuda::mr::device_accessible>);
static_assert(!cuda::has_property<vmm_resource, cuda::mr::host_accessible>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
