/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/compat_members.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <cuda_runtime_api.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

/**
 * @file
 * @brief The logging and tracking adaptors the plugin can put in front of every device's
 * resource: logging (one CSV log for the process), over tracking (one registry per device), over
 * whatever serves the device (thread cache, pool). Both reach the device's resource at each call,
 * so a resource or cache chosen later is what they allocate from.
 */

namespace rmm_next::plugin {

/** @brief A resource that allocates from `get_per_device_resource_ref(device)` at each call. */
class device_forwarder : public detail::compat_members<device_forwarder> {
 public:
  explicit device_forwarder(int device = 0) noexcept : device_{device} {}

  using detail::compat_members<device_forwarder>::allocate;
  using detail::compat_members<device_forwarder>::deallocate;

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    return get_per_device_resource_ref(device_).allocate(stream, bytes, alignment);
  }
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    get_per_device_resource_ref(device_).deallocate(stream, ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return get_per_device_resource_ref(device_).allocate_sync(bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    get_per_device_resource_ref(device_).deallocate_sync(ptr, bytes, alignment);
  }

  friend bool operator==(device_forwarder const& a, device_forwarder const& b) noexcept
  {
    return a.device_ == b.device_;
  }
  friend constexpr void get_property(device_forwarder const&, cuda::mr::device_accessible) noexcept
  {
  }

 private:
  int device_;
};

using tracker = tracking_adaptor<device_async_resource_ref>;
using logger  = logging_adaptor<device_async_resource_ref>;

/** @brief One live allocation as `rmm_next_outstanding_entry` reports it. */
struct outstanding_entry {
  tracked_allocation allocation;
  int device;
  std::uint64_t
    thread;  ///< `pthread_self()` of the allocating thread (Python's threading.get_ident)
};

/**
 * @brief What is in front of the devices' resources now. Immutable once published; a change
 * publishes a new one that shares the unchanged adaptor (copies share their log or records).
 */
struct front {
  std::optional<logger> log;
  std::vector<std::optional<tracker>> track;  ///< per device; empty when tracking is off
  tracking_options track_options{};

  [[nodiscard]] bool empty() const noexcept { return !log && track.empty(); }
  [[nodiscard]] tracker* tracker_of(int device) noexcept
  {
    auto const d = static_cast<std::size_t>(device);
    return d < track.size() && track[d] ? &*track[d] : nullptr;
  }
};

/** @brief The device and front the logging adaptor's upstream routes the calling thread's call to.
 */
struct route {
  int device{};
  front* through{};
};

inline route& current_route() noexcept
{
  thread_local route r;
  return r;
}

/** @brief Sets the calling thread's route for one call through the log. */
class route_scope {
 public:
  route_scope(int device, front* through) noexcept : saved_{current_route()}
  {
    current_route() = {device, through};
  }
  route_scope(route_scope const&)            = delete;
  route_scope& operator=(route_scope const&) = delete;
  ~route_scope() { current_route() = saved_; }

 private:
  route saved_;
};

/** @brief The log's upstream: the calling thread's device, through its tracker when tracking. */
class routed_forwarder : public detail::compat_members<routed_forwarder> {
 public:
  using detail::compat_members<routed_forwarder>::allocate;
  using detail::compat_members<routed_forwarder>::deallocate;

  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    route const r = current_route();
    if (tracker* t = r.through->tracker_of(r.device)) {
      return t->allocate(stream, bytes, alignment);
    }
    return get_per_device_resource_ref(r.device).allocate(stream, bytes, alignment);
  }
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    route const r = current_route();
    if (tracker* t = r.through->tracker_of(r.device)) {
      t->deallocate(stream, ptr, bytes, alignment);
      return;
    }
    get_per_device_resource_ref(r.device).deallocate(stream, ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    return allocate(cuda::stream_ref{cudaStream_t{}}, bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate(cuda::stream_ref{cudaStream_t{}}, ptr, bytes, alignment);
  }

  friend bool operator==(routed_forwarder const&, routed_forwarder const&) noexcept { return true; }
  friend constexpr void get_property(routed_forwarder const&, cuda::mr::device_accessible) noexcept
  {
  }
};

/**
 * @brief The number `std::thread::id` stands for: `pthread_self()` with libstdc++ and libc++,
 * whose `thread::id` holds that handle and nothing else. Read by copying its bytes, with no
 * stream: formatting it through `operator<<` reaches the locale's facets, and in Python processes
 * with PyTorch or CuPy loaded that call died of SIGSEGV inside them (rmm_next.outstanding()).
 */
inline std::uint64_t thread_number(std::thread::id id) noexcept
{
  static_assert(sizeof(std::thread::id) == sizeof(pthread_t) && sizeof(pthread_t) <= 8);
  static_assert(std::is_trivially_copyable_v<std::thread::id>);
  pthread_t handle{};
  std::memcpy(&handle, &id, sizeof handle);
  return static_cast<std::uint64_t>(handle);
}

class tracing;

/** @brief The process's `tracing`, made on first use and never destroyed (allocator_plugin.cpp). */
tracing& tracing_state();

/**
 * @brief The logging and tracking in front of the devices' resources, process-wide. Calls cost one
 * acquire load while neither is on.
 */
class tracing {
 public:
  tracing() = default;

  /**
   * @brief Applies RMM_NEXT_LOG (a path) and RMM_NEXT_TRACK (`1`, or `stacks` for stack traces);
   * what cannot be applied is reported on stderr, and the program runs on untraced.
   */
  void apply_environment();

  /** @brief Whether a log or a tracker is in front of the devices' resources (one acquire load). */
  [[nodiscard]] bool in_front() const noexcept { return on_.load(std::memory_order_acquire); }

  /** @brief Allocates through the front on `device` (the caller resolved it). */
  void* allocate(int device, cudaStream_t stream, std::size_t bytes, std::size_t alignment)
  {
    if (!on_.load(std::memory_order_acquire)) {
      return get_per_device_resource_ref(device).allocate(
        cuda::stream_ref{stream}, bytes, alignment);
    }
    std::shared_ptr<front> const f = current();
    if (f && f->log) {
      route_scope const scope{device, f.get()};
      return f->log->allocate(cuda::stream_ref{stream}, bytes, alignment);
    }
    if (tracker* t = f ? f->tracker_of(device) : nullptr) {
      return t->allocate(cuda::stream_ref{stream}, bytes, alignment);
    }
    return get_per_device_resource_ref(device).allocate(cuda::stream_ref{stream}, bytes, alignment);
  }

  void deallocate(
    int device, cudaStream_t stream, void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    if (on_.load(std::memory_order_acquire)) {
      std::shared_ptr<front> const f = current();
      if (f && f->log) {
        route_scope const scope{device, f.get()};
        f->log->deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
        return;
      }
      if (tracker* t = f ? f->tracker_of(device) : nullptr) {
        t->deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
        return;
      }
    }
    get_per_device_resource_ref(device).deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  }

  /**
   * @brief Starts a log at `path` (created or truncated), replacing any log, which is flushed and
   * closed; an empty path only ends the log.
   * @throws std::system_error when the file cannot be opened (nothing changes then).
   */
  void set_log(std::string const& path)
  {
    std::lock_guard const lock{change_mutex_};
    std::optional<logger> log;
    if (!path.empty()) {
      log.emplace(device_async_resource_ref{routed_}, path);
      register_exit_flush();
    }
    auto next = copy_of_current();
    if (next->log) { next->log->flush(); }
    next->log = std::move(log);
    publish(std::move(next));
  }

  /**
   * @brief Turns tracking on for `device_count` devices (kept as it is when already on) or off
   * (the records are forgotten).
   */
  void set_tracking(bool enabled, tracking_options options, int device_count)
  {
    std::lock_guard const lock{change_mutex_};
    auto next = copy_of_current();
    if (!enabled) {
      next->track.clear();
    } else if (next->track.empty()) {
      next->track_options = options;
      next->track.reserve(static_cast<std::size_t>(device_count));
      for (int d = 0; d < device_count; ++d) {
        next->track.emplace_back(std::in_place, device_async_resource_ref{forwarder(d)}, options);
      }
    }
    publish(std::move(next));
  }

  [[nodiscard]] bool logging() const
  {
    auto const f = current();
    return f && f->log;
  }

  [[nodiscard]] bool tracking() const
  {
    auto const f = current();
    return f && !f->track.empty();
  }

  /**
   * @brief For a child just forked, in its only thread: neither log nor tracking is on. What the
   * parent had in front of the devices is dropped without being released, so it is never flushed,
   * closed or destroyed here: the log's buffered lines are the parent's to write once, the
   * tracking lists the parent's memory, and threads that do not exist in the child may have held
   * its locks. The two locks of this object are made anew for the same reason.
   */
  void forget_after_fork() noexcept
  {
    new (&front_mutex_) std::mutex;
    new (&change_mutex_) std::mutex;
    new (&front_) std::shared_ptr<front>;  // the parent's front is left as it is, unreachable
    on_.store(false, std::memory_order_relaxed);
  }

  /** @brief Writes out what the log buffered. @return false when no log is open. */
  bool flush()
  {
    auto const f = current();
    if (!f || !f->log) { return false; }
    f->log->flush();
    return true;
  }

  /**
   * @brief The live allocations tracked on `device` (-1: every device), oldest first.
   * @throws std::logic_error when tracking is off.
   */
  [[nodiscard]] std::vector<outstanding_entry> outstanding(int device) const
  {
    auto const f = current();
    if (!f || f->track.empty()) {
      detail::throw_error<std::logic_error>(
        "allocator_plugin",
        "tracking is off, so no live allocations are recorded; turn it on first "
        "(rmm_next.configure(track=True), rmm_next_set_tracking or RMM_NEXT_TRACK=1)");
    }
    std::vector<outstanding_entry> list;
    for (std::size_t d = 0; d < f->track.size(); ++d) {
      if (device != detail::every_device && static_cast<std::size_t>(device) != d) { continue; }
      for (tracked_allocation& a : f->track[d]->outstanding()) {
        std::uint64_t const thread = thread_number(a.thread);
        list.push_back({std::move(a), static_cast<int>(d), thread});
      }
    }
    std::stable_sort(list.begin(), list.end(), [](auto const& a, auto const& b) {
      return a.allocation.time < b.allocation.time;
    });
    return list;
  }

 private:
  [[nodiscard]] std::shared_ptr<front> current() const
  {
    std::lock_guard const lock{front_mutex_};
    return front_;
  }

  [[nodiscard]] std::shared_ptr<front> copy_of_current() const
  {
    auto const f = current();
    return f ? std::make_shared<front>(*f) : std::make_shared<front>();
  }

  void publish(std::shared_ptr<front> next)
  {
    if (next->empty()) { next.reset(); }
    std::shared_ptr<front> previous;
    {
      std::lock_guard const lock{front_mutex_};
      previous = std::exchange(front_, next);
      on_.store(front_ != nullptr, std::memory_order_release);
    }
    // `previous` goes here, or with the last call still using it; a log only it held is flushed
    // and closed then.
  }

  device_forwarder* forwarder(int device)
  {
    std::lock_guard const lock{front_mutex_};
    while (forwarders_.size() <= static_cast<std::size_t>(device)) {
      forwarders_.push_back(
        std::make_unique<device_forwarder>(static_cast<int>(forwarders_.size())));
    }
    return forwarders_[static_cast<std::size_t>(device)].get();
  }

  void register_exit_flush()
  {
    static bool const registered = [] {
      // The plugin's state is never destroyed; what the log buffered is written at exit.
      (void)std::atexit(+[] {
        try {
          tracing_state().flush();
        } catch (...) {  // NOLINT(bugprone-empty-catch): nothing to report to at exit
        }
      });
      return true;
    }();
    (void)registered;
  }

  mutable std::mutex front_mutex_;
  std::shared_ptr<front> front_;
  std::atomic<bool> on_{false};
  std::mutex change_mutex_;
  routed_forwarder routed_;
  std::vector<std::unique_ptr<device_forwarder>> forwarders_;  ///< never destroyed: refs to them
};

}  // namespace rmm_next::plugin
