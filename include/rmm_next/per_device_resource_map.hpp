/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/cuda_check.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/error.hpp>

#include <atomic>
#include <concepts>
#include <forward_list>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `per_device_resource_map<Ref>`: one resource ref per CUDA device, owned by whoever needs
 * it (a library, an application) instead of shared process-wide state.
 */

namespace rmm_next {
namespace detail {

template <class T>
inline constexpr bool is_shared_ptr = false;
template <class T>
inline constexpr bool is_shared_ptr<std::shared_ptr<T>> = true;

/** @brief `R` is (or converts to) a `Ref`: the map stores it; its resource is the caller's. */
template <class R, class Ref>
concept converts_to_ref = std::is_convertible_v<R, Ref>;

/** @brief `R` is a resource a `Ref` binds to: the map keeps it alive and binds a `Ref` to it. */
template <class R, class Ref>
concept resource_for = !converts_to_ref<R, Ref> && !is_shared_ptr<R> &&
                       std::is_move_constructible_v<R> && std::is_constructible_v<Ref, R&>;

/** @brief `R` is a `std::shared_ptr` to such a resource: the map keeps that ownership. */
template <class R, class Ref>
concept shared_resource_for = !converts_to_ref<R, Ref> && is_shared_ptr<R> &&
                              std::is_constructible_v<Ref, typename R::element_type&>;

/**
 * @brief A callable that makes the initial resource of a device: `factory(int device)` returns a
 * resource (kept by the map), a `std::shared_ptr` to one (ownership shared with the map), or a
 * `Ref` (the caller keeps its resource alive at least as long as the map).
 */
template <class Factory, class Ref>
concept initial_resource_factory =
  std::copy_constructible<std::decay_t<Factory>> && std::invocable < std::decay_t<Factory>
&, int > &&(converts_to_ref<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref> ||
            resource_for<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref> ||
            shared_resource_for<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref>);

}  // namespace detail

/**
 * @brief A resource ref per CUDA device, with the initial resource of each device made on first
 * use by a factory.
 *
 * A library owns one instead of sharing the process-wide map of `per_device_resource.hpp`:
 * @code
 * rmm_next::per_device_resource_map<rmm_next::device_async_resource_ref> mylib_resources{
 *   [](int device) { return rmm_next::async_managed_resource{rmm_next::current_pool{}, device}; }};
 * @endcode
 *
 * - Lifetime: a ref returned by any member stays valid until the map is destroyed, even after
 *   `set` or `reset` replaced it: what the factory made lives exactly as long as the map, and
 *   every ref that was ever current is kept (one small node per `set`). A resource the caller
 *   passes to `set` must outlive its uses, as with any ref.
 * - Thread safety: every member may be called concurrently. `get` and `get_current` take no lock
 *   once the device's ref exists (an atomic load); `set`, `reset` and the first use of a device,
 *   which calls the factory, are serialized by a mutex.
 * - Device count: given at construction, or read with `cudaGetDeviceCount` when first needed. With
 *   the count given, the explicit-device members make no CUDA call except the factory's, so the
 *   class works in CPU-only code and tests. An id outside [0, count) throws `std::out_of_range`
 *   naming the id and the count, and changes nothing.
 *
 * @tparam Ref A resource-ref type: `device_async_resource_ref`, `device_resource_ref`,
 * `host_device_async_resource_ref`, ...
 */
template <class Ref>
class per_device_resource_map {
 public:
  /** @brief The ref type the map hands out. */
  using ref_type = Ref;

  /**
   * @brief Constructs a map whose devices start with what `factory(device)` makes.
   *
   * `factory` is called at most once per device, from the first member call that needs that
   * device's ref, under the map's write lock (it must not call back into the map). It returns a
   * resource, which the map keeps alive for its own lifetime and binds a `Ref` to; a
   * `std::shared_ptr` to one, whose ownership the map shares; or a `Ref`, whose resource the
   * caller keeps alive. If it throws, the exception reaches the caller and the device stays
   * without a ref; the next use calls the factory again.
   *
   * @param factory `f(int device)` making the initial resource of `device`.
   * @param device_count The number of devices; empty: `cudaGetDeviceCount` when first needed.
   * @throws rmm_next::logic_error if `device_count` is negative.
   */
  template <class Factory>
  requires detail::initial_resource_factory<Factory, Ref>
  explicit per_device_resource_map(Factory&& factory,
                                   std::optional<int> device_count = std::nullopt)
    : make_initial_{bind_factory(std::forward<Factory>(factory))}
  {
    if (device_count) {
      RMM_NEXT_EXPECTS(
        *device_count >= 0,
        "per_device_resource_map: device_count " + std::to_string(*device_count) + " is negative");
      allocate_slots(*device_count);
    }
  }

  per_device_resource_map(per_device_resource_map const&)            = delete;
  per_device_resource_map& operator=(per_device_resource_map const&) = delete;
  per_device_resource_map(per_device_resource_map&&)                 = delete;
  per_device_resource_map& operator=(per_device_resource_map&&)      = delete;

  /** @brief Destroys the map and what its factory made; refs it handed out become invalid. */
  ~per_device_resource_map() = default;

  /**
   * @brief The ref of `device`: the last one `set`, else the factory's.
   * @throws std::out_of_range if `device` is not in [0, device_count()).
   * @throws whatever the factory throws, on the device's first use.
   */
  [[nodiscard]] Ref get(int device) const
  {
    check_device(device);
    if (Ref const* ref = slots_[device].load(std::memory_order_acquire)) { return *ref; }
    std::lock_guard lock{write_mutex_};
    return current_locked(device);
  }

  /**
   * @brief The ref of the current CUDA device. The device is read from the thread's current
   * context (`cuCtxGetCurrent`, cached per thread), the only driver call once the device's ref
   * exists: about 10 ns, where `cudaGetDevice` costs 30 to 40 ns.
   * @throws cuda_error if no usable driver or device exists.
   */
  [[nodiscard]] Ref get_current() const { return get(detail::current_device_fast()); }

  /**
   * @brief Makes `ref` the ref of `device`. The caller keeps its resource alive while the map
   * may hand it out.
   * @return The previous ref (the factory's if none was set; it is made if it did not exist).
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   */
  Ref set(int device, Ref ref)
  {
    check_device(device);
    std::lock_guard lock{write_mutex_};
    Ref previous = current_locked(device);
    // Nodes are never freed while the map lives: a reader may still be copying an old one.
    Ref const& stored = nodes_.emplace_front(node{std::move(ref), nullptr}).ref;
    slots_[device].store(&stored, std::memory_order_release);
    return previous;
  }

  /** @brief `set(current device, ref)`. */
  Ref set_current(Ref ref) { return set(detail::current_device_fast(), std::move(ref)); }

  /**
   * @brief Makes the factory's resource the ref of `device` again.
   * @return The previous ref.
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   */
  Ref reset(int device)
  {
    check_device(device);
    std::lock_guard lock{write_mutex_};
    Ref previous = current_locked(device);
    // Null when the factory was never called: it then runs on the device's next use.
    slots_[device].store(initial_[device], std::memory_order_release);
    return previous;
  }

  /** @brief `reset(current device)`. */
  Ref reset_current() { return reset(detail::current_device_fast()); }

  /**
   * @brief The number of devices the map serves.
   * @throws cuda_error if it was not given and no usable driver or device exists.
   */
  [[nodiscard]] int device_count() const
  {
    int const count = count_.load(std::memory_order_acquire);
    return count >= 0 ? count : discover_device_count();
  }

 private:
  /** @brief A ref and, when the map owns it, the resource it is bound to. */
  struct node {
    Ref ref;
    std::shared_ptr<void> owner;
  };

  template <class Factory>
  static std::function<node(int)> bind_factory(Factory&& factory)
  {
    return [f = std::forward<Factory>(factory)](int device) mutable -> node {
      using result = std::invoke_result_t<std::decay_t<Factory>&, int>;
      if constexpr (detail::converts_to_ref<result, Ref>) {
        return node{Ref(f(device)), nullptr};
      } else if constexpr (detail::shared_resource_for<result, Ref>) {
        result owner = f(device);
        RMM_NEXT_EXPECTS(owner != nullptr,
                         "per_device_resource_map: the factory returned a null "
                         "shared_ptr for device " +
                           std::to_string(device));
        return node{Ref(*owner), std::move(owner)};
      } else {
        auto owner = std::make_shared<result>(f(device));
        return node{Ref(*owner), std::move(owner)};
      }
    };
  }

  void allocate_slots(int count) const
  {
    slots_   = std::make_unique<std::atomic<Ref const*>[]>(static_cast<std::size_t>(count));
    initial_ = std::make_unique<Ref const*[]>(static_cast<std::size_t>(count));
    count_.store(count, std::memory_order_release);
  }

  int discover_device_count() const
  {
    std::lock_guard lock{write_mutex_};
    if (int const count = count_.load(std::memory_order_relaxed); count >= 0) { return count; }
    int const count = detail::device_count();
    allocate_slots(count);
    return count;
  }

  void check_device(int device) const
  {
    if (int const count = device_count(); device < 0 || device >= count) {
      throw std::out_of_range{"rmm_next::per_device_resource_map: device id " +
                              std::to_string(device) + " is out of range [0, " +
                              std::to_string(count) + "): the map serves " + std::to_string(count) +
                              " device(s)"};
    }
  }

  /** @brief The ref of `device`, made by the factory if none exists. Write lock held. */
  Ref const& current_locked(int device) const
  {
    if (Ref const* ref = slots_[device].load(std::memory_order_relaxed)) { return *ref; }
    if (initial_[device] == nullptr) {
      initial_[device] = &nodes_.emplace_front(make_initial_(device)).ref;
    }
    slots_[device].store(initial_[device], std::memory_order_release);
    return *initial_[device];
  }

  std::function<node(int)> make_initial_;
  mutable std::mutex write_mutex_;
  // The state below is made lazily, by readers too, hence mutable. It is written under
  // write_mutex_; slots_ and initial_ are published to lock-free readers by count_'s release.
  mutable std::atomic<int> count_{-1};
  mutable std::unique_ptr<std::atomic<Ref const*>[]> slots_;  ///< the current ref per device
  mutable std::unique_ptr<Ref const*[]> initial_;  ///< the factory's ref per device, once made
  mutable std::forward_list<node> nodes_;          ///< every ref that was ever current; kept
};

}  // namespace rmm_next
