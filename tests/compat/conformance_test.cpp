/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// What every CCCL of the compile matrix (.ci/compile_matrix.sh) must accept, built and run there
// against each of them and here against the toolkit's: each resource and adaptor satisfies the
// cuda::mr concepts, is copyable and nothrow-movable, and binds to each ref type its properties
// allow, adaptors over refs included (a ref that binds to an adaptor over a ref asks whether the
// adaptor is movable; CCCL 3.2 and 3.3 rejected that while the adaptor's upstream constructor
// accepted the adaptor itself). With CCCL 3.2 and later, cuda::mr::any_resource holds them too.
// Runs without a GPU: the adaptors sit over host memory (tests/support/fake_resource.hpp).

#include "support/fake_resource.hpp"

#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/rmm_next.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace rmm_next::test {
namespace {

// ---- Compile time ------------------------------------------------------------------------------

/** `R` satisfies the concepts of `Properties`, is a regular handle and binds to `Refs`. */
template <class R, class... Properties>
inline constexpr bool stream_ordered_handle =
  detail::stream_ordered_resource_with<R, Properties...> &&
  detail::synchronous_resource_with<R, Properties...> && std::is_copy_constructible_v<R> &&
  std::is_nothrow_move_constructible_v<R> && std::is_copy_assignable_v<R>;

template <class R>
inline constexpr bool binds_to_device_refs =
  std::is_constructible_v<device_async_resource_ref, R&> &&
  std::is_constructible_v<device_resource_ref, R&>;

template <class R>
inline constexpr bool binds_to_every_ref =
  binds_to_device_refs<R> && std::is_constructible_v<host_device_async_resource_ref, R&> &&
  std::is_constructible_v<host_device_resource_ref, R&> &&
  std::is_constructible_v<host_async_resource_ref, R&> &&
  std::is_constructible_v<host_resource_ref, R&>;

using device_mr = cuda::mr::device_accessible;
using host_mr   = cuda::mr::host_accessible;

// The resources.
static_assert(stream_ordered_handle<async_device_resource, device_mr>);
static_assert(binds_to_device_refs<async_device_resource>);
static_assert(!std::is_constructible_v<host_async_resource_ref, async_device_resource&>);
static_assert(stream_ordered_handle<async_managed_resource, device_mr, host_mr>);
static_assert(binds_to_every_ref<async_managed_resource>);
static_assert(stream_ordered_handle<async_pinned_resource, device_mr, host_mr>);
static_assert(binds_to_every_ref<async_pinned_resource>);

// The adaptors over a resource and over a ref, refs of either kind.
static_assert(stream_ordered_handle<thread_cache_adaptor<async_device_resource>, device_mr>);
static_assert(binds_to_device_refs<thread_cache_adaptor<async_device_resource>>);
static_assert(stream_ordered_handle<thread_cache_adaptor<device_async_resource_ref>, device_mr>);
static_assert(std::is_constructible_v<device_async_resource_ref,
                                      thread_cache_adaptor<device_async_resource_ref>&>);
static_assert(
  stream_ordered_handle<thread_cache_adaptor<host_device_async_resource_ref>, device_mr, host_mr>);
static_assert(std::is_constructible_v<host_async_resource_ref,
                                      thread_cache_adaptor<host_device_async_resource_ref>&>);
static_assert(stream_ordered_handle<statistics_adaptor<async_pinned_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<statistics_adaptor<async_pinned_resource>>);
static_assert(std::is_constructible_v<device_async_resource_ref,
                                      statistics_adaptor<device_async_resource_ref>&>);
static_assert(
  std::is_constructible_v<device_resource_ref, statistics_adaptor<device_resource_ref>&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      statistics_adaptor<host_device_async_resource_ref>&>);

// Adaptors over refs to adaptors, and an adaptor over another adaptor.
static_assert(std::is_constructible_v<statistics_adaptor<device_async_resource_ref>,
                                      thread_cache_adaptor<device_async_resource_ref>&>);
static_assert(std::is_constructible_v<thread_cache_adaptor<device_async_resource_ref>,
                                      statistics_adaptor<device_async_resource_ref>&>);
static_assert(
  binds_to_device_refs<statistics_adaptor<thread_cache_adaptor<async_device_resource>>>);

// The tracking and logging adaptors: over resources, refs and the thread cache.
static_assert(stream_ordered_handle<tracking_adaptor<async_pinned_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<tracking_adaptor<async_pinned_resource>>);
static_assert(binds_to_device_refs<tracking_adaptor<thread_cache_adaptor<async_device_resource>>>);
static_assert(std::is_constructible_v<device_resource_ref, tracking_adaptor<device_resource_ref>&>);
static_assert(stream_ordered_handle<logging_adaptor<async_pinned_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<logging_adaptor<async_pinned_resource>>);
static_assert(binds_to_device_refs<logging_adaptor<thread_cache_adaptor<async_device_resource>>>);
static_assert(
  std::is_constructible_v<device_async_resource_ref,
                          logging_adaptor<tracking_adaptor<device_async_resource_ref>>&>);

// The aligned, limiting, failure-callback and prefetch adaptors, likewise.
static_assert(stream_ordered_handle<aligned_adaptor<async_pinned_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<aligned_adaptor<async_pinned_resource>>);
static_assert(binds_to_device_refs<aligned_adaptor<thread_cache_adaptor<async_device_resource>>>);
static_assert(stream_ordered_handle<limiting_adaptor<async_device_resource>, device_mr>);
static_assert(binds_to_device_refs<limiting_adaptor<async_device_resource>>);
static_assert(std::is_constructible_v<device_resource_ref, limiting_adaptor<device_resource_ref>&>);
static_assert(
  stream_ordered_handle<failure_callback_adaptor<async_managed_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<failure_callback_adaptor<async_managed_resource>>);
static_assert(stream_ordered_handle<prefetch_adaptor<async_managed_resource>, device_mr, host_mr>);
static_assert(binds_to_every_ref<prefetch_adaptor<async_managed_resource>>);
static_assert(std::is_constructible_v<
              device_async_resource_ref,
              limiting_adaptor<tracking_adaptor<thread_cache_adaptor<async_device_resource>>>&>);

// A literal 0 (or nullptr) in the stream's place does not compile: either no overload takes it
// (CCCL 3.1 and later refuse int and nullptr as a cuda::stream_ref, and CCCL's own refs have
// nothing else), or the call picks rmm-next's overload whose body is a static_assert that says to
// pass a stream (tests/compile_fail/literal_zero_stream.cpp builds those calls and reads the
// message). Never a synchronous allocation of 0 bytes, as CCCL 3.0's allocate(bytes, alignment)
// would make of it.
template <class T>
concept not_the_refusal = !std::is_same_v<T, detail::literal_stream_call>;

template <class R>
concept compiles_with_literal_stream = requires(R& r) {
  { r.allocate(0, 256) } -> not_the_refusal;
} || requires(R& r) {
  { r.allocate(0, 1024) } -> not_the_refusal;
} || requires(R& r) {
  { r.allocate(0U, 256) } -> not_the_refusal;
} || requires(R& r) {
  { r.allocate(nullptr, 256) } -> not_the_refusal;
} || requires(R& r) {
  { r.allocate(0, 256, 256) } -> not_the_refusal;
} || requires(R& r, void* p) {
  { r.deallocate(0, p, 256) } -> not_the_refusal;
} || requires(R& r, void* p) {
  { r.deallocate(nullptr, p, 256, 256) } -> not_the_refusal;
};

/** A resource with only CCCL 3.0's synchronous names: the check sees that its call compiles. */
struct cccl30_synchronous_only {
  void* allocate(std::size_t, std::size_t) { return nullptr; }
  void deallocate(void*, std::size_t, std::size_t) noexcept {}
};
static_assert(compiles_with_literal_stream<cccl30_synchronous_only>);

static_assert(!compiles_with_literal_stream<async_device_resource>);
static_assert(!compiles_with_literal_stream<async_managed_resource>);
static_assert(!compiles_with_literal_stream<async_pinned_resource>);
static_assert(!compiles_with_literal_stream<statistics_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<statistics_adaptor<device_async_resource_ref>>);
static_assert(!compiles_with_literal_stream<statistics_adaptor<fake_resource>>);
static_assert(!compiles_with_literal_stream<thread_cache_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<thread_cache_adaptor<device_async_resource_ref>>);
static_assert(!compiles_with_literal_stream<tracking_adaptor<device_async_resource_ref>>);
static_assert(!compiles_with_literal_stream<logging_adaptor<device_async_resource_ref>>);
static_assert(!compiles_with_literal_stream<device_async_resource_ref>);
static_assert(!compiles_with_literal_stream<host_device_async_resource_ref>);
static_assert(!compiles_with_literal_stream<host_async_resource_ref>);
static_assert(!compiles_with_literal_stream<device_resource_ref>);
static_assert(!compiles_with_literal_stream<host_device_resource_ref>);
static_assert(!compiles_with_literal_stream<host_resource_ref>);
static_assert(!compiles_with_literal_stream<aligned_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<limiting_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<tracking_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<logging_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<failure_callback_adaptor<async_device_resource>>);
static_assert(!compiles_with_literal_stream<prefetch_adaptor<async_managed_resource>>);
static_assert(!compiles_with_literal_stream<limiting_adaptor<device_resource_ref>>);

// The size type itself stays what it is: CCCL 3.0's synchronous allocate(bytes, alignment), which
// CCCL 3.0's concepts require, and nothing from CCCL 3.1 on.
template <class R>
concept has_cccl30_sync_allocate = requires(R& r, std::size_t n) {
  { r.allocate(n, n) } -> std::same_as<void*>;
};
template <class R>
concept has_cccl30_async_allocate = requires(R& r, std::size_t n, cuda::stream_ref s) {
  { r.allocate_async(n, n, s) } -> std::same_as<void*>;
};
#if RMM_NEXT_CCCL_STREAM_ORDERED_MR
static_assert(!has_cccl30_sync_allocate<async_device_resource>);
static_assert(!has_cccl30_async_allocate<async_device_resource>);
static_assert(!has_cccl30_sync_allocate<statistics_adaptor<async_pinned_resource>>);
static_assert(!has_cccl30_async_allocate<thread_cache_adaptor<async_device_resource>>);
#else
static_assert(has_cccl30_sync_allocate<async_device_resource>);
static_assert(has_cccl30_async_allocate<async_device_resource>);
static_assert(has_cccl30_sync_allocate<statistics_adaptor<async_pinned_resource>>);
static_assert(has_cccl30_async_allocate<thread_cache_adaptor<async_device_resource>>);
#endif

// ---- Run time ----------------------------------------------------------------------------------

cuda::stream_ref const no_stream{cudaStream_t{}};

TEST(conformance, refs_bind_to_an_adaptor_over_a_ref)
{
  fake_resource upstream;
  statistics_adaptor<device_async_resource_ref> counted{device_async_resource_ref{upstream}};
  device_async_resource_ref ref{counted};
  void* ptr = ref.allocate(no_stream, 256, 256);
  EXPECT_EQ(counted.statistics().bytes.current, 256);
  ref.deallocate(no_stream, ptr, 256, 256);
  ptr = ref.allocate_sync(64, 64);
  ref.deallocate_sync(ptr, 64, 64);
  EXPECT_EQ(counted.statistics().allocations.total, 2);
  EXPECT_EQ(upstream.allocations(), 2);
  EXPECT_EQ(upstream.deallocations(), 2);

  statistics_adaptor<device_resource_ref> sync_counted{device_resource_ref{upstream}};
  EXPECT_TRUE(allocates_from(device_resource_ref{sync_counted}, upstream));
  EXPECT_EQ(sync_counted.statistics().allocations.total, 1);
}

TEST(conformance, refs_bind_to_a_thread_cache_over_a_ref)
{
  fake_resource upstream;
  thread_cache_adaptor<host_device_async_resource_ref> cache{
    host_device_async_resource_ref{upstream}};
  EXPECT_TRUE(allocates_from(host_device_async_resource_ref{cache}, upstream));
  EXPECT_TRUE(allocates_from(device_async_resource_ref{cache}, upstream));
  EXPECT_TRUE(allocates_from(host_async_resource_ref{cache}, upstream));
  EXPECT_TRUE(device_async_resource_ref{cache} == device_async_resource_ref{cache});
}

TEST(conformance, copies_of_an_adaptor_share_its_state)
{
  fake_resource upstream;
  statistics_adaptor<device_async_resource_ref> counted{device_async_resource_ref{upstream}};
  statistics_adaptor copy{counted};  // a copy, not an adaptor over a ref to `counted`
  static_assert(std::is_same_v<decltype(copy), decltype(counted)>);
  EXPECT_TRUE(copy == counted);
  void* ptr = copy.allocate_sync(32);
  EXPECT_EQ(counted.statistics().allocations.current, 1);
  counted.deallocate_sync(ptr, 32);

  thread_cache_adaptor<device_async_resource_ref> cache{device_async_resource_ref{upstream}};
  thread_cache_adaptor cache_copy{cache};
  static_assert(std::is_same_v<decltype(cache_copy), decltype(cache)>);
  EXPECT_TRUE(cache_copy == cache);
  thread_cache_adaptor moved{std::move(cache_copy)};
  EXPECT_TRUE(moved == cache);
}

TEST(conformance, class_template_argument_deduction)
{
  fake_resource upstream;
  statistics_adaptor counted{upstream};
  static_assert(std::is_same_v<decltype(counted), statistics_adaptor<fake_resource>>);
  thread_cache_adaptor cache{device_async_resource_ref{upstream}, thread_cache_options{}};
  static_assert(std::is_same_v<decltype(cache), thread_cache_adaptor<device_async_resource_ref>>);
  statistics_adaptor over_cache{device_async_resource_ref{cache}};
  EXPECT_TRUE(allocates_from(device_async_resource_ref{over_cache}, upstream));
  EXPECT_EQ(over_cache.statistics().allocations.total, 1);
}

#if CCCL_VERSION >= 3002000
TEST(conformance, any_resource_holds_adaptors)
{
  fake_resource upstream;
  static_assert(std::is_constructible_v<cuda::mr::any_resource<device_mr>, async_device_resource>);
  static_assert(
    std::is_constructible_v<cuda::mr::any_resource<device_mr, host_mr>, async_pinned_resource>);
  static_assert(std::is_constructible_v<cuda::mr::any_synchronous_resource<device_mr>,
                                        statistics_adaptor<device_resource_ref>>);

  statistics_adaptor<device_async_resource_ref> counted{device_async_resource_ref{upstream}};
  cuda::mr::any_resource<device_mr> held{counted};  // a copy: shares the counters
  void* ptr = held.allocate(no_stream, 128, 256);
  EXPECT_EQ(counted.statistics().bytes.current, 128);
  held.deallocate(no_stream, ptr, 128, 256);
  EXPECT_TRUE(allocates_from(device_async_resource_ref{held}, upstream));
  EXPECT_EQ(counted.statistics().allocations.total, 2);

  cuda::mr::any_resource<device_mr> cache{
    thread_cache_adaptor<device_async_resource_ref>{device_async_resource_ref{upstream}}};
  EXPECT_TRUE(allocates_from(device_async_resource_ref{cache}, upstream));
}
#endif

}  // namespace
}  // namespace rmm_next::test
