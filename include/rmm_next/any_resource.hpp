/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/resource_ref.hpp>

#include <memory>
#include <type_traits>
#include <utility>

/**
 * @file
 * @brief `any_resource_for<Ref>` and `any_device_resource`: the owning, type-erased counterpart of
 * a ref type, which the owning setters of `per_device_resource_map` and `per_device_resource.hpp`
 * take and return (as RMM 26.06 and later take and return `cuda::mr::any_resource`).
 *
 * - CCCL 3.2 and later: CCCL's own types. `any_resource_for<cuda::mr::resource_ref<P...>>` is
 *   `cuda::mr::any_resource<P...>`, `any_resource_for<cuda::mr::synchronous_resource_ref<P...>>`
 *   is `cuda::mr::any_synchronous_resource<P...>`: a copy copies the resource held, and one made
 *   from a ref holds a copy of the resource the ref refers to.
 * - CCCL 3.0 and 3.1, which have no owning type: `Ref` itself with shared ownership of what it
 *   refers to. It is made from a resource (moved or copied to the heap) or from a ref (then it
 *   only refers, as the ref did); copies share the resource, and the resource never moves, so refs
 *   to it stay valid while any copy lives. It is a `Ref`: it allocates, compares and converts as
 *   one.
 *
 * Other ref types (a user's own) get the second form on every CCCL.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief A `Ref` that shares ownership of the resource it refers to: the owning type of a ref
 * type for which CCCL has none (every ref type before CCCL 3.2).
 */
template <class Ref>
class shared_any_resource : public Ref {
 public:
  /** @brief Takes `resource` (moved to the heap); refs to it stay valid while a copy lives. */
  template <class Resource>
    requires(!std::is_convertible_v<Resource, Ref> && !std::is_base_of_v<Ref, Resource> &&
             std::is_move_constructible_v<Resource> && std::is_constructible_v<Ref, Resource&>)
  shared_any_resource(Resource resource)  // NOLINT(implicit): as cuda::mr::any_resource
    : shared_any_resource{std::make_shared<Resource>(std::move(resource))}
  {
  }

  /** @brief Refers to what `ref` refers to, owning nothing: its owner keeps it alive. */
  shared_any_resource(Ref ref) noexcept : Ref{ref} {}  // NOLINT(implicit)

  // Copies share the resource; a move copies too, so that what was moved from stays usable.
  shared_any_resource(shared_any_resource const&) noexcept            = default;
  shared_any_resource& operator=(shared_any_resource const&) noexcept = default;
  ~shared_any_resource()                                              = default;

 private:
  template <class Resource>
  explicit shared_any_resource(std::shared_ptr<Resource> owner) noexcept
    : Ref{*owner}, owner_{std::move(owner)}
  {
  }

  std::shared_ptr<void> owner_;  ///< null when made from a ref
};

/** @brief The owning type of `Ref` (see the file's documentation). */
template <class Ref>
struct any_resource_of {
  using type = shared_any_resource<Ref>;
};

#if RMM_NEXT_CCCL_ANY_RESOURCE
template <class... Properties>
struct any_resource_of<cuda::mr::resource_ref<Properties...>> {
  using type = cuda::mr::any_resource<Properties...>;
};
template <class... Properties>
struct any_resource_of<cuda::mr::synchronous_resource_ref<Properties...>> {
  using type = cuda::mr::any_synchronous_resource<Properties...>;
};
#endif

/**
 * @brief A `Ref` to the resource `held` holds (not to `held` itself): it stays valid while that
 * resource lives where it is.
 */
template <class Ref, class Owned>
Ref ref_to_held(Owned& held) noexcept
{
  if constexpr (std::is_base_of_v<Ref, Owned>) {
    return static_cast<Ref const&>(held);
  } else {
    return Ref{held};  // CCCL binds a ref made from an any_resource to the resource it holds
  }
}

/** @brief False for a CCCL `any_resource` that holds nothing (default-made or moved from). */
template <class Owned>
bool holds_resource(Owned const& held) noexcept
{
  if constexpr (requires { held.has_value(); }) {
    return held.has_value();
  } else {
    return true;
  }
}

}  // namespace detail

/**
 * @brief The owning, type-erased counterpart of the ref type `Ref`: `cuda::mr::any_resource<P...>`
 * for `cuda::mr::resource_ref<P...>` (CCCL 3.2 and later), ... (see the file's documentation).
 */
template <class Ref>
using any_resource_for = typename detail::any_resource_of<Ref>::type;

/**
 * @brief The owning counterpart of `device_async_resource_ref`:
 * `cuda::mr::any_resource<cuda::mr::device_accessible>` with CCCL 3.2 and later, the type RMM
 * 26.06 and later pass to and return from `set_current_device_resource`.
 */
using any_device_resource = any_resource_for<device_async_resource_ref>;

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
