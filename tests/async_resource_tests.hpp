/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The test matrix every async resource passes (after RMM's cpp/tests/mr/), as a gtest
// type-parameterized suite. Each tests/async_<kind>_resource_test.cu instantiates it for its own
// resource type, so that each executable covers one resource:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(device, async_resource_matrix,
//                                  ::testing::Types<rmm_next::async_device_resource>);
//
// Compiled by nvcc only (it launches kernels). Everything runs on device 0.

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include "support/kernels.cuh"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rmm_next::test {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;
inline constexpr std::size_t GiB = std::size_t{1} << 30;
inline constexpr std::size_t PiB = std::size_t{1} << 50;

// ------------------------------------------------------------------------------------------------
// What sets the three resources apart, as far as the tests are concerned.
// ------------------------------------------------------------------------------------------------

template <class R>
struct resource_traits;

template <>
struct resource_traits<async_device_resource> {
  /// What cudaPointerGetAttributes reports for the memory.
  static constexpr cudaMemoryType memory_type = cudaMemoryTypeDevice;
  /// Allocation type of the resource's pools.
  static constexpr cudaMemAllocationType allocation_type = cudaMemAllocationTypePinned;
  /// Whether the host may dereference the memory.
  static constexpr bool host_accessible = false;
  /// Whether allocating inside stream capture works (else it must throw not_supported: the
  /// CUDA 13.0 driver cannot capture allocations from host-located pools).
  static constexpr bool capture_works = true;
  /// Whether an owned pool honours pool_options::maximum_pool_size (else construction must throw
  /// not_supported: the CUDA 13.0 driver rejects maxSize for managed pools).
  static constexpr bool bounded_pools = true;
  /// Location of the current/default pool of the resource for `device`.
  static cudaMemLocation location(int device) { return {cudaMemLocationTypeDevice, device}; }
  /// Whether the driver has a current and a default pool of the kind (else default
  /// construction creates a pool the resource owns).
  static constexpr bool driver_pools = true;
};

#if CUDART_VERSION >= 13000  // managed pools need CUDA 13.0 (async_managed_resource_gpu_test.cu)
template <>
struct resource_traits<async_managed_resource> {
  static constexpr cudaMemoryType memory_type            = cudaMemoryTypeManaged;
  static constexpr cudaMemAllocationType allocation_type = cudaMemAllocationTypeManaged;
  static constexpr bool host_accessible                  = true;
  static constexpr bool capture_works                    = true;
  static constexpr bool bounded_pools                    = false;
  static cudaMemLocation location(int device) { return {cudaMemLocationTypeDevice, device}; }
  static constexpr bool driver_pools = true;
};
#endif

template <>
struct resource_traits<async_pinned_resource> {
  static constexpr cudaMemoryType memory_type            = cudaMemoryTypeHost;
  static constexpr cudaMemAllocationType allocation_type = cudaMemAllocationTypePinned;
  static constexpr bool host_accessible                  = true;
  static constexpr bool capture_works                    = false;
  static constexpr bool bounded_pools                    = true;
#if CUDART_VERSION >= 13000
  static cudaMemLocation location(int) { return {cudaMemLocationTypeHost, 0}; }
  static constexpr bool driver_pools = true;
#else
  // Before CUDA 13.0: no host pool is current or default; pools live on a host NUMA node, the
  // one closest to the device.
  static cudaMemLocation location(int device)
  {
    int numa = -1;
    if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, device) != cudaSuccess) {
      (void)cudaGetLastError();
    }
    return {cudaMemLocationTypeHostNuma, numa < 0 ? 0 : numa};
  }
  static constexpr bool driver_pools = false;
#endif
};

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

/** @brief Prints a line that says which of the accepted outcomes a test saw. */
inline void note(std::string const& what)
{
  std::printf("[   NOTE   ] %s\n", what.c_str());
  std::fflush(stdout);
}

inline bool is_aligned(void const* ptr, std::size_t alignment)
{
  return reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0;
}

inline bool contains(std::string const& haystack, std::string const& needle)
{
  return haystack.find(needle) != std::string::npos;
}

/** @brief The driver's current pool for resource kind `R` on `device`; null where the driver has
 * none (`resource_traits<R>::driver_pools`). */
template <class R>
cudaMemPool_t current_pool_handle(int device)
{
  cudaMemPool_t pool{};
  if constexpr (resource_traits<R>::driver_pools) {
#if CUDART_VERSION >= 13000
    cudaMemLocation loc = resource_traits<R>::location(device);
    EXPECT_EQ(cudaMemGetMemPool(&pool, &loc, resource_traits<R>::allocation_type), cudaSuccess);
#else
    EXPECT_EQ(cudaDeviceGetMemPool(&pool, device), cudaSuccess);
#endif
  }
  return pool;
}

/** @brief The driver's default pool for resource kind `R` on `device`; null where the driver has
 * none. */
template <class R>
cudaMemPool_t default_pool_handle(int device)
{
  cudaMemPool_t pool{};
  if constexpr (resource_traits<R>::driver_pools) {
#if CUDART_VERSION >= 13000
    cudaMemLocation loc = resource_traits<R>::location(device);
    EXPECT_EQ(cudaMemGetDefaultMemPool(&pool, &loc, resource_traits<R>::allocation_type),
              cudaSuccess);
#else
    EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool, device), cudaSuccess);
#endif
  }
  return pool;
}

/** @brief A pool of the kind `R` uses, created by the test (which must destroy it). */
template <class R>
cudaMemPool_t make_test_pool(int device)
{
  cudaMemPoolProps props{};
  props.allocType   = resource_traits<R>::allocation_type;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location    = resource_traits<R>::location(device);
  cudaMemPool_t pool{};
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  return pool;
}

inline std::uint64_t release_threshold_of(cudaMemPool_t pool)
{
  std::uint64_t value{};
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value), cudaSuccess);
  return value;
}

inline void set_release_threshold(cudaMemPool_t pool, std::uint64_t value)
{
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &value), cudaSuccess);
}

/** @brief Restores a pool's release threshold when the test leaves the scope, however it does. */
class threshold_restorer {
 public:
  explicit threshold_restorer(cudaMemPool_t pool) : pool_{pool}, value_{release_threshold_of(pool)}
  {
  }
  threshold_restorer(threshold_restorer const&)            = delete;
  threshold_restorer& operator=(threshold_restorer const&) = delete;
  ~threshold_restorer() { set_release_threshold(pool_, value_); }

 private:
  cudaMemPool_t pool_;
  std::uint64_t value_;
};

/** @brief Checks what cudaPointerGetAttributes says of memory from resource kind `R`. */
template <class R>
void expect_memory_kind(void const* ptr, int device)
{
  cudaPointerAttributes attrs{};
  ASSERT_EQ(cudaPointerGetAttributes(&attrs, ptr), cudaSuccess);
  EXPECT_EQ(attrs.type, resource_traits<R>::memory_type) << "cudaMemoryType of " << ptr;
  if constexpr (resource_traits<R>::memory_type == cudaMemoryTypeDevice) {
    EXPECT_EQ(attrs.device, device);
    EXPECT_EQ(attrs.devicePointer, ptr);
  }
}

/** @brief Fills the first `bytes / 4` words of `ptr` with `pattern(i, seed)` on `stream`. */
inline void fill(void* ptr, std::size_t bytes, std::uint32_t seed, cudaStream_t stream)
{
  std::size_t const words = bytes / sizeof(std::uint32_t);
  if (words == 0) { return; }
  fill_kernel<std::uint32_t>
    <<<grid_for(words), block_size, 0, stream>>>(static_cast<std::uint32_t*>(ptr), words, seed);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

/** @brief A page-locked counter kernels add mismatches to; read it after synchronizing. */
class mismatch_counter {
 public:
  mismatch_counter()
  {
    EXPECT_EQ(cudaMallocHost(&count_, sizeof(*count_)), cudaSuccess);
    if (count_ != nullptr) { *count_ = 0; }
  }
  mismatch_counter(mismatch_counter const&)            = delete;
  mismatch_counter& operator=(mismatch_counter const&) = delete;
  ~mismatch_counter() { EXPECT_EQ(cudaFreeHost(count_), cudaSuccess); }

  /** @brief Counts, in `stream` order, the words of `ptr` that are not `pattern(i, seed)`. */
  void add(void const* ptr, std::size_t bytes, std::uint32_t seed, cudaStream_t stream)
  {
    std::size_t const words = bytes / sizeof(std::uint32_t);
    if (words == 0 || count_ == nullptr) { return; }
    count_mismatches_kernel<std::uint32_t><<<grid_for(words), block_size, 0, stream>>>(
      static_cast<std::uint32_t const*>(ptr), words, seed, count_);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }

  [[nodiscard]] unsigned long long value() const
  {
    return count_ == nullptr ? ~0ULL : *static_cast<unsigned long long volatile*>(count_);
  }

 private:
  unsigned long long* count_{};
};

/** @brief The number of words of `ptr` a kernel finds not holding `pattern(i, seed)`; syncs. */
inline unsigned long long device_mismatches(void const* ptr,
                                            std::size_t bytes,
                                            std::uint32_t seed,
                                            cudaStream_t stream)
{
  mismatch_counter counter;
  counter.add(ptr, bytes, seed, stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return counter.value();
}

/**
 * @brief Checks on the host up to `sample` words at each end of `ptr` against the pattern:
 * read directly where the host can, copied back with cudaMemcpyAsync otherwise. Syncs `stream`.
 */
template <class R>
void expect_pattern_on_host(void const* ptr,
                            std::size_t bytes,
                            std::uint32_t seed,
                            cudaStream_t stream,
                            std::size_t sample = 16384)
{
  std::size_t const words = bytes / sizeof(std::uint32_t);
  auto const* src         = static_cast<std::uint32_t const*>(ptr);
  std::size_t const head  = std::min(words, sample);
  std::size_t const tail  = std::min(words - head, sample);
  std::vector<std::uint32_t> host(head + tail);
  if constexpr (resource_traits<R>::host_accessible) {
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::copy(src, src + head, host.begin());
    std::copy(src + words - tail, src + words, host.begin() + static_cast<std::ptrdiff_t>(head));
  } else {
    if (head != 0) {
      ASSERT_EQ(cudaMemcpyAsync(
                  host.data(), src, head * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream),
                cudaSuccess);
    }
    if (tail != 0) {
      ASSERT_EQ(cudaMemcpyAsync(host.data() + head,
                                src + words - tail,
                                tail * sizeof(std::uint32_t),
                                cudaMemcpyDeviceToHost,
                                stream),
                cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < head; ++i) {
    if (host[i] != pattern(i, seed)) { ++bad; }
  }
  for (std::size_t i = 0; i < tail; ++i) {
    if (host[head + i] != pattern(words - tail + i, seed)) { ++bad; }
  }
  EXPECT_EQ(bad, 0U) << "of " << head + tail << " words checked on the host";
}

/** @brief Fills `ptr` on `stream` and checks the pattern on the device and on the host. */
template <class R>
void expect_usable(void* ptr, std::size_t bytes, std::uint32_t seed, cudaStream_t stream)
{
  fill(ptr, bytes, seed, stream);
  EXPECT_EQ(device_mismatches(ptr, bytes, seed, stream), 0U);
  expect_pattern_on_host<R>(ptr, bytes, seed, stream);
}

/**
 * @brief Runs `alloc` (which returns an allocation of `bytes` from `r`), expecting it to throw
 * `E`; returns the message. If it returns memory instead, frees it untouched and fails.
 */
template <class E, class R, class Alloc>
std::string expect_alloc_throws(R& r, std::size_t bytes, Alloc&& alloc)
{
  void* ptr{};
  try {
    ptr = alloc();
  } catch (E const& e) {
    return e.what();
  } catch (std::exception const& e) {
    ADD_FAILURE() << "threw an exception of another type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "allocation of " << bytes << " bytes succeeded instead of throwing";
  if (ptr != nullptr) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    r.deallocate_sync(ptr, bytes);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  return {};
}

/** @brief Runs `make`, expecting `E`; returns its message. */
template <class E, class Make>
std::string expect_throws(Make&& make)
{
  try {
    make();
  } catch (E const& e) {
    return e.what();
  } catch (std::exception const& e) {
    ADD_FAILURE() << "threw an exception of another type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

/** @brief A stream of the test's own, non-blocking, destroyed with it. */
class test_stream {
 public:
  test_stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  test_stream(test_stream const&)            = delete;
  test_stream& operator=(test_stream const&) = delete;
  ~test_stream()
  {
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s_), cudaSuccess);
  }
  [[nodiscard]] cudaStream_t get() const noexcept { return s_; }

 private:
  cudaStream_t s_{};
};

// ------------------------------------------------------------------------------------------------
// Fixtures
// ------------------------------------------------------------------------------------------------

/**
 * @brief Base fixture of every GPU test: device 0 current, a non-blocking stream, and at the end
 * no pending error and no sticky error.
 */
class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    ASSERT_EQ(cudaSetDevice(device_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }

  void TearDown() override
  {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }

  int device_{0};
  cudaStream_t stream_{};
};

template <class R>
class async_resource_matrix : public gpu_test {};

TYPED_TEST_SUITE_P(async_resource_matrix);

// ------------------------------------------------------------------------------------------------
// Allocation basics
// ------------------------------------------------------------------------------------------------

TYPED_TEST_P(async_resource_matrix, ZeroBytesReturnsNullptrAndNullptrFreesNothing)
{
  TypeParam r;
  EXPECT_EQ(r.allocate(this->stream_, 0), nullptr);
  EXPECT_EQ(r.allocate_sync(0), nullptr);
  EXPECT_EQ(r.allocate(this->stream_, 0, 64), nullptr);
  r.deallocate(this->stream_, nullptr, 0);
  r.deallocate(this->stream_, nullptr, 1024);
  r.deallocate_sync(nullptr, 0);
  r.deallocate_sync(nullptr, 1024);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, AllocatesAlignedUsableMemoryOfItsKind)
{
  using traits = resource_traits<TypeParam>;
  TypeParam r;
  EXPECT_EQ(r.device(), this->device_);
  std::uint32_t seed = 1;
  for (std::size_t const bytes : {std::size_t{4}, KiB, MiB, GiB}) {
    for (bool const sync : {false, true}) {
      SCOPED_TRACE(std::to_string(bytes) + (sync ? " bytes, allocate_sync" : " bytes, allocate"));
      void* ptr = sync ? r.allocate_sync(bytes) : r.allocate(this->stream_, bytes);
      ASSERT_NE(ptr, nullptr);
      EXPECT_TRUE(is_aligned(ptr, 256)) << ptr;
      if (!sync) { ASSERT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess); }
      expect_memory_kind<TypeParam>(ptr, r.device());
      expect_usable<TypeParam>(ptr, bytes, ++seed, this->stream_);  // syncs the stream
      if constexpr (traits::host_accessible) {
        // The host may write the memory too.
        std::memset(ptr, 0x5a, std::min(bytes, MiB));
        EXPECT_EQ(static_cast<unsigned char*>(ptr)[0], 0x5a);
      }
      if (sync) {
        r.deallocate_sync(ptr, bytes);
      } else {
        r.deallocate(this->stream_, ptr, bytes);
      }
    }
  }
  // Hand the gibibyte back rather than keep it in the shared pool for the rest of the run.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemPoolTrimTo(r.pool_handle(), 0), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, ExhaustionThrowsOutOfMemoryAndTheResourceKeepsWorking)
{
  TypeParam r;
  // Never touched: if the driver accepted it, expect_alloc_throws frees it at once and fails.
  constexpr std::size_t huge = PiB;
  for (bool const sync : {false, true}) {
    SCOPED_TRACE(sync ? "allocate_sync" : "allocate");
    std::string const msg = expect_alloc_throws<out_of_memory>(
      r, huge, [&] { return sync ? r.allocate_sync(huge) : r.allocate(this->stream_, huge); });
    EXPECT_TRUE(contains(msg, "out_of_memory")) << msg;
    EXPECT_TRUE(contains(msg, std::to_string(huge))) << msg;
    EXPECT_TRUE(contains(msg, "device " + std::to_string(r.device()))) << msg;
    // The error is not sticky...
    EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    // ...and the resource keeps working.
    void* ptr = sync ? r.allocate_sync(MiB) : r.allocate(this->stream_, MiB);
    ASSERT_NE(ptr, nullptr);
    expect_usable<TypeParam>(ptr, MiB, 77, this->stream_);
    r.deallocate(this->stream_, ptr, MiB);
  }
  EXPECT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, BadAlignmentThrowsBadAllocNamingIt)
{
  TypeParam r;
  for (std::size_t const alignment : {std::size_t{0},
                                      std::size_t{3},
                                      std::size_t{6},
                                      std::size_t{100},
                                      std::size_t{512},
                                      std::size_t{4096}}) {
    for (bool const sync : {false, true}) {
      SCOPED_TRACE("alignment " + std::to_string(alignment) + (sync ? " allocate_sync" : ""));
      bool threw_out_of_memory = false;
      std::string const msg    = expect_alloc_throws<bad_alloc>(r, 64, [&]() -> void* {
        try {
          return sync ? r.allocate_sync(64, alignment) : r.allocate(this->stream_, 64, alignment);
        } catch (out_of_memory const&) {
          threw_out_of_memory = true;
          throw;
        }
      });
      EXPECT_FALSE(threw_out_of_memory) << "bad alignment is not exhaustion";
      EXPECT_TRUE(contains(msg, "alignment " + std::to_string(alignment))) << msg;
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    }
  }
  for (std::size_t alignment = 1; alignment <= 256; alignment *= 2) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    void* a = r.allocate(this->stream_, 1000, alignment);
    void* b = r.allocate_sync(1000, alignment);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(is_aligned(a, alignment));
    EXPECT_TRUE(is_aligned(b, alignment));
    r.deallocate(this->stream_, a, 1000, alignment);
    r.deallocate_sync(b, 1000, alignment);
  }
}

TYPED_TEST_P(async_resource_matrix, RandomSizesInterleavedWithFrees)
{
  TypeParam r;
  struct block {
    void* ptr;
    std::size_t bytes;
    std::uint32_t seed;
  };
  std::mt19937_64 gen{20260101};
  std::uniform_int_distribution<std::size_t> size_dist{1, 8 * MiB};
  std::bernoulli_distribution free_one{0.4};
  std::vector<block> live;
  mismatch_counter mismatches;

  auto release = [&](std::size_t index) {
    block const b = live[index];
    mismatches.add(b.ptr, b.bytes, b.seed, this->stream_);  // still intact?
    r.deallocate(this->stream_, b.ptr, b.bytes);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
  };

  for (std::uint32_t i = 0; i < 100; ++i) {
    std::size_t const bytes = size_dist(gen);
    void* ptr = (i % 3 == 0) ? r.allocate_sync(bytes) : r.allocate(this->stream_, bytes);
    ASSERT_NE(ptr, nullptr) << bytes;
    EXPECT_TRUE(is_aligned(ptr, 256)) << ptr;
    fill(ptr, bytes, 1000 + i, this->stream_);
    live.push_back(block{ptr, bytes, 1000 + i});
    if (free_one(gen)) {
      release(std::uniform_int_distribution<std::size_t>{0, live.size() - 1}(gen));
    }
  }
  while (!live.empty()) {
    release(live.size() - 1);
  }
  ASSERT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
  // Overlapping live blocks would have overwritten each other's patterns.
  EXPECT_EQ(mismatches.value(), 0U);
}

// ------------------------------------------------------------------------------------------------
// Threads and streams
// ------------------------------------------------------------------------------------------------

TYPED_TEST_P(async_resource_matrix, ManyThreadsAllocateAndFreeConcurrently)
{
  TypeParam shared;
  constexpr int thread_count = 16;
  constexpr int ops          = 400;
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  std::atomic<unsigned long long> total_mismatches{0};
  std::atomic<int> allocations{0};

  auto work = [&](int t) {
    try {
      if (cudaSetDevice(shared.device()) != cudaSuccess) { throw std::runtime_error{"set device"}; }
      // Half the threads work through a copy made on the thread, half through the shared object.
      std::optional<TypeParam> copy;
      if (t % 2 == 1) { copy.emplace(shared); }
      TypeParam& r = copy ? *copy : shared;
      test_stream const owned_stream;
      cudaStream_t const stream = owned_stream.get();
      mismatch_counter mismatches;
      std::mt19937 gen{static_cast<unsigned>(t) * 7919U + 1U};
      std::uniform_int_distribution<std::size_t> size_dist{1, 256 * KiB};
      std::uniform_int_distribution<int> coin{0, 9};
      struct block {
        void* ptr;
        std::size_t bytes;
        std::uint32_t seed;
        bool sync;
      };
      std::vector<block> live;
      for (int op = 0; op < ops; ++op) {
        if (live.size() < 8 && (live.empty() || coin(gen) < 6)) {
          bool const sync         = coin(gen) < 3;
          std::size_t const bytes = size_dist(gen);
          void* ptr               = sync ? r.allocate_sync(bytes) : r.allocate(stream, bytes);
          if (ptr == nullptr || !is_aligned(ptr, 256)) {
            throw std::runtime_error{"null or misaligned pointer"};
          }
          auto const seed = static_cast<std::uint32_t>(t * 100000 + op);
          fill(ptr, bytes, seed, stream);
          live.push_back(block{ptr, bytes, seed, sync});
          allocations.fetch_add(1, std::memory_order_relaxed);
        } else {
          std::size_t const i = std::uniform_int_distribution<std::size_t>{0, live.size() - 1}(gen);
          block const b       = live[i];
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
          mismatches.add(b.ptr, b.bytes, b.seed, stream);
          if (b.sync && coin(gen) < 5) {
            // deallocate_sync frees memory no pending work uses: wait for this thread's work.
            if (cudaStreamSynchronize(stream) != cudaSuccess) {
              throw std::runtime_error{"cudaStreamSynchronize"};
            }
            r.deallocate_sync(b.ptr, b.bytes);
          } else {
            r.deallocate(stream, b.ptr, b.bytes);
          }
        }
      }
      for (block const& b : live) {
        mismatches.add(b.ptr, b.bytes, b.seed, stream);
        r.deallocate(stream, b.ptr, b.bytes);
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess) {
        throw std::runtime_error{"cudaStreamSynchronize"};
      }
      total_mismatches.fetch_add(mismatches.value());
    } catch (std::exception const& e) {
      std::lock_guard lock{errors_mutex};
      errors.push_back("thread " + std::to_string(t) + ": " + e.what());
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(thread_count);
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back(work, t);
  }
  for (auto& th : threads) {
    th.join();
  }
  for (auto const& e : errors) {
    ADD_FAILURE() << e;
  }
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(total_mismatches.load(), 0U) << "live blocks overlapped or were corrupted";
  EXPECT_GT(allocations.load(), thread_count * ops / 4);
}

TYPED_TEST_P(async_resource_matrix, FreesOnAnotherThreadAndStream)
{
  TypeParam r;
  constexpr std::size_t bytes = 4 * MiB;
  constexpr std::size_t words = bytes / sizeof(std::uint32_t);
  int const device            = r.device();

  // Stream-ordered: allocate and fill on thread A's stream, free on thread B's stream after an
  // event.
  cudaEvent_t ready{};
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  void* ptr{};
  std::thread producer([&] {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    test_stream const owned;
    cudaStream_t const s = owned.get();
    ptr                  = r.allocate(s, bytes);
    ASSERT_NE(ptr, nullptr);
    fill(ptr, bytes, 4242, s);
    EXPECT_EQ(cudaEventRecord(ready, s), cudaSuccess);
  });
  producer.join();
  ASSERT_NE(ptr, nullptr);

  std::vector<std::uint32_t> host(words);
  std::thread consumer([&] {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    test_stream const owned;
    cudaStream_t const s = owned.get();
    EXPECT_EQ(cudaStreamWaitEvent(s, ready, 0), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(host.data(), ptr, bytes, cudaMemcpyDefault, s), cudaSuccess);
    r.deallocate(s, ptr, bytes);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  });
  consumer.join();
  EXPECT_EQ(cudaEventDestroy(ready), cudaSuccess);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (host[i] != pattern(i, 4242)) { ++bad; }
  }
  EXPECT_EQ(bad, 0U);

  // Synchronous: allocate_sync on one thread, use and deallocate_sync on another.
  void* sync_ptr{};
  std::thread allocator([&] {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    sync_ptr = r.allocate_sync(bytes);
  });
  allocator.join();
  ASSERT_NE(sync_ptr, nullptr);
  std::thread user([&] {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    test_stream const owned;
    expect_usable<TypeParam>(sync_ptr, bytes, 4343, owned.get());  // syncs s
    r.deallocate_sync(sync_ptr, bytes);
  });
  user.join();
}

// ------------------------------------------------------------------------------------------------
// Kernels
// ------------------------------------------------------------------------------------------------

TYPED_TEST_P(async_resource_matrix, KernelsWriteAndReadTheMemory)
{
  using traits = resource_traits<TypeParam>;
  TypeParam r;
  constexpr std::size_t words = std::size_t{1} << 20;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  auto* in                    = static_cast<std::uint32_t*>(r.allocate(this->stream_, bytes));
  auto* out                   = static_cast<std::uint32_t*>(r.allocate(this->stream_, bytes));
  ASSERT_NE(in, nullptr);
  ASSERT_NE(out, nullptr);

  fill_kernel<std::uint32_t><<<grid_for(words), block_size, 0, this->stream_>>>(in, words, 7);
  transform_kernel<std::uint32_t>
    <<<grid_for(words), block_size, 0, this->stream_>>>(in, out, words);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);

  std::vector<std::uint32_t> host(words);
  if constexpr (traits::host_accessible) {
    // The host reads what the kernels wrote, directly.
    ASSERT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
    std::copy(out, out + words, host.begin());
  } else {
    ASSERT_EQ(cudaMemcpyAsync(host.data(), out, bytes, cudaMemcpyDeviceToHost, this->stream_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < words; ++i) {
    if (host[i] != 3U * pattern(i, 7) + 1U) { ++bad; }
  }
  EXPECT_EQ(bad, 0U);

  if constexpr (traits::host_accessible) {
    // Kernels read what the host wrote.
    for (std::size_t i = 0; i < words; ++i) {
      in[i] = static_cast<std::uint32_t>(i) ^ 0xa5a5a5a5U;
    }
    transform_kernel<std::uint32_t>
      <<<grid_for(words), block_size, 0, this->stream_>>>(in, out, words);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
    bad = 0;
    for (std::size_t i = 0; i < words; ++i) {
      if (out[i] != 3U * (static_cast<std::uint32_t>(i) ^ 0xa5a5a5a5U) + 1U) { ++bad; }
    }
    EXPECT_EQ(bad, 0U);
  }
  r.deallocate(this->stream_, in, bytes);
  r.deallocate(this->stream_, out, bytes);
}

// ------------------------------------------------------------------------------------------------
// Pools: attributes, statistics, ownership, equality
// ------------------------------------------------------------------------------------------------

TYPED_TEST_P(async_resource_matrix, ReleaseThresholdOfAdoptedPools)
{
  if constexpr (!resource_traits<TypeParam>::driver_pools) {
    TypeParam r;  // a pool of its own, which keeps all its memory
    EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
    return;
  }
  int const dev            = this->device_;
  cudaMemPool_t const cur  = current_pool_handle<TypeParam>(dev);
  cudaMemPool_t const dflt = default_pool_handle<TypeParam>(dev);
  ASSERT_NE(cur, nullptr);
  ASSERT_NE(dflt, nullptr);
  // Restored in reverse order; when both are one pool, both hold its original value.
  threshold_restorer const restore_current{cur};
  threshold_restorer const restore_default{dflt};
  std::uint64_t const original = release_threshold_of(cur);
  {
    TypeParam r;  // as a fresh process sees it unless someone set a threshold
    EXPECT_EQ(r.statistics().release_threshold, original == 0 ? UINT64_MAX : original);
  }

  // The driver's default of 0 is raised to UINT64_MAX...
  set_release_threshold(cur, 0);
  {
    TypeParam r;
    EXPECT_EQ(r.pool_handle(), cur);
    EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
    EXPECT_EQ(release_threshold_of(cur), UINT64_MAX);
  }
  // ...a non-zero one is left alone...
  set_release_threshold(cur, 7 * MiB);
  {
    TypeParam r{current_pool{}};
    EXPECT_EQ(r.statistics().release_threshold, 7 * MiB);
  }
  // ...and one the caller gives is set, 0 included.
  {
    TypeParam r{current_pool{.release_threshold = 5 * MiB}};
    EXPECT_EQ(r.statistics().release_threshold, 5 * MiB);
    EXPECT_EQ(release_threshold_of(cur), 5 * MiB);
  }
  {
    TypeParam r{current_pool{.release_threshold = 0}};
    EXPECT_EQ(r.statistics().release_threshold, 0U);
  }

  set_release_threshold(dflt, 0);
  {
    TypeParam r{default_pool{}};
    EXPECT_EQ(r.pool_handle(), dflt);
    EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
  }
  {
    TypeParam r{default_pool{.release_threshold = 3 * MiB}};
    EXPECT_EQ(r.statistics().release_threshold, 3 * MiB);
    EXPECT_EQ(release_threshold_of(dflt), 3 * MiB);
  }
}

TYPED_TEST_P(async_resource_matrix, OwnedPoolStatisticsFollowAllocations)
{
  constexpr std::size_t threshold = 16 * MiB;
  TypeParam r{pool_options{.release_threshold = threshold}};
  EXPECT_NE(r.pool_handle(), current_pool_handle<TypeParam>(this->device_));
  pool_statistics const s0 = r.statistics();
  EXPECT_EQ(s0.release_threshold, threshold);
  EXPECT_EQ(s0.used_bytes, 0U);

  constexpr std::size_t bytes = 8 * MiB;
  void* ptr                   = r.allocate_sync(bytes);
  ASSERT_NE(ptr, nullptr);
  pool_statistics const s1 = r.statistics();
  EXPECT_GE(s1.used_bytes, s0.used_bytes + bytes);
  EXPECT_GE(s1.reserved_bytes, s1.used_bytes);
  EXPECT_GE(s1.used_bytes_high, s1.used_bytes);
  EXPECT_GE(s1.reserved_bytes_high, s1.reserved_bytes);

  r.deallocate_sync(ptr, bytes);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  pool_statistics const s2 = r.statistics();
  EXPECT_LT(s2.used_bytes, s1.used_bytes);
  EXPECT_EQ(s2.used_bytes, s0.used_bytes);
  EXPECT_GE(s2.used_bytes_high, bytes);  // the watermark remembers

  r.reset_high_watermarks();
  pool_statistics const s3 = r.statistics();
  EXPECT_EQ(s3.used_bytes_high, s3.used_bytes);
  EXPECT_EQ(s3.reserved_bytes_high, s3.reserved_bytes);
}

TYPED_TEST_P(async_resource_matrix, OwnedPoolOptions)
{
  {
    TypeParam r{pool_options{}};
    EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);
  }
  {
    constexpr std::size_t initial = 32 * MiB;
    TypeParam r{pool_options{.initial_pool_size = initial}};
    pool_statistics const s = r.statistics();
    EXPECT_GE(s.reserved_bytes, initial) << "initial_pool_size primes the pool";
    EXPECT_EQ(s.used_bytes, 0U);
    EXPECT_EQ(s.release_threshold, UINT64_MAX);
    void* ptr = r.allocate_sync(initial / 2);
    ASSERT_NE(ptr, nullptr);
    r.deallocate_sync(ptr, initial / 2);
  }
  {
    std::string const msg = expect_throws<logic_error>([] {
      TypeParam r{pool_options{.initial_pool_size = 64 * MiB, .maximum_pool_size = 32 * MiB}};
    });
    EXPECT_TRUE(contains(msg, "initial_pool_size")) << msg;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, MaximumPoolSizeBoundsThePool)
{
  constexpr std::size_t maximum = 64 * MiB;
  if constexpr (!resource_traits<TypeParam>::bounded_pools) {
    try {
      TypeParam unbounded{pool_options{.maximum_pool_size = maximum}};
      ADD_FAILURE() << "an owned pool with maximum_pool_size was expected to be refused";
    } catch (not_supported const& e) {
      EXPECT_TRUE(contains(e.what(), "maximum_pool_size")) << e.what();
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return;
  }
  TypeParam r{pool_options{.maximum_pool_size = maximum}};
  void* held = r.allocate_sync(32 * MiB);
  ASSERT_NE(held, nullptr);

  // One request larger than the bound...
  std::string msg = expect_alloc_throws<out_of_memory>(
    r, 2 * maximum, [&] { return r.allocate(this->stream_, 2 * maximum); });
  EXPECT_TRUE(contains(msg, "out_of_memory")) << msg;
  EXPECT_TRUE(contains(msg, std::to_string(2 * maximum))) << msg;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // ...and one that fits alone but not next to what is held.
  msg = expect_alloc_throws<out_of_memory>(r, 48 * MiB, [&] { return r.allocate_sync(48 * MiB); });
  EXPECT_TRUE(contains(msg, std::to_string(48 * MiB))) << msg;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  void* more = r.allocate(this->stream_, 16 * MiB);  // within the bound: still works
  ASSERT_NE(more, nullptr);
  expect_usable<TypeParam>(more, 16 * MiB, 5, this->stream_);
  r.deallocate(this->stream_, more, 16 * MiB);
  r.deallocate_sync(held, 32 * MiB);
  EXPECT_LE(r.statistics().reserved_bytes_high, maximum + 2 * MiB);
}

TYPED_TEST_P(async_resource_matrix, MovedFromHandleStillAllocates)
{
  TypeParam original{pool_options{}};
  cudaMemPool_t const pool = original.pool_handle();
  TypeParam moved{std::move(original)};
  // Moving copies the handle: both name the pool and both allocate from it.
  EXPECT_EQ(original.pool_handle(), pool);  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(original == moved);
  for (TypeParam* r : {&original, &moved}) {
    void* p = r->allocate_sync(MiB);
    ASSERT_NE(p, nullptr);
    EXPECT_GE(r->statistics().used_bytes, MiB);
    r->deallocate_sync(p, MiB);
  }
}

TYPED_TEST_P(async_resource_matrix, OwnedPoolLivesWhileACopyDoes)
{
  std::optional<TypeParam> original{std::in_place, pool_options{.initial_pool_size = 8 * MiB}};
  cudaMemPool_t const pool = original->pool_handle();
  TypeParam copy           = *original;
  EXPECT_TRUE(copy == *original);
  EXPECT_EQ(copy.pool_handle(), pool);
  original.reset();

  // The pool outlives the resource that created it while a copy holds it.
  std::uint64_t reserved{};
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
            cudaSuccess);
  EXPECT_GE(reserved, 8 * MiB);
  void* a = copy.allocate_sync(MiB);
  void* b = copy.allocate(this->stream_, MiB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  expect_usable<TypeParam>(a, MiB, 31, this->stream_);
  expect_usable<TypeParam>(b, MiB, 32, this->stream_);
  copy.deallocate_sync(a, MiB);
  copy.deallocate(this->stream_, b, MiB);

  // Copies made from copies share the pool too; assignment and move keep it.
  TypeParam third{pool_options{}};
  EXPECT_FALSE(third == copy);
  third = copy;
  EXPECT_TRUE(third == copy);
  TypeParam moved = std::move(third);
  EXPECT_EQ(moved.pool_handle(), pool);
  void* c = moved.allocate(this->stream_, KiB);
  ASSERT_NE(c, nullptr);
  moved.deallocate(this->stream_, c, KiB);
  // Destroying the last copies destroys the pool. Its handle is then dangling and is not
  // queried here; async_device_resource_gpu_test observes the release through cudaMemGetInfo.
}

TYPED_TEST_P(async_resource_matrix, ViewNeverDestroysTheCallersPool)
{
  cudaMemPool_t const pool = make_test_pool<TypeParam>(this->device_);
  ASSERT_NE(pool, nullptr);
  {
    TypeParam view{pool};
    TypeParam copy = view;
    EXPECT_EQ(view.pool_handle(), pool);
    EXPECT_TRUE(copy == view);
    EXPECT_FALSE(view == TypeParam{});
    // A view's attributes are not modified: the threshold stays the driver's 0.
    EXPECT_EQ(view.statistics().release_threshold, 0U);
    void* ptr = copy.allocate(this->stream_, MiB);
    ASSERT_NE(ptr, nullptr);
    expect_memory_kind<TypeParam>(ptr, this->device_);
    expect_usable<TypeParam>(ptr, MiB, 9, this->stream_);
    copy.deallocate(this->stream_, ptr, MiB);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Both resources are gone; the pool still works.
  void* ptr{};
  EXPECT_EQ(cudaMallocFromPoolAsync(&ptr, MiB, pool, this->stream_), cudaSuccess);
  EXPECT_NE(ptr, nullptr);
  EXPECT_EQ(cudaFreeAsync(ptr, this->stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, EqualityFollowsThePool)
{
  int const dev           = this->device_;
  cudaMemPool_t const cur = current_pool_handle<TypeParam>(dev);
  cudaMemPool_t const def = default_pool_handle<TypeParam>(dev);

  TypeParam const a;
  TypeParam const b = a;
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  if constexpr (!resource_traits<TypeParam>::driver_pools) {
    // No driver pool to share: each default construction creates a pool of its own.
    TypeParam const other{current_pool{}};
    TypeParam const dflt{default_pool{}};
    EXPECT_FALSE(a == other);
    EXPECT_FALSE(a == dflt);
    EXPECT_NE(a.pool_handle(), nullptr);
    return;
  }
  EXPECT_EQ(a.pool_handle(), cur) << "default construction uses the current pool";

  TypeParam const by_device{dev};
  TypeParam const current{current_pool{}};
  TypeParam const current_on{current_pool{}, dev};
  EXPECT_TRUE(a == by_device);
  EXPECT_TRUE(a == current);
  EXPECT_TRUE(a == current_on);
  EXPECT_EQ(current_on.device(), dev);

  TypeParam const dflt{default_pool{}};
  EXPECT_EQ(dflt.pool_handle(), def);
  EXPECT_EQ(a == dflt, cur == def);

  TypeParam const owned1{pool_options{}};
  TypeParam const owned2{pool_options{}};
  EXPECT_FALSE(owned1 == owned2);
  EXPECT_TRUE(owned1 != owned2);
  EXPECT_FALSE(owned1 == a);
  EXPECT_FALSE(owned1 == dflt);
  TypeParam const owned1_copy = owned1;
  EXPECT_TRUE(owned1_copy == owned1);
}

// ------------------------------------------------------------------------------------------------
// Synchronous allocation, stream capture, refs, devices
// ------------------------------------------------------------------------------------------------

TYPED_TEST_P(async_resource_matrix, AllocateSyncDoesNotWaitForOtherStreams)
{
  using traits = resource_traits<TypeParam>;
  TypeParam r;
  {  // warm the pool so that the timed call needs nothing new from the driver
    void* w = r.allocate_sync(MiB);
    r.deallocate_sync(w, MiB);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  int* started{};
  ASSERT_EQ(cudaHostAlloc(&started, sizeof(int), cudaHostAllocMapped), cudaSuccess);
  *static_cast<int volatile*>(started) = 0;
  test_stream const busy_stream;
  cudaStream_t const busy = busy_stream.get();

  constexpr unsigned long long spin_ns = 2'000'000'000ULL;  // 2 s
  spin_kernel<int><<<1, 32, 0, busy>>>(spin_ns, started);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  auto const launched = std::chrono::steady_clock::now();
  while (*static_cast<int volatile*>(started) == 0 &&
         std::chrono::steady_clock::now() - launched < std::chrono::seconds{10}) {
    std::this_thread::yield();
  }
  EXPECT_EQ(*static_cast<int volatile*>(started), 1) << "the spin kernel did not start";

  auto const t0             = std::chrono::steady_clock::now();
  void* ptr                 = r.allocate_sync(MiB);
  auto const elapsed        = std::chrono::steady_clock::now() - t0;
  cudaError_t const running = cudaStreamQuery(busy);
  EXPECT_EQ(running, cudaErrorNotReady) << "the spin kernel finished before allocate_sync returned";
  EXPECT_LT(elapsed, std::chrono::milliseconds{200})
    << "allocate_sync took "
    << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
  ASSERT_NE(ptr, nullptr);
  if constexpr (traits::host_accessible) {
    std::memset(ptr, 0x11, MiB);  // the host may use it at once
    EXPECT_EQ(static_cast<unsigned char*>(ptr)[MiB - 1], 0x11);
  }
  r.deallocate_sync(ptr, MiB);

  EXPECT_EQ(cudaStreamSynchronize(busy), cudaSuccess);
  cudaError_t const last = cudaGetLastError();  // cudaErrorNotReady is a status, not an error
  EXPECT_TRUE(last == cudaSuccess || last == cudaErrorNotReady) << cudaGetErrorName(last);
  EXPECT_EQ(cudaFreeHost(started), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, AllocatesInsideStreamCapture)
{
  using traits = resource_traits<TypeParam>;
  TypeParam r;
  constexpr std::size_t words = 64 * KiB;
  constexpr std::size_t bytes = words * sizeof(std::uint32_t);
  test_stream const capture_stream;
  cudaStream_t const cs = capture_stream.get();
  std::uint32_t* host_out{};
  ASSERT_EQ(cudaMallocHost(&host_out, bytes), cudaSuccess);

  cudaGraph_t graph{};
  cudaGraphExec_t exec{};
  // Where the driver cannot capture the allocation, the resource must say so with a typed error.
  auto rejected = [&](char const* stage, std::string const& what) {
    (void)cudaGetLastError();
    std::string const msg = std::string{"stream capture rejected at "} + stage + ": " + what;
    if constexpr (traits::capture_works) {
      ADD_FAILURE() << msg;
    } else {
      EXPECT_EQ(std::string{stage}, "allocate (a typed rmm_next error)") << msg;
      note(msg);
    }
  };

  ASSERT_EQ(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* ptr{};
  std::string alloc_error;
  try {
    ptr = r.allocate(cs, bytes);
  } catch (rmm_next::not_supported const& e) {
    // The one accepted way to refuse: a typed error that says what capture needs.
    alloc_error = e.what();
    EXPECT_NE(alloc_error.find("stream capture"), std::string::npos) << alloc_error;
  } catch (std::exception const& e) {
    ADD_FAILURE() << "allocation during capture must succeed or throw not_supported: " << e.what();
    alloc_error = e.what();
  }
  if (ptr != nullptr) {
    EXPECT_TRUE(is_aligned(ptr, 256));
    fill(ptr, bytes, 99, cs);
    EXPECT_EQ(cudaMemcpyAsync(host_out, ptr, bytes, cudaMemcpyDefault, cs), cudaSuccess);
    r.deallocate(cs, ptr, bytes);
  }
  cudaError_t const ended = cudaStreamEndCapture(cs, &graph);
  bool ok                 = true;
  if (!alloc_error.empty()) {
    rejected("allocate (a typed rmm_next error)", alloc_error);
    ok = false;
  } else if (ended != cudaSuccess) {
    rejected("cudaStreamEndCapture", cudaGetErrorName(ended));
    ok = false;
  } else if (cudaError_t const s = cudaGraphInstantiate(&exec, graph, 0); s != cudaSuccess) {
    rejected("cudaGraphInstantiate", cudaGetErrorName(s));
    ok = false;
  }
  if (ok) {
    for (int launch = 0; launch < 3; ++launch) {
      SCOPED_TRACE("graph launch " + std::to_string(launch));
      std::fill(host_out, host_out + words, 0U);
      ASSERT_EQ(cudaGraphLaunch(exec, cs), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(cs), cudaSuccess);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < words; ++i) {
        if (host_out[i] != pattern(i, 99)) { ++bad; }
      }
      EXPECT_EQ(bad, 0U);
    }
    if constexpr (!traits::capture_works) { ADD_FAILURE() << "capture was expected to be refused"; }
  }
  if (exec != nullptr) { EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess); }
  if (graph != nullptr) { EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess); }
  EXPECT_EQ(cudaFreeHost(host_out), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // The resource still works outside capture.
  void* after = r.allocate(this->stream_, MiB);
  ASSERT_NE(after, nullptr);
  expect_usable<TypeParam>(after, MiB, 100, this->stream_);
  r.deallocate(this->stream_, after, MiB);
}

TYPED_TEST_P(async_resource_matrix, RefsAllocateAndDeallocate)
{
  using traits = resource_traits<TypeParam>;
  TypeParam r;
  constexpr std::size_t bytes = MiB;
  cuda::stream_ref const stream{this->stream_};

  device_async_resource_ref ref{r};
  void* p = ref.allocate(stream, bytes, 256);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(p, 256));
  expect_usable<TypeParam>(p, bytes, 201, this->stream_);
  ref.deallocate(stream, p, bytes, 256);
  void* q = ref.allocate_sync(bytes, 256);
  ASSERT_NE(q, nullptr);
  expect_usable<TypeParam>(q, bytes, 202, this->stream_);
  ref.deallocate_sync(q, bytes, 256);

  device_resource_ref sync_ref{r};
  void* s = sync_ref.allocate_sync(bytes, 128);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(is_aligned(s, 128));
  expect_usable<TypeParam>(s, bytes, 203, this->stream_);
  sync_ref.deallocate_sync(s, bytes, 128);

  if constexpr (traits::host_accessible) {
    host_device_async_resource_ref href{r};
    auto* h = static_cast<std::uint32_t*>(href.allocate(stream, bytes, 256));
    ASSERT_NE(h, nullptr);
    expect_usable<TypeParam>(h, bytes, 204, this->stream_);  // checks on the host directly
    h[0] = 0xdeadbeefU;
    EXPECT_EQ(h[0], 0xdeadbeefU);
    href.deallocate(stream, h, bytes, 256);

    host_device_resource_ref hsync{r};
    void* hs = hsync.allocate_sync(bytes, 256);
    ASSERT_NE(hs, nullptr);
    expect_usable<TypeParam>(hs, bytes, 205, this->stream_);
    hsync.deallocate_sync(hs, bytes, 256);

    host_async_resource_ref host_only{r};
    void* ho = host_only.allocate_sync(bytes, 256);
    ASSERT_NE(ho, nullptr);
    std::memset(ho, 1, bytes);
    host_only.deallocate_sync(ho, bytes, 256);
  }
  EXPECT_EQ(cudaStreamSynchronize(this->stream_), cudaSuccess);
}

TYPED_TEST_P(async_resource_matrix, UnknownDeviceThrowsOutOfRangeNamingIt)
{
  std::string msg = expect_throws<std::out_of_range>([] { (void)TypeParam{current_pool{}, 99}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  msg = expect_throws<std::out_of_range>([] { (void)TypeParam{99}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  msg = expect_throws<std::out_of_range>([] { (void)TypeParam{default_pool{}, 99}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  msg = expect_throws<std::out_of_range>([] { (void)TypeParam{pool_options{}, 99}; });
  EXPECT_TRUE(contains(msg, "99")) << msg;
  msg = expect_throws<std::out_of_range>([] { (void)TypeParam{current_pool{}, -1}; });
  EXPECT_TRUE(contains(msg, "-1")) << msg;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

REGISTER_TYPED_TEST_SUITE_P(async_resource_matrix,
                            ZeroBytesReturnsNullptrAndNullptrFreesNothing,
                            AllocatesAlignedUsableMemoryOfItsKind,
                            ExhaustionThrowsOutOfMemoryAndTheResourceKeepsWorking,
                            BadAlignmentThrowsBadAllocNamingIt,
                            RandomSizesInterleavedWithFrees,
                            ManyThreadsAllocateAndFreeConcurrently,
                            FreesOnAnotherThreadAndStream,
                            KernelsWriteAndReadTheMemory,
                            ReleaseThresholdOfAdoptedPools,
                            OwnedPoolStatisticsFollowAllocations,
                            OwnedPoolOptions,
                            MaximumPoolSizeBoundsThePool,
                            MovedFromHandleStillAllocates,
                            OwnedPoolLivesWhileACopyDoes,
                            ViewNeverDestroysTheCallersPool,
                            EqualityFollowsThePool,
                            AllocateSyncDoesNotWaitForOtherStreams,
                            AllocatesInsideStreamCapture,
                            RefsAllocateAndDeallocate,
                            UnknownDeviceThrowsOutOfRangeNamingIt);

}  // namespace rmm_next::test
