/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/per_device_resource_map.hpp>
#include <rmm_next/resource_ref.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `resource_context<Tag, Ref>`: a library's memory per kind of allocation (temporaries,
 * results, ...) and per device, with defaults the library chooses and overrides its users make.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/** @brief `Tag::count_` when the enum has that enumerator, else 0 (no count declared). */
template <class Tag>
constexpr std::size_t count_enumerator() noexcept
{
  if constexpr (requires { Tag::count_; }) {
    return static_cast<std::size_t>(Tag::count_);
  } else {
    return 0;
  }
}

}  // namespace detail

/**
 * @brief The number of kinds of allocation the enum `Tag` names; its enumerators must be the
 * values 0, 1, ..., count - 1.
 *
 * Read from a last enumerator `count_` when the enum has one (it then stays right as kinds are
 * added). Otherwise specialize it, at namespace scope outside the library's namespace:
 * @code
 * template <>
 * inline constexpr std::size_t rmm_next::allocation_kind_count<mylib::kind> = 3;
 * @endcode
 */
template <class Tag>
inline constexpr std::size_t allocation_kind_count = detail::count_enumerator<Tag>();

/**
 * @brief A default for `resource_context` kinds that should use what the application chose
 * process-wide: `get_per_device_resource_ref(device)`, read once, when the kind is first used on
 * that device. A later change of the process-wide ref is not seen (`reset` returns to the ref read
 * then); to follow it, `set` the kind too.
 */
struct use_process_wide_resource {
  /**
   * @brief The process-wide ref of `device`.
   * @throws std::out_of_range if `device` is not a visible device.
   * @throws cuda_error if no usable CUDA driver or device exists.
   */
  device_async_resource_ref operator()(int device) const
  {
    return get_per_device_resource_ref(device);
  }
};

/**
 * @brief A library's resource refs per kind of allocation and per device: one
 * `per_device_resource_map<Ref>` per enumerator of `Tag`, each with the library's default.
 *
 * The library names its kinds of allocation in an enum, makes one context (in a function-local
 * static) with a default per kind, and asks it for memory by kind where it allocates:
 * @code
 * enum class kind { temporaries, results, count_ };
 *
 * rmm_next::resource_context<kind>& resources()
 * {
 *   static rmm_next::resource_context<kind> context{
 *     [](int device) { return rmm_next::async_device_resource{device}; },  // kind::temporaries
 *     rmm_next::use_process_wide_resource{}};                               // kind::results
 *   return context;
 * }
 *
 * auto memory = resources().get(kind::temporaries);  // the current device's
 * void* scratch = memory.allocate(stream, bytes, rmm_next::default_alignment);
 * @endcode
 * Its users override any kind on any device with `set` (and undo it with `set` of the previous
 * ref, or `reset`); the other kinds, devices and libraries do not change.
 *
 * Every member behaves as the same member of the kind's `per_device_resource_map` (`map(kind)`):
 * - Lifetime: what a default made lives as long as the context; a ref handed out stays valid until
 *   the context is destroyed, even after `set` or `reset` replaced it. A resource passed to `set`
 *   is the caller's, who keeps it alive while the context may hand it out.
 * - Thread safety: every member may be called concurrently; `get` takes no lock once the kind's
 *   ref of the device exists.
 * - Errors: a `kind` outside [0, kind_count) throws `std::out_of_range` naming its value; a
 *   device id outside [0, device_count()) throws `std::out_of_range` naming the id and the count.
 *   Nothing changes then.
 * - `set` and `reset` never make a kind's default: before it exists they return a stand-in for it
 *   (see `per_device_resource_map::set`), which makes it when used and is a `reset` when set back.
 *
 * One `Ref` type for all kinds: kinds that need other properties (pinned staging memory the host
 * writes needs `host_device_async_resource_ref`) go in a second enum and a second context, so that
 * the type of each ref says what the library may do with the memory.
 *
 * @tparam Tag The library's enum of allocation kinds (see `allocation_kind_count`).
 * @tparam Ref The ref type every kind hands out.
 */
template <class Tag, class Ref = device_async_resource_ref>
class resource_context {
  static_assert(std::is_enum_v<Tag>, "resource_context<Tag, Ref>: Tag must be an enum");
  static_assert(allocation_kind_count<Tag> > 0,
                "resource_context<Tag, Ref>: end Tag with an enumerator count_, or specialize "
                "rmm_next::allocation_kind_count<Tag> with the number of kinds");

 public:
  /** @brief The library's enum of allocation kinds. */
  using kind_type = Tag;
  /** @brief The ref type every kind hands out. */
  using ref_type = Ref;
  /** @brief The map that holds one kind's refs. */
  using map_type = per_device_resource_map<Ref>;
  /** @brief The number of kinds (`allocation_kind_count<Tag>`). */
  static constexpr std::size_t kind_count = allocation_kind_count<Tag>;

  /**
   * @brief Constructs a context with one default per kind, in the order of the enum's values.
   *
   * Each default is a factory as `per_device_resource_map` takes: `f(int device)` returning a
   * resource (kept alive by the context), a `std::shared_ptr` to one (ownership shared; two kinds
   * may share a resource this way), or a `Ref` (its resource outlives the context), e.g.
   * `use_process_wide_resource{}`. It runs on the kind's first use on a device.
   *
   * @param defaults One factory per kind: the first for the kind of value 0, and so on.
   */
  template <class... Factories>
    requires(sizeof...(Factories) == kind_count &&
             (detail::initial_resource_factory<Factories, Ref> && ...))
  explicit resource_context(Factories&&... defaults)
    : resource_context(std::nullopt, std::forward<Factories>(defaults)...)
  {
  }

  /**
   * @brief As above, with the number of devices given (none: `cudaGetDeviceCount` when first
   * needed). With the count given, explicit-device members on refs that were `set` make no CUDA
   * call, so a context works in CPU-only code and tests.
   * @throws rmm_next::logic_error if `device_count` is negative.
   */
  template <class... Factories>
    requires(sizeof...(Factories) == kind_count &&
             (detail::initial_resource_factory<Factories, Ref> && ...))
  resource_context(std::optional<int> device_count, Factories&&... defaults)
    : maps_{{map_type{std::forward<Factories>(defaults), device_count}...}}
  {
  }

  resource_context(resource_context const&)            = delete;
  resource_context& operator=(resource_context const&) = delete;
  resource_context(resource_context&&)                 = delete;
  resource_context& operator=(resource_context&&)      = delete;

  /** @brief Destroys the context and what its defaults made; refs it handed out become invalid. */
  ~resource_context() = default;

  /**
   * @brief The ref of `kind` on the current CUDA device (`cudaGetDevice`).
   * @throws std::out_of_range if `kind` is not in [0, kind_count).
   * @throws cuda_error if no usable CUDA driver or device exists.
   */
  [[nodiscard]] Ref get(Tag kind) const { return map(kind).get_current(); }

  /**
   * @brief The ref of `kind` on `device`: the last one `set`, else the kind's default.
   * @throws std::out_of_range if `kind` is not in [0, kind_count) or `device` not in
   * [0, device_count()).
   * @throws whatever the kind's default throws, on its first use on `device`.
   */
  [[nodiscard]] Ref get(Tag kind, int device) const { return map(kind).get(device); }

  /**
   * @brief Makes `ref` the ref of `kind` on `device`. The caller keeps its resource alive while
   * the context may hand it out.
   * @return The previous ref.
   * @throws std::out_of_range if `kind` or `device` is out of range; nothing changes.
   */
  Ref set(Tag kind, int device, Ref ref) { return map(kind).set(device, std::move(ref)); }

  /** @brief `set(kind, current device, ref)`. */
  Ref set_current(Tag kind, Ref ref) { return map(kind).set_current(std::move(ref)); }

  /**
   * @brief Makes the kind's default the ref of `kind` on `device` again.
   * @return The previous ref.
   * @throws std::out_of_range if `kind` or `device` is out of range; nothing changes.
   */
  Ref reset(Tag kind, int device) { return map(kind).reset(device); }

  /** @brief `reset(kind, current device)`. */
  Ref reset_current(Tag kind) { return map(kind).reset_current(); }

  /**
   * @brief The map that holds the refs of `kind`: pass it where a `per_device_resource_map` is
   * expected. It lives as long as the context.
   * @throws std::out_of_range if `kind` is not in [0, kind_count).
   */
  [[nodiscard]] map_type& map(Tag kind) { return maps_[index(kind)]; }

  /** @copydoc map(Tag) */
  [[nodiscard]] map_type const& map(Tag kind) const { return maps_[index(kind)]; }

  /**
   * @brief The number of devices the context serves.
   * @throws cuda_error if it was not given and no usable driver or device exists.
   */
  [[nodiscard]] int device_count() const { return maps_.front().device_count(); }

 private:
  static std::size_t index(Tag kind)
  {
    // The widest integer of the enum's signedness: any underlying type (char, bool) converts.
    using wide = std::
      conditional_t<std::is_signed_v<std::underlying_type_t<Tag>>, long long, unsigned long long>;
    auto const value = static_cast<wide>(kind);
    if (std::cmp_less(value, 0) || std::cmp_greater_equal(value, kind_count)) {
      detail::throw_error<std::out_of_range>(
        "resource_context",
        "allocation kind " + std::to_string(value) + " is out of range [0, " +
          std::to_string(kind_count) + "): the context serves " + std::to_string(kind_count) +
          " kind(s)");
    }
    return static_cast<std::size_t>(value);
  }

  std::array<map_type, kind_count> maps_;
};

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
