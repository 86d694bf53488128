/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/alignment.hpp>
#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/forwarding_members.hpp>
#include <rmm_next/detail/nvtx.hpp>
#include <rmm_next/detail/pointer_registry.hpp>
#include <rmm_next/detail/resource_calls.hpp>
#include <rmm_next/detail/stack_trace.hpp>
#include <rmm_next/detail/upstream_argument.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/** @brief What a `tracking_adaptor` records; designated initializers name what they change. */
struct tracking_options {
  bool stack_traces          = false;  ///< capture the stack of each allocation (costly)
  bool report_at_destruction = false;  ///< the last copy writes `report()` to std::cerr if any live
};

/** @brief One allocation a `tracking_adaptor` has handed out and not yet seen freed. */
struct tracked_allocation {
  void* ptr;                                   ///< what `allocate` returned
  std::size_t bytes;                           ///< the size asked for
  std::size_t alignment;                       ///< the alignment asked for
  cudaStream_t stream;                         ///< its stream (nullptr for synchronous calls)
  std::thread::id thread;                      ///< the thread that allocated
  std::chrono::system_clock::time_point time;  ///< when `allocate` returned
  std::string stack_trace;  ///< the allocating stack, one frame a line; empty unless enabled
};

namespace detail {

/** @brief The live allocations of one `tracking_adaptor` and its copies. */
class allocation_registry {
 public:
  explicit allocation_registry(tracking_options options) : options_{options} {}

  allocation_registry(allocation_registry const&)            = delete;
  allocation_registry& operator=(allocation_registry const&) = delete;
  allocation_registry(allocation_registry&&)                 = delete;
  allocation_registry& operator=(allocation_registry&&)      = delete;

  ~allocation_registry()
  {
    if (!options_.report_at_destruction || count() == 0) { return; }
    try {
      std::cerr << report() << std::flush;
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports what it can
    }
  }

  void add(void* ptr, std::size_t bytes, std::size_t alignment, cudaStream_t stream)
  {
    // Handed out again without a free seen here: the newer entry replaces the older.
    (void)live_.insert(ptr,
                       record{bytes,
                              alignment,
                              stream,
                              std::this_thread::get_id(),
                              std::chrono::system_clock::now(),
                              options_.stack_traces ? stack_trace::capture() : stack_trace{}});
  }

  /** @brief False when `ptr` was not live here (counted as an untracked free). */
  bool remove(void* ptr) noexcept
  {
    if (live_.erase(ptr)) { return true; }
    untracked_frees_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  [[nodiscard]] std::vector<tracked_allocation> outstanding() const
  {
    std::vector<std::pair<void*, record>> copies;
    live_.for_each([&](void* ptr, record const& r) { copies.emplace_back(ptr, r); });
    std::vector<tracked_allocation> list;
    list.reserve(copies.size());
    for (auto const& [ptr, r] : copies) {  // stacks become text outside the locks
      list.push_back({ptr, r.bytes, r.alignment, r.stream, r.thread, r.time, r.trace.to_string()});
    }
    std::sort(
      list.begin(), list.end(), [](tracked_allocation const& a, tracked_allocation const& b) {
        return a.time != b.time ? a.time < b.time
                                : reinterpret_cast<std::uintptr_t>(a.ptr) <   // NOLINT
                                    reinterpret_cast<std::uintptr_t>(b.ptr);  // NOLINT
      });
    return list;
  }

  [[nodiscard]] std::size_t bytes() const noexcept { return live_.bytes(); }
  [[nodiscard]] std::size_t count() const noexcept { return live_.size(); }
  [[nodiscard]] std::size_t untracked_frees() const noexcept
  {
    return untracked_frees_.load(std::memory_order_relaxed);
  }

  [[nodiscard]] std::string report() const
  {
    std::vector<tracked_allocation> const list = outstanding();
    std::size_t total                          = 0;
    for (auto const& a : list) {
      total += a.bytes;
    }
    std::ostringstream out;
    out << "rmm_next::tracking_adaptor: " << list.size() << " outstanding allocation"
        << (list.size() == 1 ? "" : "s") << ", " << total << " bytes";
    if (std::size_t const untracked = untracked_frees(); untracked != 0) {
      out << "; " << untracked << " free" << (untracked == 1 ? "" : "s")
          << " of untracked pointers";
    }
    out << '\n';
    for (auto const& a : list) {
      out << "  " << a.ptr << ": " << a.bytes << " bytes, alignment " << a.alignment << ", stream "
          << static_cast<void const*>(a.stream) << ", thread " << a.thread << ", at "
          << utc_time(a.time) << '\n';
      if (!a.stack_trace.empty()) {
        std::istringstream frames{a.stack_trace};
        for (std::string line; std::getline(frames, line);) {
          out << "    " << line << '\n';
        }
      }
    }
    return out.str();
  }

 private:
  struct record {
    std::size_t bytes;
    std::size_t alignment;
    cudaStream_t stream;
    std::thread::id thread;
    std::chrono::system_clock::time_point time;
    stack_trace trace;
  };

  /** @brief `2026-12-01 10:52:08.123456 UTC`. */
  static std::string utc_time(std::chrono::system_clock::time_point time)
  {
    using namespace std::chrono;
    std::time_t const seconds = system_clock::to_time_t(
      time_point_cast<system_clock::duration>(floor<std::chrono::seconds>(time)));
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    auto const micros = duration_cast<microseconds>(time - floor<std::chrono::seconds>(time));
    std::ostringstream out;
    out << std::put_time(&parts, "%Y-%m-%d %H:%M:%S") << '.' << std::setw(6) << std::setfill('0')
        << micros.count() << " UTC";
    return out.str();
  }

  tracking_options options_;
  pointer_registry<record> live_;
  std::atomic<std::size_t> untracked_frees_{0};
};

/** @brief Keys the NVTX range names of every `tracking_adaptor`. */
struct tracking_adaptor_nvtx;

}  // namespace detail

/**
 * @brief Records every live allocation that passes through it to `Upstream` (pointer, size,
 * alignment, stream, thread, time and, when asked, the stack), for leak hunting.
 *
 * `Upstream` is a resource (held by copy) or a resource ref (the resource it refers to must
 * outlive the adaptor). The adaptor offers what the upstream offers (stream-ordered and/or
 * synchronous members, the CCCL 3.0 names) and forwards every property, so it binds to the same
 * ref types.
 *
 * An allocation is live from the return of `allocate` to the call of `deallocate`; failures and
 * nullptr (0 bytes) are not recorded. A free of a pointer it does not track (allocated before the
 * adaptor, or through another resource) is forwarded to the upstream unchanged and counted by
 * `untracked_frees()`. Frees are forwarded with the caller's arguments.
 *
 * Copies share the records (and compare equal). Thread-safe: the records are split in shards by
 * pointer, each with its own mutex, so threads freeing different blocks rarely meet.
 * `log_outstanding_allocations(out)` writes `report()` to a stream at any time; with
 * `report_at_destruction`, the last copy writes it to std::cerr when anything is live.
 */
template <class Upstream>
class RMM_NEXT_NVTX_ABI tracking_adaptor
  : public cuda::forward_property<tracking_adaptor<Upstream>, Upstream>,
    public detail::forwarding_members<tracking_adaptor<Upstream>, Upstream> {
 public:
  /** @brief Tracks what goes to `upstream`; `options` choose stack traces and the final report. */
  template <detail::upstream_argument<tracking_adaptor, Upstream> Arg = Upstream>
  explicit tracking_adaptor(Arg&& upstream, tracking_options options = {})
    : upstream_(std::forward<Arg>(upstream)),
      registry_{std::make_shared<detail::allocation_registry>(options)}
  {
  }

  /// `allocate(stream, bytes, alignment)` / `deallocate(stream, ptr, bytes, alignment)` when the
  /// upstream allocates in stream order, `allocate_sync` / `deallocate_sync` (recorded with stream
  /// nullptr) when it allocates synchronously; CCCL 3.0's names before CCCL 3.1. An allocation is
  /// recorded when the upstream returns it and forgotten when it is freed; whatever the upstream
  /// throws passes through, with nothing recorded.
  using detail::forwarding_members<tracking_adaptor<Upstream>, Upstream>::allocate;
  using detail::forwarding_members<tracking_adaptor<Upstream>, Upstream>::deallocate;

  /** @brief The live allocations, oldest first (stack traces as text when enabled). */
  [[nodiscard]] std::vector<tracked_allocation> outstanding() const
  {
    return registry_->outstanding();
  }

  /** @brief The bytes of the live allocations (as asked for, not as the upstream rounds). */
  [[nodiscard]] std::size_t bytes_outstanding() const noexcept { return registry_->bytes(); }

  /** @brief The number of live allocations. */
  [[nodiscard]] std::size_t count_outstanding() const noexcept { return registry_->count(); }

  /** @brief How many frees named a pointer that was not live here (forwarded all the same). */
  [[nodiscard]] std::size_t untracked_frees() const noexcept
  {
    return registry_->untracked_frees();
  }

  /**
   * @brief A readable summary: a line with the count and the bytes live, then one line per
   * allocation (pointer, size, alignment, stream, thread, UTC time), each followed by its stack
   * when enabled, oldest first.
   */
  [[nodiscard]] std::string report() const { return registry_->report(); }

  /**
   * @brief Writes `report()` to `out` (std::cerr unless given) and flushes it: RMM's
   * `log_outstanding_allocations()`, which logs the list through RMM's logger (at debug level).
   * With nothing live it writes the report's first line alone.
   */
  void log_outstanding_allocations(std::ostream& out = std::cerr) const
  {
    std::string const text = report();
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
  }

  /** @brief The resource (or ref) the adaptor allocates from. */
  [[nodiscard]] Upstream const& upstream_resource() const noexcept { return upstream_; }

  /** @brief True when both share records, i.e. one is a copy of the other. */
  friend bool operator==(tracking_adaptor const& lhs, tracking_adaptor const& rhs) noexcept
  {
    return lhs.registry_ == rhs.registry_;
  }

 private:
  friend detail::forwarding_members<tracking_adaptor, Upstream>;

  template <class Calls>
  void* allocate_with(Calls const& upstream, std::size_t bytes, std::size_t alignment)
  {
    detail::nvtx_range const range{nvtx_range_names().allocate};
    void* ptr = upstream.allocate(bytes, alignment);
    if (ptr == nullptr) { return ptr; }
    try {
      registry_->add(ptr, bytes, alignment, upstream.stream.get());
    } catch (...) {  // out of host memory for the record (not stored): give the block back
      upstream.deallocate(ptr, bytes, alignment);
      throw;
    }
    return ptr;
  }

  template <class Calls>
  void deallocate_with(Calls const& upstream,
                       void* ptr,
                       std::size_t bytes,
                       std::size_t alignment) noexcept
  {
    detail::nvtx_range const range{nvtx_range_names().deallocate};
    if (ptr != nullptr) { registry_->remove(ptr); }
    upstream.deallocate(ptr, bytes, alignment);
  }

  static decltype(auto) nvtx_range_names() noexcept
  {
    return detail::nvtx_names<detail::tracking_adaptor_nvtx>("tracking_adaptor");
  }

  Upstream upstream_;
  std::shared_ptr<detail::allocation_registry> registry_;
};

/** @brief `tracking_adaptor{upstream}` holds a copy of `upstream`. */
template <class Upstream>
tracking_adaptor(Upstream) -> tracking_adaptor<Upstream>;

/** @brief `tracking_adaptor{upstream, options}` holds a copy of `upstream`. */
template <class Upstream>
tracking_adaptor(Upstream, tracking_options) -> tracking_adaptor<Upstream>;

static_assert(detail::stream_ordered_resource_with<tracking_adaptor<device_async_resource_ref>,
                                                   cuda::mr::device_accessible>);
static_assert(detail::synchronous_resource_with<tracking_adaptor<device_resource_ref>,
                                                cuda::mr::device_accessible>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, tracking_adaptor<device_async_resource_ref>&>);

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
