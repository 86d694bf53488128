/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// resource_context with the real resources: a library's temporaries from async_device_resource,
// its results from async_managed_resource and its staging buffers from async_pinned_resource;
// kernels touch the memory of every kind; overrides per kind and per device, on two devices when
// there are two. The context logic itself is covered by resource_context_test.cpp.

#include "support/kernels.cuh"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_context.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

using rmm_next::device_async_resource_ref;
using rmm_next::host_device_async_resource_ref;
using rmm_next::resource_context;
using rmm_next::test::pattern;
using word = std::uint32_t;

#define EXPECT_CUDA_OK(call) EXPECT_EQ(cudaSuccess, (call)) << #call
#define ASSERT_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

// The test library's kinds: device memory it works in and hands back, and host memory it writes.
enum class kind { temporaries, results, count_ };
enum class host_kind { staging, count_ };

/** The test library's defaults, each on the device's current pool of its memory type. */
struct library_contexts {
  resource_context<kind> device{
    [](int device) { return rmm_next::async_device_resource{rmm_next::current_pool{}, device}; },
    [](int device) { return rmm_next::async_managed_resource{rmm_next::current_pool{}, device}; }};
  resource_context<host_kind, host_device_async_resource_ref> host{
    [](int device) { return rmm_next::async_pinned_resource{rmm_next::current_pool{}, device}; }};
};

constexpr std::size_t words = std::size_t{1} << 20;
constexpr std::size_t bytes = words * sizeof(word);

int visible_devices()
{
  int count{};
  EXPECT_CUDA_OK(cudaGetDeviceCount(&count));
  return count;
}

/** Empty when managed pools work on `device`, else why not. */
std::optional<std::string> managed_unsupported(int device)
{
  try {
    rmm_next::async_managed_resource probe{rmm_next::current_pool{}, device};
    return std::nullopt;
  } catch (rmm_next::not_supported const& e) {
    return std::string{e.what()};
  }
}

#define SKIP_WITHOUT_MANAGED_POOLS(device)                                                 \
  if (auto const reason = managed_unsupported(device)) {                                   \
    GTEST_SKIP() << "managed pools unsupported on device " << (device) << ": " << *reason; \
  }

/** A non-blocking stream on `device`, destroyed with the object. */
class device_stream {
 public:
  explicit device_stream(int device)
  {
    rmm_next::detail::device_guard guard{device};
    EXPECT_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  device_stream(device_stream const&)            = delete;
  device_stream& operator=(device_stream const&) = delete;
  ~device_stream() { EXPECT_CUDA_OK(cudaStreamDestroy(stream_)); }

  operator cudaStream_t() const noexcept { return stream_; }  // NOLINT(implicit)
  [[nodiscard]] cuda::stream_ref ref() const noexcept { return cuda::stream_ref{stream_}; }

 private:
  cudaStream_t stream_{};
};

/** What cudaPointerGetAttributes says of `ptr`: its memory type and, for device memory, device. */
void expect_memory(void const* ptr, cudaMemoryType type, int device)
{
  cudaPointerAttributes attrs{};
  ASSERT_CUDA_OK(cudaPointerGetAttributes(&attrs, ptr));
  EXPECT_EQ(attrs.type, type) << "memory type of " << ptr;
  if (type == cudaMemoryTypeDevice) { EXPECT_EQ(attrs.device, device) << "device of " << ptr; }
}

/** One allocation of `bytes` from a ref, in `stream` order, freed the same way. */
template <class Ref>
class buffer {
 public:
  buffer(Ref ref, cuda::stream_ref stream)
    : ref_{ref},
      stream_{stream},
      data_{static_cast<word*>(ref_.allocate(stream, bytes, rmm_next::default_alignment))}
  {
  }
  buffer(buffer const&)            = delete;
  buffer& operator=(buffer const&) = delete;
  ~buffer() { ref_.deallocate(stream_, data_, bytes, rmm_next::default_alignment); }

  [[nodiscard]] word* data() const noexcept { return data_; }

 private:
  Ref ref_;
  cuda::stream_ref stream_;
  word* data_;
};

/**
 * Runs the library's work on `device` with the refs its contexts hand out for the current device:
 * the host writes a pattern into staging memory, the device copies it into temporaries, checks
 * both, and writes `3 * pattern + 1` into results. Checks the memory types and returns the results
 * as the host sees them.
 */
std::vector<word> run_library(library_contexts& lib,
                              int device,
                              word seed,
                              cudaMemoryType results_type)
{
  using rmm_next::test::block_size;
  using rmm_next::test::grid_for;
  rmm_next::detail::device_guard guard{device};
  device_stream stream{device};
  // get(kind) reads the current device's ref, the one get(kind, device) names.
  EXPECT_TRUE(lib.device.get(kind::temporaries) == lib.device.get(kind::temporaries, device));
  EXPECT_TRUE(lib.device.get(kind::results) == lib.device.get(kind::results, device));

  std::vector<word> host(words);
  host_device_async_resource_ref staging_ref = lib.host.get(host_kind::staging);
  {
    buffer staging{staging_ref, stream.ref()};
    buffer temporaries{lib.device.get(kind::temporaries), stream.ref()};
    buffer results{lib.device.get(kind::results), stream.ref()};
    auto* mismatches = static_cast<unsigned long long*>(
      staging_ref.allocate_sync(sizeof(unsigned long long), rmm_next::default_alignment));
    EXPECT_CUDA_OK(cudaStreamSynchronize(stream));  // the host touches staging memory next

    expect_memory(staging.data(), cudaMemoryTypeHost, device);
    expect_memory(temporaries.data(), cudaMemoryTypeDevice, device);
    expect_memory(results.data(), results_type, device);

    for (std::size_t i = 0; i < words; ++i) {
      staging.data()[i] = pattern(i, seed);
    }
    *mismatches = 0;
    EXPECT_CUDA_OK(
      cudaMemcpyAsync(temporaries.data(), staging.data(), bytes, cudaMemcpyDefault, stream));
    rmm_next::test::count_mismatches_kernel<word>
      <<<grid_for(words), block_size, 0, stream>>>(staging.data(), words, seed, mismatches);
    rmm_next::test::count_mismatches_kernel<word>
      <<<grid_for(words), block_size, 0, stream>>>(temporaries.data(), words, seed, mismatches);
    rmm_next::test::transform_kernel<word>
      <<<grid_for(words), block_size, 0, stream>>>(temporaries.data(), results.data(), words);
    EXPECT_CUDA_OK(cudaGetLastError());

    EXPECT_CUDA_OK(cudaMemcpyAsync(host.data(), results.data(), bytes, cudaMemcpyDefault, stream));
    EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(*mismatches, 0U) << "words of staging and temporaries not holding the pattern";
    staging_ref.deallocate_sync(
      mismatches, sizeof(unsigned long long), rmm_next::default_alignment);
  }
  // The buffers were freed in stream order: wait, so that pool statistics show it.
  EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
  return host;
}

/** The number of words of `results` that are not `3 * pattern(i, seed) + 1`. */
std::size_t bad_results(std::vector<word> const& results, word seed)
{
  std::size_t bad = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i] != static_cast<word>(3 * pattern(i, seed) + 1)) { ++bad; }
  }
  return bad;
}

TEST(ResourceContextGpu, EachKindHandsOutItsMemoryAndKernelsUseIt)
{
  SKIP_WITHOUT_MANAGED_POOLS(0);
  library_contexts lib;
  auto const results = run_library(lib, 0, 11, cudaMemoryTypeManaged);
  EXPECT_EQ(bad_results(results, 11), 0U);

  // Managed results are readable on the host directly.
  rmm_next::detail::device_guard guard{0};
  auto managed = lib.device.get(kind::results, 0);
  auto* p      = static_cast<word*>(managed.allocate_sync(sizeof(word) * 4, alignof(word)));
  p[3]         = 42;
  EXPECT_EQ(p[3], 42U);
  managed.deallocate_sync(p, sizeof(word) * 4, alignof(word));
}

TEST(ResourceContextGpu, OverridingOneKindChangesOnlyThatKind)
{
  SKIP_WITHOUT_MANAGED_POOLS(0);
  library_contexts lib;
  rmm_next::detail::device_guard guard{0};
  auto const temporaries_before = lib.device.get(kind::temporaries);

  // The application wants the results in device memory from a pool of its own.
  rmm_next::async_device_resource app_pool{rmm_next::pool_options{}, 0};
  auto const previous = lib.device.set_current(kind::results, app_pool);
  EXPECT_TRUE(lib.device.get(kind::results, 0) == device_async_resource_ref{app_pool});
  EXPECT_TRUE(lib.device.get(kind::temporaries) == temporaries_before);
  {
    auto memory = lib.device.get(kind::results);
    void* p     = memory.allocate_sync(bytes, rmm_next::default_alignment);
    EXPECT_GE(app_pool.statistics().used_bytes, bytes) << "results come from the app's pool";
    memory.deallocate_sync(p, bytes, rmm_next::default_alignment);
  }
  auto const results = run_library(lib, 0, 23, cudaMemoryTypeDevice);
  EXPECT_EQ(bad_results(results, 23), 0U);
  EXPECT_GE(app_pool.statistics().used_bytes_high, bytes);

  // Undone before app_pool goes away: managed results again, nothing from the app's pool.
  lib.device.set_current(kind::results, previous);
  EXPECT_CUDA_OK(cudaDeviceSynchronize());  // deallocate_sync's free has run: nothing is in use
  app_pool.reset_high_watermarks();
  auto const again = run_library(lib, 0, 29, cudaMemoryTypeManaged);
  EXPECT_EQ(bad_results(again, 29), 0U);
  EXPECT_EQ(app_pool.statistics().used_bytes_high, 0U);
}

TEST(ResourceContextGpu, ProcessWideDefaultIsReadOnFirstUse)
{
  resource_context<kind> ctx{rmm_next::use_process_wide_resource{},
                             rmm_next::use_process_wide_resource{}};
  auto const process_wide = rmm_next::get_per_device_resource_ref(0);
  EXPECT_TRUE(ctx.get(kind::temporaries, 0) == process_wide);

  // A later process-wide change is not seen: the default was made on first use, and reset
  // returns to it. The library's users follow the change by setting the kind.
  rmm_next::async_device_resource app_pool{rmm_next::pool_options{}, 0};
  auto const previous = rmm_next::set_per_device_resource_ref(0, app_pool);
  EXPECT_TRUE(previous == process_wide);
  EXPECT_TRUE(ctx.get(kind::temporaries, 0) == process_wide);
  EXPECT_TRUE(ctx.get(kind::results, 0) == device_async_resource_ref{app_pool})
    << "results had not been used yet";
  ctx.reset(kind::temporaries, 0);
  EXPECT_TRUE(ctx.get(kind::temporaries, 0) == process_wide);
  ctx.set(kind::temporaries, 0, rmm_next::get_per_device_resource_ref(0));

  {
    rmm_next::detail::device_guard guard{0};
    device_stream stream{0};
    buffer memory{ctx.get(kind::temporaries, 0), stream.ref()};
    rmm_next::test::fill_kernel<word>
      <<<rmm_next::test::grid_for(words), rmm_next::test::block_size, 0, stream>>>(
        memory.data(), words, 5);
    EXPECT_CUDA_OK(cudaGetLastError());
    word last{};
    EXPECT_CUDA_OK(cudaMemcpyAsync(
      &last, memory.data() + words - 1, sizeof(word), cudaMemcpyDeviceToHost, stream));
    EXPECT_CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_EQ(last, pattern(words - 1, 5));
    EXPECT_GE(app_pool.statistics().used_bytes, bytes) << "allocated from the app's pool";
  }
  // Before app_pool goes away.
  ctx.reset(kind::temporaries, 0);
  ctx.set(kind::results, 0, previous);
  rmm_next::set_per_device_resource_ref(0, previous);
}

TEST(ResourceContextGpu, OverridesArePerDevice)
{
  if (visible_devices() < 2) { GTEST_SKIP() << "needs 2 devices, found " << visible_devices(); }
  SKIP_WITHOUT_MANAGED_POOLS(0);
  SKIP_WITHOUT_MANAGED_POOLS(1);
  library_contexts lib;

  // Each device's default is made for that device.
  for (int d = 0; d < 2; ++d) {
    auto const results = run_library(lib, d, 31 + d, cudaMemoryTypeManaged);
    EXPECT_EQ(bad_results(results, 31 + d), 0U) << "device " << d;
  }

  // Device 1 only: results in device memory from an application pool on device 1.
  rmm_next::async_device_resource app_pool{rmm_next::pool_options{}, 1};
  auto const previous = lib.device.set(kind::results, 1, app_pool);

  auto const on_0 = run_library(lib, 0, 41, cudaMemoryTypeManaged);
  EXPECT_EQ(bad_results(on_0, 41), 0U);
  EXPECT_EQ(app_pool.statistics().used_bytes_high, 0U) << "device 0 keeps its default";

  auto const on_1 = run_library(lib, 1, 43, cudaMemoryTypeDevice);
  EXPECT_EQ(bad_results(on_1, 43), 0U);
  EXPECT_GE(app_pool.statistics().used_bytes_high, bytes) << "device 1 uses the app's pool";

  {
    // With device 1 current, get(kind) hands out device 1's override.
    rmm_next::detail::device_guard guard{1};
    EXPECT_TRUE(lib.device.get(kind::results) == device_async_resource_ref{app_pool});
    EXPECT_FALSE(lib.device.get(kind::results, 0) == device_async_resource_ref{app_pool})
      << "device 0 keeps its default";
  }
  lib.device.set(kind::results, 1, previous);  // before app_pool goes away
  auto const restored = run_library(lib, 1, 47, cudaMemoryTypeManaged);
  EXPECT_EQ(bad_results(restored, 47), 0U);
}

}  // namespace
