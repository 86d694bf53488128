/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// thrust_allocator: thrust::device_vector allocates and frees on the allocator's stream, from its
// resource. A recording resource over an owned device pool logs every call (stream, size,
// alignment, current device); the pool's statistics show where the memory lives. Everything runs
// on device 0 except the ThrustAllocatorDevices tests, which need 2 GPUs.
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>
#include <rmm_next/thrust_allocator.hpp>

#include "support/stream_guard.hpp"

#include <cuda_runtime_api.h>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

// Named, not anonymous: nvcc warns about the unreferenced hidden friend of a class in an anonymous
// namespace (get_property is found by CCCL's property check, which nvcc does not count).
namespace thrust_allocator_gpu_test {

#define EXPECT_CUDA_OK(call) EXPECT_EQ(cudaSuccess, (call)) << #call
#define ASSERT_CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

using rmm_next::test::stream_guard;

template <class T>
using device_vector = thrust::device_vector<T, rmm_next::thrust_allocator<T>>;

/** One call to the recording resource. */
struct event {
  bool is_free;
  cudaStream_t stream;  // nullptr for the synchronous calls
  std::size_t bytes;
  std::size_t alignment;
  void* ptr;
  int device;  // current when the call was made
};

int current_device()
{
  int device{-1};
  EXPECT_CUDA_OK(cudaGetDevice(&device));
  return device;
}

/** An async_device_resource that logs every allocation and free; copies share the log. */
class recording_resource {
 public:
  explicit recording_resource(rmm_next::async_device_resource upstream)
    : upstream_{std::move(upstream)}, log_{std::make_shared<std::vector<event>>()}
  {
    log_->reserve(256);  // deallocate is noexcept: keep push_back from allocating there
  }

  [[nodiscard]] std::vector<event> const& log() const noexcept { return *log_; }
  [[nodiscard]] rmm_next::async_device_resource const& upstream() const noexcept
  {
    return upstream_;
  }

  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment)
  {
    void* ptr = upstream_.allocate(stream, bytes, alignment);
    log_->push_back({false, stream.get(), bytes, alignment, ptr, current_device()});
    return ptr;
  }
  void deallocate(cuda::stream_ref stream,
                  void* ptr,
                  std::size_t bytes,
                  std::size_t alignment) noexcept
  {
    log_->push_back({true, stream.get(), bytes, alignment, ptr, current_device()});
    upstream_.deallocate(stream, ptr, bytes, alignment);
  }
  void* allocate_sync(std::size_t bytes, std::size_t alignment)
  {
    void* ptr = upstream_.allocate_sync(bytes, alignment);
    log_->push_back({false, nullptr, bytes, alignment, ptr, current_device()});
    return ptr;
  }
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    log_->push_back({true, nullptr, bytes, alignment, ptr, current_device()});
    upstream_.deallocate_sync(ptr, bytes, alignment);
  }
  // CCCL 3.0 names of the same members.
  void* allocate(std::size_t bytes, std::size_t alignment)
  {
    return allocate_sync(bytes, alignment);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept
  {
    deallocate_sync(ptr, bytes, alignment);
  }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream)
  {
    return allocate(stream, bytes, alignment);
  }
  void deallocate_async(void* ptr,
                        std::size_t bytes,
                        std::size_t alignment,
                        cuda::stream_ref stream) noexcept
  {
    deallocate(stream, ptr, bytes, alignment);
  }

  friend bool operator==(recording_resource const& lhs, recording_resource const& rhs) noexcept
  {
    return lhs.log_ == rhs.log_;
  }
  friend constexpr void get_property(recording_resource const&,
                                     cuda::mr::device_accessible) noexcept
  {
  }

 private:
  rmm_next::async_device_resource upstream_;
  std::shared_ptr<std::vector<event>> log_;
};

static_assert(
  rmm_next::detail::stream_ordered_resource_with<recording_resource, cuda::mr::device_accessible>);

class ThrustAllocator : public ::testing::Test {
 protected:
  stream_guard stream_;
  // A pool of the test's own: its statistics count this test's memory only.
  recording_resource resource_{rmm_next::async_device_resource{rmm_next::pool_options{}, 0}};

  [[nodiscard]] rmm_next::thrust_allocator<int> alloc(cudaStream_t stream)
  {
    return rmm_next::thrust_allocator<int>{cuda::stream_ref{stream}, resource_};
  }
  [[nodiscard]] std::size_t used_bytes() const
  {
    return resource_.upstream().statistics().used_bytes;
  }
};

TEST_F(ThrustAllocator, DeviceVectorAllocatesAndFreesOnItsStream)
{
  constexpr std::size_t n = std::size_t{1} << 20;
  auto const policy       = thrust::cuda::par.on(stream_);
  void* first_buffer{};
  void* second_buffer{};
  {
    device_vector<int> v(n, alloc(stream_));
    first_buffer = thrust::raw_pointer_cast(v.data());
    ASSERT_EQ(resource_.log().size(), 1U);
    event const a = resource_.log().back();
    EXPECT_FALSE(a.is_free);
    EXPECT_EQ(a.stream, static_cast<cudaStream_t>(stream_));
    EXPECT_EQ(a.bytes, n * sizeof(int));
    EXPECT_EQ(a.alignment, alignof(int));
    EXPECT_EQ(a.ptr, first_buffer);
    EXPECT_GE(used_bytes(), n * sizeof(int));  // the memory lives in the resource's pool

    cudaPointerAttributes attrs{};
    ASSERT_CUDA_OK(cudaPointerGetAttributes(&attrs, first_buffer));
    EXPECT_EQ(attrs.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attrs.device, 0);

    thrust::sequence(policy, v.begin(), v.end());
    long long const sum = thrust::reduce(policy, v.begin(), v.end(), 0LL);
    EXPECT_EQ(sum, static_cast<long long>(n) * (n - 1) / 2);

    v.resize(2 * n);  // a new buffer on the stream; the old one freed on the stream
    second_buffer = thrust::raw_pointer_cast(v.data());
    ASSERT_EQ(resource_.log().size(), 3U);
    event const grown = resource_.log()[1];
    event const freed = resource_.log()[2];
    EXPECT_FALSE(grown.is_free);
    EXPECT_EQ(grown.stream, static_cast<cudaStream_t>(stream_));
    EXPECT_GE(grown.bytes, 2 * n * sizeof(int));
    EXPECT_EQ(grown.ptr, second_buffer);
    EXPECT_TRUE(freed.is_free);
    EXPECT_EQ(freed.stream, static_cast<cudaStream_t>(stream_));
    EXPECT_EQ(freed.ptr, first_buffer);
    EXPECT_EQ(freed.bytes, n * sizeof(int));

    // A cuda policy takes every iterator for device memory: copy to the host with the runtime.
    std::vector<int> host(v.size());
    ASSERT_CUDA_OK(cudaMemcpyAsync(
      host.data(), second_buffer, host.size() * sizeof(int), cudaMemcpyDeviceToHost, stream_));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < 2 * n; ++i) {
      if (host[i] != (i < n ? static_cast<int>(i) : 0)) { ++wrong; }  // the new half: zeroed
    }
    EXPECT_EQ(wrong, 0U);
  }
  ASSERT_EQ(resource_.log().size(), 4U);
  event const last = resource_.log().back();
  EXPECT_TRUE(last.is_free);
  EXPECT_EQ(last.stream, static_cast<cudaStream_t>(stream_));
  EXPECT_EQ(last.ptr, second_buffer);
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(used_bytes(), 0U);  // every byte went back to the pool
}

TEST_F(ThrustAllocator, FillAndCopyConstructionRunOnTheStream)
{
  std::vector<int> const source{3, 1, 4, 1, 5, 9, 2, 6};
  device_vector<int> from_host(source.begin(), source.end(), alloc(stream_));
  device_vector<int> filled(1000, 42, alloc(stream_));
  device_vector<int> copy = from_host;  // the copy takes the allocator: same stream, resource
  EXPECT_TRUE(copy.get_allocator() == from_host.get_allocator());
  for (event const& e : resource_.log()) {
    EXPECT_EQ(e.stream, static_cast<cudaStream_t>(stream_));
  }
  EXPECT_EQ(resource_.log().size(), 3U);

  auto const policy = thrust::cuda::par.on(stream_);
  EXPECT_EQ(thrust::reduce(policy, filled.begin(), filled.end(), 0), 42000);
  std::vector<int> back(copy.size());
  ASSERT_CUDA_OK(cudaMemcpyAsync(back.data(),
                                 thrust::raw_pointer_cast(copy.data()),
                                 back.size() * sizeof(int),
                                 cudaMemcpyDeviceToHost,
                                 stream_));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(back, source);
}

TEST_F(ThrustAllocator, SwapAndMoveKeepEachBufferWithItsStream)
{
  stream_guard other;
  void* on_stream{};
  void* on_other{};
  {
    device_vector<int> a(100, 1, alloc(stream_));
    device_vector<int> b(200, 2, alloc(other));
    on_stream = thrust::raw_pointer_cast(a.data());
    on_other  = thrust::raw_pointer_cast(b.data());
    a.swap(b);
    EXPECT_EQ(a.get_allocator().stream(), cuda::stream_ref{other});
    EXPECT_EQ(b.get_allocator().stream(), cuda::stream_ref{stream_});

    device_vector<int> c(10, alloc(stream_));
    c = std::move(a);  // c frees its buffer on stream_, then owns a's buffer and allocator
    EXPECT_EQ(c.get_allocator().stream(), cuda::stream_ref{other});
    EXPECT_EQ(thrust::raw_pointer_cast(c.data()), on_other);
    EXPECT_EQ(c.size(), 200U);
  }
  // Every buffer was freed on the stream it was allocated on.
  std::size_t frees = 0;
  for (event const& e : resource_.log()) {
    if (!e.is_free) { continue; }
    ++frees;
    if (e.ptr == on_stream) { EXPECT_EQ(e.stream, static_cast<cudaStream_t>(stream_)); }
    if (e.ptr == on_other) { EXPECT_EQ(e.stream, static_cast<cudaStream_t>(other)); }
  }
  EXPECT_EQ(frees, 3U);
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(used_bytes(), 0U);
}

// Thrust runs a container's element construction, copies and destruction with the policy its
// allocator's system() returns (thrust::detail::allocator_system): check that it finds ours.
static_assert(
  std::is_same_v<decltype(thrust::detail::allocator_system<rmm_next::thrust_allocator<int>>::get(
                   std::declval<rmm_next::thrust_allocator<int>&>())),
                 rmm_next::thrust_allocator<int>::system_type&>);

TEST_F(ThrustAllocator, ContainerWorkRunsOnTheAllocatorStream)
{
  rmm_next::thrust_allocator<int> a = alloc(stream_);
  auto& policy = thrust::detail::allocator_system<rmm_next::thrust_allocator<int>>::get(a);
  EXPECT_EQ(get_stream(policy), static_cast<cudaStream_t>(stream_));  // found by ADL
  rmm_next::thrust_allocator<int> copy = a;
  EXPECT_EQ(get_stream(copy.system()), static_cast<cudaStream_t>(stream_));
}

TEST_F(ThrustAllocator, EqualityIsSameResourceAndStream)
{
  stream_guard other;
  recording_resource different{rmm_next::async_device_resource{}};
  rmm_next::thrust_allocator<int> a = alloc(stream_);
  EXPECT_TRUE(a == alloc(stream_));
  EXPECT_TRUE(a == rmm_next::thrust_allocator<double>{a});  // rebinding keeps both
  EXPECT_FALSE(a == alloc(other));
  EXPECT_FALSE(a == (rmm_next::thrust_allocator<int>{cuda::stream_ref{stream_}, different}));
  EXPECT_TRUE(a.resource() == rmm_next::device_async_resource_ref{resource_});
  EXPECT_EQ(a.stream(), cuda::stream_ref{stream_});
}

TEST_F(ThrustAllocator, OverflowAndExhaustionThrowAndTheVectorSurvives)
{
  rmm_next::thrust_allocator<double> a{cuda::stream_ref{stream_}, resource_};
  EXPECT_THROW((void)a.allocate(a.max_size() + 1), std::bad_array_new_length);
  EXPECT_TRUE(resource_.log().empty());

  device_vector<int> v(16, 7, alloc(stream_));
  EXPECT_THROW(v.reserve((std::size_t{1} << 50) / sizeof(int)), rmm_next::out_of_memory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(v.size(), 16U);
  EXPECT_EQ(thrust::reduce(thrust::cuda::par.on(stream_), v.begin(), v.end(), 0), 16 * 7);
}

TEST(ThrustAllocatorDefaults, CurrentDeviceResourceOnTheDefaultStream)
{
  rmm_next::thrust_allocator<int> alloc;
  EXPECT_TRUE(alloc.resource() == rmm_next::get_current_device_resource_ref());
  EXPECT_EQ(alloc.stream(), cuda::stream_ref{cudaStream_t{}});
  device_vector<int> v(1000, 5);  // default-constructed allocator
  EXPECT_EQ(thrust::reduce(v.begin(), v.end(), 0), 5000);
  v[3] = 9;
  EXPECT_EQ(static_cast<int>(v[3]), 9);
}

// ---- Two devices: the allocator keeps to the device of its stream
// --------------------------------

class ThrustAllocatorDevices : public ::testing::Test {
 protected:
  void SetUp() override
  {
    int count{};
    ASSERT_CUDA_OK(cudaGetDeviceCount(&count));
    if (count < 2) { GTEST_SKIP() << "needs 2 GPUs"; }
    ASSERT_CUDA_OK(cudaSetDevice(0));
  }
  void TearDown() override { EXPECT_CUDA_OK(cudaSetDevice(0)); }
};

TEST_F(ThrustAllocatorDevices, DefaultStreamVectorFreesOnItsOwnDevice)
{
  recording_resource resource{rmm_next::async_device_resource{rmm_next::pool_options{}, 0}};
  cuda::stream_ref const default_stream{cudaStream_t{}};
  void* buffer{};
  {
    device_vector<int> v(1 << 16, 3, rmm_next::thrust_allocator<int>{default_stream, resource});
    EXPECT_EQ(v.get_allocator().device(), 0);
    buffer = thrust::raw_pointer_cast(v.data());
    ASSERT_CUDA_OK(cudaSetDevice(1));  // destroyed while another device is current
  }
  EXPECT_EQ(current_device(), 1) << "the allocator gives the current device back";
  ASSERT_EQ(resource.log().size(), 2U);
  event const freed = resource.log().back();
  EXPECT_TRUE(freed.is_free);
  EXPECT_EQ(freed.ptr, buffer);
  EXPECT_EQ(freed.stream, cudaStream_t{});
  // Stream 0 means the default stream of the current device: device 0's, where the vector's
  // work was ordered, not device 1's.
  EXPECT_EQ(freed.device, 0);
  ASSERT_CUDA_OK(cudaSetDevice(0));
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(resource.upstream().statistics().used_bytes, 0U);
}

TEST_F(ThrustAllocatorDevices, AllocatesOnItsDeviceWhateverIsCurrent)
{
  recording_resource resource{rmm_next::async_device_resource{rmm_next::pool_options{}, 0}};
  rmm_next::thrust_allocator<int> a{cuda::stream_ref{cudaStreamPerThread}, resource};
  ASSERT_CUDA_OK(cudaSetDevice(1));
  auto p = a.allocate(1000);
  EXPECT_EQ(current_device(), 1);
  a.deallocate(p, 1000);
  EXPECT_EQ(current_device(), 1);
  ASSERT_EQ(resource.log().size(), 2U);
  EXPECT_EQ(resource.log()[0].device, 0);
  EXPECT_EQ(resource.log()[1].device, 0);
  ASSERT_CUDA_OK(cudaSetDevice(0));
  ASSERT_CUDA_OK(cudaStreamSynchronize(cudaStreamPerThread));
}

TEST_F(ThrustAllocatorDevices, AStreamOfAnotherDeviceChoosesThatDevice)
{
  ASSERT_CUDA_OK(cudaSetDevice(1));
  stream_guard on_device_one;
  ASSERT_CUDA_OK(cudaSetDevice(0));
  rmm_next::thrust_allocator<int> a{cuda::stream_ref{on_device_one}};  // made with 0 current
  EXPECT_EQ(a.device(), 1);
  EXPECT_TRUE(a.resource() == rmm_next::get_per_device_resource_ref(1));
  EXPECT_EQ(rmm_next::thrust_allocator<double>{a}.device(), 1);  // rebinding keeps it
  ASSERT_CUDA_OK(cudaSetDevice(1));  // kernels on the stream need its device current
  {
    device_vector<int> v(4096, 2, a);
    cudaPointerAttributes attrs{};
    ASSERT_CUDA_OK(cudaPointerGetAttributes(&attrs, thrust::raw_pointer_cast(v.data())));
    EXPECT_EQ(attrs.device, 1);
    EXPECT_EQ(thrust::reduce(thrust::cuda::par.on(on_device_one), v.begin(), v.end(), 0), 8192);
  }
  ASSERT_CUDA_OK(cudaStreamSynchronize(on_device_one));
}

}  // namespace thrust_allocator_gpu_test
