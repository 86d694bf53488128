/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// CPU tests of prefetch_adaptor. The program defines the CUDA runtime functions the adaptor calls
// (extern "C": the program's own definitions take the place of libcudart's) and answers them from
// a fake that records every prefetch and knows which memory each fake upstream hands out. It
// checks: every allocation prefetched exactly once, with its pointer, size, device and stream;
// the synchronous path prefetching on the adaptor's stream and waiting for it; the refusals at
// construction (memory that is not managed, a device without concurrent managed access, an
// unknown device, no device at all), each typed and with its message; a failed prefetch freeing
// the block and throwing; copies sharing one stream; and 8 threads allocating at once.

#include "support/entry_points.hpp"
#include "support/fake_resource.hpp"

#include <rmm_next/async_managed_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/prefetch_adaptor.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace fake {

/** @brief One cudaMemPrefetchAsync call. */
struct prefetch {
  void const* ptr;
  std::size_t bytes;
  int device;
  cudaStream_t stream;
  friend bool operator==(prefetch const&, prefetch const&) = default;
  friend bool operator<(prefetch const& a, prefetch const& b)
  {
    return std::tie(a.ptr, a.bytes, a.device, a.stream) <
           std::tie(b.ptr, b.bytes, b.device, b.stream);
  }
};

/** @brief What the fake runtime knows and records; `reset()` starts over. */
struct state {
  std::mutex mutex;
  int device_count{2};
  int current_device{0};
  std::map<int, int> concurrent_managed_access;     ///< per device; 1 when absent
  std::map<std::uintptr_t, cudaMemoryType> memory;  ///< live blocks of the typed resources
  std::vector<prefetch> prefetches;
  std::map<std::string, cudaError_t> fail_next;  ///< call name -> error its next call returns
  std::array<int, 64> stream_storage{};          ///< streams are addresses in here
  int streams_created{0};
  int streams_destroyed{0};
  std::vector<cudaStream_t> synchronized;
};

state& get()
{
  static state s;
  return s;
}

void reset()
{
  state& s = get();
  std::lock_guard const lock{s.mutex};
  s.device_count   = 2;
  s.current_device = 0;
  s.concurrent_managed_access.clear();
  s.memory.clear();
  s.prefetches.clear();
  s.fail_next.clear();
  s.streams_created   = 0;
  s.streams_destroyed = 0;
  s.synchronized.clear();
}

/** @brief The error the next call of `name` was told to return, once; cudaSuccess otherwise. */
cudaError_t injected(char const* name)
{
  auto& failures = get().fail_next;
  auto const it  = failures.find(name);
  if (it == failures.end()) { return cudaSuccess; }
  cudaError_t const status = it->second;
  failures.erase(it);
  return status;
}

std::vector<prefetch> prefetches()
{
  std::lock_guard const lock{get().mutex};
  return get().prefetches;
}

std::vector<cudaStream_t> synchronized()
{
  std::lock_guard const lock{get().mutex};
  return get().synchronized;
}

void fail_next(std::string const& call, cudaError_t status)
{
  std::lock_guard const lock{get().mutex};
  get().fail_next[call] = status;
}

cudaError_t record_prefetch(void const* ptr, std::size_t bytes, int device, cudaStream_t stream)
{
  std::lock_guard const lock{get().mutex};
  if (cudaError_t const s = injected("cudaMemPrefetchAsync"); s != cudaSuccess) { return s; }
  get().prefetches.push_back({ptr, bytes, device, stream});
  return cudaSuccess;
}

}  // namespace fake

// ---- The runtime ------------------------------------------------------------------------------

extern "C" {

cudaError_t cudaGetLastError() { return cudaSuccess; }

cudaError_t cudaGetDeviceCount(int* count)
{
  std::lock_guard const lock{fake::get().mutex};
  if (cudaError_t const s = fake::injected("cudaGetDeviceCount"); s != cudaSuccess) { return s; }
  *count = fake::get().device_count;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device)
{
  std::lock_guard const lock{fake::get().mutex};
  *device = fake::get().current_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device)
{
  std::lock_guard const lock{fake::get().mutex};
  if (device < 0 || device >= fake::get().device_count) { return cudaErrorInvalidDevice; }
  auto const& managed = fake::get().concurrent_managed_access;
  auto const it       = managed.find(device);
  *value = attr != cudaDevAttrConcurrentManagedAccess || it == managed.end() ? 1 : it->second;
  return cudaSuccess;
}

// No driver entry point: device_guard then accepts only the device that is current already.
cudaError_t cudaGetDriverEntryPointByVersion(char const* symbol,
                                             void** function,
                                             unsigned int /*version*/,
                                             unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* status)
{
  return rmm_next::test::answer_entry_point({}, symbol, function, status);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags)
{
  std::lock_guard const lock{fake::get().mutex};
  if (flags != cudaStreamNonBlocking) { return cudaErrorInvalidValue; }
  fake::state& s = fake::get();
  *stream        = reinterpret_cast<cudaStream_t>(&s.stream_storage.at(s.streams_created++));
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t)
{
  std::lock_guard const lock{fake::get().mutex};
  ++fake::get().streams_destroyed;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
  std::lock_guard const lock{fake::get().mutex};
  if (cudaError_t const s = fake::injected("cudaStreamSynchronize"); s != cudaSuccess) { return s; }
  fake::get().synchronized.push_back(stream);
  return cudaSuccess;
}

#if CUDART_VERSION >= 13000
cudaError_t cudaMemPrefetchAsync(
  void const* ptr, size_t bytes, cudaMemLocation location, unsigned int flags, cudaStream_t stream)
{
  if (location.type != cudaMemLocationTypeDevice || flags != 0) { return cudaErrorInvalidValue; }
  return fake::record_prefetch(ptr, bytes, location.id, stream);
}
#else
cudaError_t cudaMemPrefetchAsync(void const* ptr, size_t bytes, int device, cudaStream_t stream)
{
  return fake::record_prefetch(ptr, bytes, device, stream);
}
#endif

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, void const* ptr)
{
  std::lock_guard const lock{fake::get().mutex};
  if (cudaError_t const s = fake::injected("cudaPointerGetAttributes"); s != cudaSuccess) {
    return s;
  }
  *attributes      = cudaPointerAttributes{};
  auto const it    = fake::get().memory.find(reinterpret_cast<std::uintptr_t>(ptr));
  attributes->type = it == fake::get().memory.end() ? cudaMemoryTypeUnregistered : it->second;
  return cudaSuccess;
}

}  // extern "C"

namespace rmm_next::test {
namespace {

/**
 * @brief Host memory that the fake runtime takes for memory of `Type`. With `Sync` false it has
 * stream-ordered members only. Records the stream of each allocation.
 */
template <cudaMemoryType Type, bool Sync = true>
class typed_resource {
 public:
  [[nodiscard]] void* allocate_sync(std::size_t bytes, std::size_t alignment = default_alignment)
    requires Sync
  {
    return allocate_block(bytes, alignment);
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment)
    requires Sync
  {
    free_block(ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    {
      std::lock_guard const lock{fake::get().mutex};
      streams_->push_back(stream.get());
    }
    return allocate_block(bytes, alignment);
  }
  void deallocate(cuda::stream_ref, void* ptr, std::size_t bytes, std::size_t alignment)
  {
    free_block(ptr, bytes, alignment);
  }
  // CCCL 3.0 members (cuda::mr::resource / async_resource before CCCL 3.1).
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment)
    requires Sync
  {
    return allocate_block(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment)
    requires Sync
  {
    free_block(ptr, bytes, alignment);
  }
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref s)
  {
    return allocate(s, bytes, alignment);
  }
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, cuda::stream_ref s)
  {
    deallocate(s, ptr, bytes, alignment);
  }

  [[nodiscard]] long allocations() const noexcept { return memory_.allocations(); }
  [[nodiscard]] long deallocations() const noexcept { return memory_.deallocations(); }
  /** @brief The stream of every stream-ordered allocation so far. */
  [[nodiscard]] std::vector<cudaStream_t> const& streams() const noexcept { return *streams_; }

  friend bool operator==(typed_resource const& lhs, typed_resource const& rhs) noexcept
  {
    return lhs.memory_ == rhs.memory_;
  }
  friend constexpr void get_property(typed_resource const&, cuda::mr::device_accessible) noexcept {}
  friend constexpr void get_property(typed_resource const&, cuda::mr::host_accessible) noexcept {}

 private:
  void* allocate_block(std::size_t bytes, std::size_t alignment)
  {
    void* ptr = memory_.allocate_sync(bytes, alignment);
    if (ptr == nullptr) { return nullptr; }
    std::lock_guard const lock{fake::get().mutex};
    fake::get().memory[reinterpret_cast<std::uintptr_t>(ptr)] = Type;
    return ptr;
  }
  void free_block(void* ptr, std::size_t bytes, std::size_t alignment)
  {
    if (ptr == nullptr) { return; }
    {
      std::lock_guard const lock{fake::get().mutex};
      fake::get().memory.erase(reinterpret_cast<std::uintptr_t>(ptr));
    }
    memory_.deallocate_sync(ptr, bytes, alignment);
  }

  fake_resource memory_;
  std::shared_ptr<std::vector<cudaStream_t>> streams_ =
    std::make_shared<std::vector<cudaStream_t>>();
};

using managed_resource = typed_resource<cudaMemoryTypeManaged>;
using adaptor          = prefetch_adaptor<managed_resource>;

cudaStream_t stream(int n) { return reinterpret_cast<cudaStream_t>(0x1000 + 0x10 * n); }

/** @brief Starts each test with a fresh fake runtime. */
class prefetch_adaptor_test : public ::testing::Test {
 protected:
  void SetUp() override { fake::reset(); }
};

/** @brief The message of the exception `f()` throws as `E` ("" and a failure if none). */
template <class E, class F>
std::string message_of(F&& f)
{
  try {
    f();
  } catch (E const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception of the expected type";
  return {};
}

/**
 * @brief Expects `f()` to throw a `cuda_error` (not a `not_supported`) of `code` whose message
 * starts with `prefix`; returns the message.
 */
template <class F>
std::string expect_cuda_error(F&& f, cudaError_t code, std::string const& prefix)
{
  try {
    f();
  } catch (not_supported const& e) {
    ADD_FAILURE() << "not_supported: " << e.what();
    return e.what();
  } catch (cuda_error const& e) {
    EXPECT_EQ(e.code(), code);
    EXPECT_EQ(std::string{e.what()}.rfind(prefix, 0), 0U) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no cuda_error";
  return {};
}

// ---- What the adaptor is ------------------------------------------------------------------------

static_assert(rmm_next::detail::stream_ordered_resource_with<adaptor,
                                                             cuda::mr::device_accessible,
                                                             cuda::mr::host_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<adaptor,
                                                          cuda::mr::device_accessible,
                                                          cuda::mr::host_accessible>);
static_assert(
  rmm_next::detail::stream_ordered_resource_with<prefetch_adaptor<async_managed_resource>,
                                                 cuda::mr::device_accessible,
                                                 cuda::mr::host_accessible>);
static_assert(rmm_next::detail::stream_ordered_resource_with<
              prefetch_adaptor<thread_cache_adaptor<async_managed_resource>>,
              cuda::mr::device_accessible,
              cuda::mr::host_accessible>);
static_assert(std::is_constructible_v<host_device_async_resource_ref,
                                      prefetch_adaptor<async_managed_resource>&>);
static_assert(std::is_constructible_v<host_device_async_resource_ref, adaptor&>);
static_assert(
  std::is_constructible_v<device_async_resource_ref, prefetch_adaptor<device_async_resource_ref>&>);
static_assert(
  !cuda::has_property<prefetch_adaptor<device_async_resource_ref>, cuda::mr::host_accessible>);
static_assert(rmm_next::detail::synchronous_resource_with<prefetch_adaptor<device_resource_ref>,
                                                          cuda::mr::device_accessible>);
static_assert(
  !rmm_next::detail::stream_ordered_resource_with<prefetch_adaptor<device_resource_ref>>);
static_assert(!rmm_next::detail::synchronous_upstream<
              prefetch_adaptor<typed_resource<cudaMemoryTypeManaged, false>>>);
static_assert(std::is_copy_constructible_v<adaptor> && std::is_copy_assignable_v<adaptor>);

// ---- Prefetching --------------------------------------------------------------------------------

TEST_F(prefetch_adaptor_test, EveryAllocationIsPrefetchedOnceWithItsPointerSizeDeviceAndStream)
{
  managed_resource upstream;
  adaptor a{upstream, 0};
  EXPECT_EQ(a.device(), 0);
  EXPECT_TRUE(fake::prefetches().empty());  // the probe is not prefetched
  EXPECT_EQ(upstream.allocations(), 1);     // ... but was allocated and freed
  EXPECT_EQ(upstream.deallocations(), 1);

  std::vector<fake::prefetch> expected;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int i = 0; i < 6; ++i) {
    std::size_t const bytes = 1000 * static_cast<std::size_t>(i + 1);
    void* p                 = a.allocate(stream(i % 3), bytes);
    ASSERT_NE(p, nullptr);
    expected.push_back({p, bytes, 0, stream(i % 3)});
    blocks.emplace_back(p, bytes);
  }
  EXPECT_EQ(fake::prefetches(), expected);
  EXPECT_TRUE(fake::synchronized().empty());  // stream-ordered: nothing waits

  // Synchronous: on the adaptor's own stream, waited for once.
  cudaStream_t const own = reinterpret_cast<cudaStream_t>(&fake::get().stream_storage[0]);
  void* s                = a.allocate_sync(4096, 128);
  expected.push_back({s, 4096, 0, own});
  EXPECT_EQ(fake::prefetches(), expected);
  EXPECT_EQ(fake::synchronized(), std::vector<cudaStream_t>{own});

  // 0 bytes: nothing to prefetch.
  EXPECT_EQ(a.allocate(stream(1), 0), nullptr);
  EXPECT_EQ(a.allocate_sync(0), nullptr);
  EXPECT_EQ(fake::prefetches().size(), expected.size());

  // Frees pass through and prefetch nothing.
  for (auto const& [p, bytes] : blocks) {
    a.deallocate(stream(0), p, bytes);
  }
  a.deallocate_sync(s, 4096, 128);
  EXPECT_EQ(fake::prefetches().size(), expected.size());
  EXPECT_EQ(upstream.allocations(), 1 + 7);
  EXPECT_EQ(upstream.deallocations(), 1 + 7);
  EXPECT_TRUE(fake::get().memory.empty());
}

TEST_F(prefetch_adaptor_test, PrefetchesToTheDeviceItWasGiven)
{
  managed_resource upstream;
  fake::get().current_device = 1;  // without driver entry points, the guard needs it current
  adaptor a{upstream, 1};
  fake::get().current_device = 0;
  void* p                    = a.allocate(stream(7), 64);
  EXPECT_EQ(fake::prefetches(), (std::vector<fake::prefetch>{{p, 64, 1, stream(7)}}));
  a.deallocate(stream(7), p, 64);
}

TEST_F(prefetch_adaptor_test, ThroughARef)
{
  managed_resource upstream;
  adaptor a{upstream, 0};
  host_device_async_resource_ref ref{a};
  void* p = ref.allocate(stream(2), 512, default_alignment);
  EXPECT_EQ(fake::prefetches(), (std::vector<fake::prefetch>{{p, 512, 0, stream(2)}}));
  ref.deallocate(stream(2), p, 512, default_alignment);

  // And over one: the ref hides the memory's kind, the probe finds it.
  prefetch_adaptor<device_async_resource_ref> over{device_async_resource_ref{upstream}, 0};
  void* q = over.allocate(stream(3), 256);
  EXPECT_EQ(fake::prefetches().back(), (fake::prefetch{q, 256, 0, stream(3)}));
  over.deallocate(stream(3), q, 256);
}

TEST_F(prefetch_adaptor_test, AStreamOrderedUpstreamIsProbedOnTheAdaptorsStream)
{
  typed_resource<cudaMemoryTypeManaged, false> upstream;
  prefetch_adaptor a{upstream, 0};
  cudaStream_t const own = reinterpret_cast<cudaStream_t>(&fake::get().stream_storage[0]);
  EXPECT_EQ(upstream.streams(), std::vector<cudaStream_t>{own});
  EXPECT_EQ(upstream.deallocations(), 1);
  void* p = a.allocate(stream(4), 100);
  EXPECT_EQ(fake::prefetches(), (std::vector<fake::prefetch>{{p, 100, 0, stream(4)}}));
  a.deallocate(stream(4), p, 100);
}

TEST_F(prefetch_adaptor_test, CopiesShareOneStreamDestroyedWithTheLast)
{
  managed_resource upstream;
  {
    adaptor a{upstream, 0};
    adaptor b = a;  // NOLINT(performance-unnecessary-copy-initialization): the copy is the point
    adaptor c{upstream, 0};
    EXPECT_TRUE(a == b);
    EXPECT_FALSE(a == c);
    EXPECT_TRUE(a.upstream_resource() == upstream);
    EXPECT_EQ(fake::get().streams_created, 2);
    void* p = b.allocate_sync(64);
    void* q = a.allocate_sync(64);
    EXPECT_EQ(fake::prefetches()[0].stream, fake::prefetches()[1].stream);
    a.deallocate_sync(p, 64);
    b.deallocate_sync(q, 64);
    EXPECT_EQ(fake::get().streams_destroyed, 0);
  }
  EXPECT_EQ(fake::get().streams_destroyed, 2);
}

// ---- Refusals at construction -------------------------------------------------------------------

TEST_F(prefetch_adaptor_test, RefusesMemoryThatIsNotManaged)
{
  auto const refused = [](auto upstream, char const* kind) {
    std::string const msg = message_of<not_supported>([&] { prefetch_adaptor a{upstream, 0}; });
    EXPECT_EQ(msg,
              std::string{"rmm_next::prefetch_adaptor: the upstream hands out "} + kind +
                ", which cannot be prefetched; wrap a resource of managed memory, such as "
                "async_managed_resource");
    EXPECT_EQ(upstream.allocations(), 1) << kind;  // the probe, freed again
    EXPECT_EQ(upstream.deallocations(), 1) << kind;
  };
  refused(typed_resource<cudaMemoryTypeDevice>{}, "device memory");
  refused(typed_resource<cudaMemoryTypeHost>{}, "pinned host memory");  // host+device accessible
  refused(fake_resource{}, "host memory unknown to CUDA");
  EXPECT_TRUE(fake::prefetches().empty());
  EXPECT_EQ(fake::get().streams_created, 3);
  EXPECT_EQ(fake::get().streams_destroyed, 3);
  try {
    prefetch_adaptor a{typed_resource<cudaMemoryTypeDevice>{}, 0};
  } catch (not_supported const& e) {
    EXPECT_EQ(e.code(), cudaErrorNotSupported);
  }
}

TEST_F(prefetch_adaptor_test, RefusesADeviceWithoutConcurrentManagedAccess)
{
  fake::get().concurrent_managed_access[1] = 0;
  managed_resource upstream;
  EXPECT_EQ(message_of<not_supported>([&] { adaptor a{upstream, 1}; }),
            "rmm_next::prefetch_adaptor: prefetching managed memory needs a device with "
            "cudaDevAttrConcurrentManagedAccess; device 1 reports 0; allocate without the "
            "adaptor on this device");
  EXPECT_EQ(upstream.allocations(), 0);  // refused before the probe
  EXPECT_EQ(fake::get().streams_created, 0);
  adaptor const on_zero{upstream, 0};  // device 0 can
  EXPECT_EQ(on_zero.device(), 0);
}

TEST_F(prefetch_adaptor_test, AnUnknownDeviceIsOutOfRange)
{
  managed_resource upstream;
  EXPECT_EQ(message_of<std::out_of_range>([&] { adaptor a{upstream, 2}; }),
            "rmm_next::prefetch_adaptor: device id 2 is out of range [0, 2): 2 device(s) are "
            "visible");
  EXPECT_EQ(message_of<std::out_of_range>([&] { adaptor a{upstream, -1}; }),
            "rmm_next::prefetch_adaptor: device id -1 is out of range [0, 2): 2 device(s) are "
            "visible");
  EXPECT_EQ(upstream.allocations(), 0);
}

TEST_F(prefetch_adaptor_test, NoDeviceAtAllSaysSo)
{
  fake::fail_next("cudaGetDeviceCount", cudaErrorNoDevice);
  managed_resource upstream;
  std::string const msg =
    expect_cuda_error([&] { adaptor a{upstream, 0}; },
                      cudaErrorNoDevice,
                      "rmm_next::prefetch_adaptor: cudaGetDeviceCount returned cudaErrorNoDevice");
  EXPECT_NE(msg.find("no CUDA device is visible"), std::string::npos) << msg;
}

TEST_F(prefetch_adaptor_test, AFailedProbeQueryFreesTheProbe)
{
  fake::fail_next("cudaPointerGetAttributes", cudaErrorInvalidValue);
  managed_resource upstream;
  expect_cuda_error(
    [&] { adaptor a{upstream, 0}; },
    cudaErrorInvalidValue,
    "rmm_next::prefetch_adaptor: cudaPointerGetAttributes returned cudaErrorInvalidValue");
  EXPECT_EQ(upstream.allocations(), 1);
  EXPECT_EQ(upstream.deallocations(), 1);
  EXPECT_EQ(fake::get().streams_destroyed, fake::get().streams_created);
}

// ---- A failing prefetch -------------------------------------------------------------------------

TEST_F(prefetch_adaptor_test, AFailedPrefetchFreesTheBlockAndThrows)
{
  managed_resource upstream;
  adaptor a{upstream, 0};
  long const allocations = upstream.allocations();

  fake::fail_next("cudaMemPrefetchAsync", cudaErrorInvalidDevice);
  expect_cuda_error([&] { (void)a.allocate(stream(1), 4096); },
                    cudaErrorInvalidDevice,
                    "rmm_next::prefetch_adaptor: cudaMemPrefetchAsync returned "
                    "cudaErrorInvalidDevice");
  EXPECT_EQ(upstream.allocations(), allocations + 1);
  EXPECT_EQ(upstream.deallocations(), allocations + 1);  // freed, not leaked

  fake::fail_next("cudaMemPrefetchAsync", cudaErrorNotSupported);
  EXPECT_THROW((void)a.allocate_sync(64), not_supported);
  fake::fail_next("cudaStreamSynchronize", cudaErrorLaunchFailure);
  expect_cuda_error([&] { (void)a.allocate_sync(64); },
                    cudaErrorLaunchFailure,
                    "rmm_next::prefetch_adaptor: cudaStreamSynchronize returned "
                    "cudaErrorLaunchFailure");
  EXPECT_EQ(upstream.allocations(), upstream.deallocations());
  EXPECT_TRUE(fake::get().memory.empty());

  // It works afterwards.
  void* p = a.allocate(stream(1), 128);
  EXPECT_EQ(fake::prefetches().back(), (fake::prefetch{p, 128, 0, stream(1)}));
  a.deallocate(stream(1), p, 128);
}

// ---- Threads ------------------------------------------------------------------------------------

TEST_F(prefetch_adaptor_test, EveryAllocationOfEightThreadsIsPrefetchedOnce)
{
  constexpr int threads = 8;
  constexpr int rounds  = 500;
  managed_resource upstream;
  adaptor const shared{upstream, 0};
  cudaStream_t const own = reinterpret_cast<cudaStream_t>(&fake::get().stream_storage[0]);
  std::vector<std::vector<fake::prefetch>> made(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      adaptor a = shared;
      for (int i = 0; i < rounds; ++i) {
        std::size_t const bytes = 64 * static_cast<std::size_t>(1 + (i % 7));
        bool const sync         = i % 5 == 0;
        void* p                 = sync ? a.allocate_sync(bytes) : a.allocate(stream(t), bytes);
        made[t].push_back({p, bytes, 0, sync ? own : stream(t)});
      }
      for (auto const& m : made[t]) {  // freed blocks could come back: free them at the end
        a.deallocate(stream(t), const_cast<void*>(m.ptr), m.bytes);
      }
    });
  }
  for (auto& th : pool) {
    th.join();
  }
  std::vector<fake::prefetch> all;
  for (auto const& m : made) {
    all.insert(all.end(), m.begin(), m.end());
  }
  std::vector<fake::prefetch> seen = fake::prefetches();
  std::sort(all.begin(), all.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(threads * rounds));
  EXPECT_EQ(seen, all);
}

}  // namespace
}  // namespace rmm_next::test
