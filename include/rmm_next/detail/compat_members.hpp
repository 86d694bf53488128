/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cccl.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/resource_calls.hpp>

#include <cstddef>
#include <type_traits>

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

/**
 * @brief What a literal `0` or `nullptr` in the stream's place converts from, other than the size
 * type itself (whose calls are CCCL 3.0's synchronous `allocate(bytes, alignment)`).
 */
template <class T>
concept not_a_stream = (std::is_integral_v<std::remove_cvref_t<T>> &&
                        !std::is_same_v<std::remove_cvref_t<T>, std::size_t>) ||
                       std::is_same_v<std::remove_cvref_t<T>, std::nullptr_t>;

template <class T>
inline constexpr bool stream_argument_error = false;

/**
 * @brief What the calls `stream_first` refuses are declared to return: never returned, since
 * their bodies do not compile; a conformance test asks for it to know which overload a call
 * picks.
 */
struct literal_stream_call {
  operator void*() const noexcept { return nullptr; }  // NOLINT(implicit): one error, not two
};

/**
 * @brief `allocate(0, bytes)` and `deallocate(0, ptr, bytes)` as compile errors that say what to
 * pass. Without these, `cuda::stream_ref`, which refuses `int`, would leave the call to another
 * overload: on CCCL 3.0, the synchronous `allocate(bytes, alignment)`.
 *
 * A class brings them in next to its own overloads with `using stream_first::allocate;` (and
 * `deallocate`); `compat_members` does it for the classes that inherit it.
 */
struct stream_first {
  template <class Stream>
    requires not_a_stream<Stream>
  literal_stream_call allocate(Stream, std::size_t, std::size_t = default_alignment)
  {
    static_assert(stream_argument_error<Stream>,
                  "rmm_next: allocate(stream, bytes, alignment) takes the stream first: pass a "
                  "cudaStream_t or cuda::stream_ref, not 0 or nullptr (allocate_sync(bytes, "
                  "alignment) allocates without a stream)");
    return {};
  }

  template <class Stream>
    requires not_a_stream<Stream>
  literal_stream_call deallocate(Stream, void*, std::size_t, std::size_t = default_alignment)
  {
    static_assert(stream_argument_error<Stream>,
                  "rmm_next: deallocate(stream, ptr, bytes, alignment) takes the stream first: "
                  "pass a cudaStream_t or cuda::stream_ref, not 0 or nullptr "
                  "(deallocate_sync(ptr, bytes, alignment) frees without a stream)");
    return {};
  }
};

/**
 * @brief The members every resource and adaptor has beside its own: `stream_first`'s compile
 * errors, and on CCCL before 3.1 (whose concepts require them) CCCL 3.0's member names, each
 * forwarding to its counterpart: `allocate(bytes, alignment)` / `deallocate(ptr, bytes,
 * alignment)` to `allocate_sync` / `deallocate_sync`, and `allocate_async` / `deallocate_async`
 * to the stream-ordered `allocate` / `deallocate`. Each exists only where its counterpart does.
 * CCCL 3.1 and later have none of CCCL 3.0's names, so neither do the classes there.
 *
 * `Derived` inherits it and brings the names into scope next to its own overloads:
 * `using detail::compat_members<Derived>::allocate;` (and `deallocate`).
 */
template <class Derived>
class compat_members : public stream_first {
 public:
  using stream_first::allocate;
  using stream_first::deallocate;

#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  /** @brief Same as `allocate_sync` (CCCL 3.0's name). */
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment = default_alignment)
    requires has_allocate_sync<Derived>
  {
    return self().allocate_sync(bytes, alignment);
  }

  /** @brief Same as `deallocate_sync` (CCCL 3.0's name). */
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept
    requires has_allocate_sync<Derived>
  {
    self().deallocate_sync(ptr, bytes, alignment);
  }

  /** @brief Same as `allocate(stream, bytes, alignment)` (CCCL 3.0's name). */
  [[nodiscard]] void* allocate_async(std::size_t bytes,
                                     std::size_t alignment,
                                     cuda::stream_ref stream)
    requires has_stream_allocate<Derived>
  {
    return self().allocate(stream, bytes, alignment);
  }

  /** @brief Same as `deallocate(stream, ptr, bytes, alignment)` (CCCL 3.0's name). */
  void deallocate_async(void* ptr,
                        std::size_t bytes,
                        std::size_t alignment,
                        cuda::stream_ref stream) noexcept
    requires has_stream_allocate<Derived>
  {
    self().deallocate(stream, ptr, bytes, alignment);
  }

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
#endif
};

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next
