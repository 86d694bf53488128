/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/any_resource.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/left_right_value.hpp>
#include <rmm_next/detail/reader_indicators.hpp>
#include <rmm_next/detail/stand_in_resource.hpp>
#include <rmm_next/detail/thread_ref_cache.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/error_macros.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `per_device_resource_map<Ref>`: one resource ref per CUDA device, owned by whoever needs
 * it (a library, an application) instead of shared process-wide state.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
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
  std::copy_constructible<std::decay_t<Factory>> && std::invocable<std::decay_t<Factory>&, int> &&
  (converts_to_ref<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref> ||
   resource_for<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref> ||
   shared_resource_for<std::invoke_result_t<std::decay_t<Factory>&, int>, Ref>);

/**
 * @brief `R` is what an owning `set` of a map of `Ref`s takes over: its owning type
 * (`any_resource_for<Ref>`, copied from an lvalue), or a resource or ref it is made from that is
 * not an lvalue (an lvalue resource or ref goes to the ref overload, which refers to it).
 */
template <class R, class Ref>
concept handed_over = std::is_same_v<std::remove_cvref_t<R>, any_resource_for<Ref>> ||
                      (!std::is_lvalue_reference_v<R> && !converts_to_ref<R, Ref> &&
                       std::is_constructible_v<any_resource_for<Ref>, R>);

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
 * - Lifetime: what the factory made lives exactly as long as the map, so a ref to it stays valid
 *   until the map is destroyed, even after `set` or `reset` replaced it. Refs are handed out by
 *   value; a resource the caller passes to `set` as a ref must outlive its uses, as with any ref.
 * - Owning `set`: `set(device, any_resource_for<Ref>)` hands a resource over, as RMM 26.06 and
 *   later's `set_per_device_resource` does. The map keeps it alive while it is the device's
 *   resource, and moves it out, owned, to the caller of the owning `set` or `release` that
 *   replaces it. A ref setter or `reset` that replaces it leaves it with the map, which keeps it
 *   until the device's next owning `set` or `release` destroys it (or the map is destroyed): the
 *   ref that setter returns stays valid until then, and setting it back makes the resource the
 *   map's current one again.
 * - Refs to a handed-over resource are valid while the map holds it. Once it is moved out, refs
 *   read before reach it only where the move left it in place: always before CCCL 3.2 (a shared
 *   heap holder) and, with CCCL's `any_resource`, for a resource larger than three pointers, which
 *   it keeps on the heap (rmm-next's async resources are); then they stay valid while the returned
 *   resource lives. A small resource (a CCCL `shared_resource`, a ref) moves with it: take new
 *   refs from what was returned, and do not replace a resource that other threads may still be
 *   allocating through. Code that keeps a resource beyond a call keeps an owning copy, as RMM's
 *   `device_buffer` does (with CCCL 3.2 and later, an `any_resource_for<Ref>` made from the ref
 *   copies the resource).
 * - Memory: constant per device, whatever the number of `set` and `reset` calls (the map holds at
 *   most one handed-over resource per device).
 * - Thread safety: every member may be called concurrently. `get` and `get_current` take no lock
 *   once the device's ref exists; `set`, `reset` and the first use of a device, which calls the
 *   factory, are serialized by a mutex. Reads and writes meet in a Left-Right scheme: each device
 *   has two copies of its ref, readers copy the current one while announcing themselves on
 *   striped counters, and a writer fills the other copy, switches, and waits until no reader
 *   still copies the old one. Each thread also keeps the refs it read last, with the map's
 *   version: while no `set` or `reset` happened, a read is an atomic load and a copy.
 * - Device count: given at construction, or read with `cudaGetDeviceCount` when first needed. With
 *   the count given, the explicit-device members make no CUDA call except the factory's, so the
 *   class works in CPU-only code and tests. An id outside [0, count) throws `std::out_of_range`
 *   naming the id and the count, and changes nothing.
 *
 * @tparam Ref A resource-ref type: `device_async_resource_ref`, `device_resource_ref`,
 * `host_device_async_resource_ref`, ...
 */
namespace detail {
struct per_device_resource_map_access;
}  // namespace detail

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
      allocate_devices(*device_count);
    }
  }

  per_device_resource_map(per_device_resource_map const&)            = delete;
  per_device_resource_map& operator=(per_device_resource_map const&) = delete;
  per_device_resource_map(per_device_resource_map&&)                 = delete;
  per_device_resource_map& operator=(per_device_resource_map&&)      = delete;

  /** @brief Destroys the map and what its factory made; refs to that become invalid. */
  ~per_device_resource_map() = default;

  /**
   * @brief The ref of `device`: the last one `set`, else the factory's.
   * @throws std::out_of_range if `device` is not in [0, device_count()).
   * @throws whatever the factory throws, on the device's first use.
   */
  [[nodiscard]] Ref get(int device) const { return get(device, "per_device_resource_map::get"); }

  /**
   * @brief The ref of the current CUDA device. The device is read from the thread's current
   * context (`cuCtxGetCurrent`, cached per thread), the only driver call once the device's ref
   * exists: about a fifth of a `cudaGetDevice`, or less.
   * @throws cuda_error if no usable driver or device exists.
   */
  [[nodiscard]] Ref get_current() const
  {
    return get_current("per_device_resource_map::get_current");
  }

  /**
   * @brief Makes `ref` the ref of `device`. The caller keeps its resource alive while the map
   * may hand it out.
   *
   * Never runs the factory. When the device has had no ref yet (nothing set, nothing read),
   * the previous ref is the factory's resource *to be*: a ref to a stand-in the map owns, which
   * makes the factory's resource on its first allocation and forwards to it. Setting that ref
   * back (`set(device, previous)`) is `reset(device)`. (For a `Ref` the stand-in cannot bind to,
   * one with other properties than host and device accessibility, the factory's resource is
   * made instead.)
   *
   * @return The previous ref.
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   */
  Ref set(int device, Ref ref)
  {
    return set(device, std::move(ref), "per_device_resource_map::set");
  }

  /** @brief `set(current device, ref)`. */
  Ref set_current(Ref ref)
  {
    return set_current(std::move(ref), "per_device_resource_map::set_current");
  }

  /** @brief The owning type the owning members take and return (`any_resource_for<Ref>`). */
  using any_resource_type = any_resource_for<Ref>;

  /**
   * @brief Hands `resource` over: the map keeps it alive while it is the device's resource (see
   * Lifetime above). Takes an `any_resource_type`, or a resource or ref that is not an lvalue
   * (an lvalue resource goes to `set(device, Ref)`, which only refers to it).
   *
   * Never runs the factory. Setting back what a `set` or `release` returned for a device that had
   * no ref yet (a holder of the stand-in described at `set(device, Ref)`) is `reset(device)`.
   *
   * @return The previous resource, owned by the caller: the one an earlier owning `set` handed
   * over, moved out of the map; otherwise an `any_resource_type` made from the previous ref
   * (with CCCL 3.2 and later a copy of the resource it refers to; before, that ref).
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   * @throws rmm_next::logic_error if `resource` holds no resource (a moved-from any_resource);
   * nothing changes.
   */
  template <class Resource>
    requires detail::handed_over<Resource, Ref>
  any_resource_type set(int device, Resource&& resource)
  {
    return set_owned(
      device, any_resource_type(std::forward<Resource>(resource)), "per_device_resource_map::set");
  }

  /** @brief The owning `set(current device, resource)`. */
  template <class Resource>
    requires detail::handed_over<Resource, Ref>
  any_resource_type set_current(Resource&& resource)
  {
    constexpr std::string_view what = "per_device_resource_map::set_current";
    return set_owned(
      detail::current_device(what), any_resource_type(std::forward<Resource>(resource)), what);
  }

  /**
   * @brief The owning `reset(device)`: makes the factory's resource the device's again and hands
   * the previous resource back, as the owning `set` does (RMM's `reset_per_device_resource`).
   * Never runs the factory.
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   */
  any_resource_type release(int device)
  {
    return release(device, "per_device_resource_map::release");
  }

  /** @brief `release(current device)`. */
  any_resource_type release_current()
  {
    constexpr std::string_view what = "per_device_resource_map::release_current";
    return release(detail::current_device(what), what);
  }

  /**
   * @brief Makes the factory's resource the ref of `device` again. Never runs the factory: a
   * device whose resource was not made yet gets it on its next use.
   * @return The previous ref (see `set`).
   * @throws std::out_of_range if `device` is not in [0, device_count()); nothing changes.
   */
  Ref reset(int device) { return reset(device, "per_device_resource_map::reset"); }

  /** @brief `reset(current device)`. */
  Ref reset_current() { return reset_current("per_device_resource_map::reset_current"); }

  /**
   * @brief The number of devices the map serves.
   * @throws cuda_error if it was not given and no usable driver or device exists.
   */
  [[nodiscard]] int device_count() const
  {
    return device_count("per_device_resource_map::device_count");
  }

 private:
  // The members above, with `what`: the user's call that errors name (the free functions of
  // per_device_resource.hpp name themselves through detail::per_device_resource_map_access).
  friend struct detail::per_device_resource_map_access;

  [[nodiscard]] Ref get(int device, std::string_view what) const
  {
    // The path of a thread that read this device before and saw no write since: two loads, two
    // comparisons and a copy, no read-modify-write. Only valid devices are ever cached, so a hit
    // also proves `device` in range.
    std::uint64_t const version           = version_.load(std::memory_order_acquire);
    detail::cached_ref<Ref> const& cached = detail::thread_cached_ref<Ref>(id_, device);
    if (cached.holds(id_, device, version)) { return cached.ref(); }
    return read(device, what);
  }

  [[nodiscard]] Ref get_current(std::string_view what) const
  {
    // A thread keeps the ref it read last for its current context: while the context and the
    // map's version stay the same, the read is one driver call, an atomic load and a copy.
    CUcontext const context          = detail::current_context_or_null();
    std::uint64_t const version      = version_.load(std::memory_order_acquire);
    detail::current_ref<Ref>& cached = detail::thread_current_ref<Ref>();
    if (context != nullptr && cached.context == context &&
        cached.entry.holds(id_, cached.entry.device, version)) {
      return cached.entry.ref();
    }
    int const known  = detail::device_of_current_context(context);
    int const device = detail::is_device_id(known) ? known : detail::current_device(what);
    Ref ref          = get(device, what);  // reads the version again: at least as new as `version`
    if (detail::is_device_id(known)) {
      cached.entry.store(id_, device, version, ref);
      cached.context = context;
    }
    return ref;
  }

  Ref set(int device, Ref ref, std::string_view what)
  {
    check_device(device, what);
    std::lock_guard lock{write_mutex_};
    Ref previous        = previous_locked(device);
    device_state& state = devices_[device];
    if (is_stand_in(device, ref)) {
      restore_initial_locked(device);
    } else if (state.owned && ref == state.owned->ref) {
      // The handed-over resource set back by its ref: the map's own copy is current again.
      publish(device, &state.owned->ref);
      state.owned_current = true;
    } else {
      publish(device, &ref);
      state.owned_current = false;
    }
    return previous;
  }

  any_resource_type set_owned(int device, any_resource_type resource, std::string_view what)
  {
    check_device(device, what);
    if (!detail::holds_resource(resource)) {
      detail::throw_error<logic_error>(what,
                                       "the resource is empty (a moved-from any_resource); pass "
                                       "one that holds a resource, or call reset");
    }
    // Made before the lock: if it throws, nothing changed.
    auto next = std::make_unique<owned_node>(std::move(resource));
    std::lock_guard lock{write_mutex_};
    return replace_owned_locked(device, std::move(next));
  }

  any_resource_type release(int device, std::string_view what)
  {
    check_device(device, what);
    std::lock_guard lock{write_mutex_};
    return replace_owned_locked(device, nullptr);
  }

  Ref set_current(Ref ref, std::string_view what)
  {
    return set(detail::current_device(what), std::move(ref), what);
  }

  Ref reset(int device, std::string_view what)
  {
    check_device(device, what);
    std::lock_guard lock{write_mutex_};
    Ref previous = previous_locked(device);
    restore_initial_locked(device);
    return previous;
  }

  /** @brief A handed-over resource and the ref to it that readers copy. */
  struct owned_node {
    explicit owned_node(any_resource_type r)
      : resource{std::move(r)}, ref{detail::ref_to_held<Ref>(resource)}
    {
    }
    any_resource_type resource;
    Ref ref;
  };

  /**
   * @brief The owning `set` (`next`) and `release` (null): makes `next`, or the factory's
   * resource, current, and returns the previous resource owned (see `set`). Write lock held.
   */
  any_resource_type replace_owned_locked(int device, std::unique_ptr<owned_node> next)
  {
    device_state& state     = devices_[device];
    bool const held_current = state.owned_current;
    // Made before anything changes (it may copy a resource, or run the factory when `Ref` has no
    // stand-in): if it throws, nothing changed.
    std::optional<any_resource_type> previous;
    if (!held_current) { previous.emplace(previous_locked(device)); }
    if (next && is_stand_in(device, next->ref)) { next.reset(); }  // setting the stand-in back
    if (next) {
      publish(device, &next->ref);
    } else {
      restore_initial_locked(device);
    }
    std::unique_ptr<owned_node> held = std::exchange(state.owned, std::move(next));
    state.owned_current              = state.owned != nullptr;
    if (held_current) { return std::move(held->resource); }
    return *std::move(previous);  // a resource held but replaced by a ref setter dies here
  }

  Ref reset_current(std::string_view what) { return reset(detail::current_device(what), what); }

  [[nodiscard]] int device_count(std::string_view what) const
  {
    int const count = count_.load(std::memory_order_acquire);
    return count != detail::unknown_device_count ? count : discover_device_count(what);
  }

  /** @brief A ref and, when the map owns it, the resource it is bound to. */
  struct node {
    Ref ref;
    std::shared_ptr<void> owner;
  };

  using stand_in = detail::stand_in_resource<Ref, per_device_resource_map>;
  friend stand_in;

  /** @brief What the map keeps per device: constant in size. */
  struct alignas(64) device_state {
    detail::left_right_value<Ref> current;   ///< what readers read; none before the first use
    std::atomic<node const*> made{nullptr};  ///< `initial` once the factory made it
    std::optional<node> initial;        ///< what the factory made (written once, under the lock)
    std::optional<stand_in> deferred;   ///< stands in for `initial` before it is made
    std::unique_ptr<owned_node> owned;  ///< the last handed-over resource, while the map keeps it
    bool owned_current{false};          ///< `owned` is the current one (under the lock)
  };

  /** @brief Whether a `Ref` binds to the stand-in (else `set` makes the factory's resource). */
  static constexpr bool has_stand_in = std::is_constructible_v<Ref, stand_in&>;

  /**
   * @brief The read behind a cache miss: the current copy, under a reader announcement; the
   * factory's resource, made under the write lock, on the device's first use.
   */
  [[gnu::noinline]] Ref read(int device, std::string_view what) const
  {
    check_device(device, what);
    std::uint64_t version  = version_.load(std::memory_order_acquire);
    std::optional<Ref> ref = devices_[device].current.read(readers_);
    if (!ref) {
      std::lock_guard lock{write_mutex_};
      ref.emplace(current_locked(device));
      version = version_.load(std::memory_order_relaxed);
    }
    // `version` was read before the copy: the ref is at least as new, and a newer one makes the
    // next read miss again.
    detail::thread_cached_ref<Ref>(id_, device).store(id_, device, version, *ref);
    return *std::move(ref);
  }

  /** @brief Makes `*ref` the device's current ref (null: none, the next read runs the factory).
   * Write lock held. */
  void publish(int device, Ref const* ref) const
  {
    devices_[device].current.publish(ref, version_, readers_);
  }

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

  void allocate_devices(int count) const
  {
    devices_ = std::make_unique<device_state[]>(static_cast<std::size_t>(count));
    for (int d = 0; d < count; ++d) {
      devices_[d].deferred.emplace(this, d);
    }
    count_.store(count, std::memory_order_release);
  }

  int discover_device_count(std::string_view what) const
  {
    std::lock_guard lock{write_mutex_};
    if (int const count = count_.load(std::memory_order_relaxed);
        count != detail::unknown_device_count) {
      return count;
    }
    int const count = detail::device_count(what);
    allocate_devices(count);
    return count;
  }

  void check_device(int device, std::string_view what) const
  {
    (void)detail::checked_device(device, device_count(what), what);
  }

  /** @brief The ref of `device`, made by the factory if none exists. Write lock held. */
  Ref current_locked(int device) const
  {
    if (Ref const* current = devices_[device].current.current()) { return *current; }
    return made_locked(device).ref;
  }

  /** @brief What the factory made for `device`, made now if needed. Write lock held. */
  node const& made_locked(int device) const
  {
    device_state& state = devices_[device];
    if (!state.initial) {
      state.initial.emplace(make_initial_(device));
      state.made.store(&*state.initial, std::memory_order_release);
      if (state.current.current() == nullptr) { publish(device, &state.initial->ref); }
    }
    return *state.initial;
  }

  /** @brief The factory's ref of `device`, made now if needed (for the stand-in). */
  Ref initial_ref(int device) const
  {
    if (Ref const* made = made_ref(device)) { return *made; }
    std::lock_guard lock{write_mutex_};
    return made_locked(device).ref;
  }

  /** @brief The factory's ref of `device`, null while not made (for the stand-in). */
  Ref const* made_ref(int device) const noexcept
  {
    node const* made = devices_[device].made.load(std::memory_order_acquire);
    return made != nullptr ? &made->ref : nullptr;
  }

  /**
   * @brief What `set` and `reset` return: the current ref, or, when the device has none yet,
   * the stand-in for the factory's. Write lock held.
   */
  Ref previous_locked(int device) const
  {
    device_state& state = devices_[device];
    if (Ref const* current = state.current.current()) { return *current; }
    if constexpr (has_stand_in) {
      return Ref{*state.deferred};
    } else {
      return made_locked(device).ref;
    }
  }

  /** @brief Whether `ref` is the stand-in of `device`. */
  bool is_stand_in(int device, Ref const& ref) const
  {
    if constexpr (has_stand_in) {
      return ref == Ref{*devices_[device].deferred};
    } else {
      return false;
    }
  }

  /** @brief Makes the factory's ref current again, or none while it is not made. Lock held. */
  void restore_initial_locked(int device) const
  {
    device_state& state = devices_[device];
    publish(device, state.initial ? &state.initial->ref : nullptr);
    state.owned_current = false;
  }

  // What every read loads, on a cache line of its own: written only by `set` and `reset`. The
  // number keys the thread's cached refs (detail/thread_ref_cache.hpp).
  alignas(64) std::uint64_t const id_{detail::next_map_id()};
  mutable std::atomic<std::uint64_t> version_{0};  ///< bumped by every publication, any device
  alignas(64) std::function<node(int)> make_initial_;
  mutable std::mutex write_mutex_;
  mutable detail::reader_indicators readers_;
  // Made lazily, by readers too, hence mutable: written under write_mutex_ and published to
  // lock-free readers by count_'s release.
  mutable std::atomic<int> count_{detail::unknown_device_count};
  mutable std::unique_ptr<device_state[]> devices_;
};

namespace detail {

/**
 * @brief The map's members with `what`, the user's call that their errors name: for the free
 * functions of per_device_resource.hpp, which name themselves.
 */
struct per_device_resource_map_access {
  template <class Map>
  static auto get(Map const& map, int device, std::string_view what)
  {
    return map.get(device, what);
  }
  /**
   * @brief The map's version: it changes with every ref the map publishes, for any device. A
   * caller that found a device's ref to be what it expected at version `v` knows it still is
   * while the version reads `v` (read before the ref, so that a change in between is seen).
   */
  template <class Map>
  static std::uint64_t version(Map const& map) noexcept
  {
    return map.version_.load(std::memory_order_acquire);
  }
  template <class Map>
  static auto get_current(Map const& map, std::string_view what)
  {
    return map.get_current(what);
  }
  template <class Map, class Ref>
  static auto set(Map& map, int device, Ref ref, std::string_view what)
  {
    return map.set(device, std::move(ref), what);
  }
  template <class Map, class Ref>
  static auto set_current(Map& map, Ref ref, std::string_view what)
  {
    return map.set_current(std::move(ref), what);
  }
  template <class Map>
  static auto reset(Map& map, int device, std::string_view what)
  {
    return map.reset(device, what);
  }
  template <class Map>
  static auto reset_current(Map& map, std::string_view what)
  {
    return map.reset_current(what);
  }
  template <class Map>
  static auto set_owned(Map& map,
                        int device,
                        typename Map::any_resource_type r,
                        std::string_view what)
  {
    return map.set_owned(device, std::move(r), what);
  }
  template <class Map>
  static auto set_current_owned(Map& map, typename Map::any_resource_type r, std::string_view what)
  {
    return map.set_owned(current_device(what), std::move(r), what);
  }
  template <class Map>
  static auto release(Map& map, int device, std::string_view what)
  {
    return map.release(device, what);
  }
  template <class Map>
  static auto release_current(Map& map, std::string_view what)
  {
    return map.release(current_device(what), what);
  }
};

}  // namespace detail

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
