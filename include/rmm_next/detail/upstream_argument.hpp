/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>

#include <concepts>
#include <type_traits>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief `Arg` initializes the `Upstream` of `Adaptor` (an implicit conversion, as for a parameter
 * of type `Upstream`) and is not an `Adaptor` itself: what an adaptor's upstream constructor takes.
 *
 * An adaptor over a resource ref is a resource that the ref binds to. A constructor taking
 * `Upstream` by value would make `Adaptor` constructible from any `Adaptor` through the ref, and
 * asking whether it is (`std::is_move_constructible`, which CCCL's refs ask before binding to it)
 * would ask whether the ref binds to `Adaptor`, that is, again whether `Adaptor` is movable: a
 * constraint that depends on itself (a hard error on CCCL 3.2 and 3.3). The adaptor test comes
 * first, so the conversion is never asked about an adaptor.
 */
template <class Arg, class Adaptor, class Upstream>
concept upstream_argument =
  !std::is_base_of_v<Adaptor, std::remove_cvref_t<Arg>> && std::convertible_to<Arg, Upstream>;

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
