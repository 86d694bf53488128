/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// GPU tests of async_device_resource: the shared matrix (async_resource_tests.hpp) and
// what only device pools have: IPC export, hardware decompression, cudaMemSetMemPool, and the
// release of an owned pool's device memory with its last copy.

#include "async_resource_tests.hpp"
#include "support/capture_elsewhere.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/async_pinned_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>

namespace rmm_next::test {
namespace {

using resource = async_device_resource;

INSTANTIATE_TYPED_TEST_SUITE_P(device, async_resource_matrix, ::testing::Types<resource>);

// Device memory binds to device refs only.
static_assert(std::is_constructible_v<device_async_resource_ref, resource&>);
static_assert(std::is_constructible_v<device_resource_ref, resource&>);
static_assert(!std::is_constructible_v<host_device_async_resource_ref, resource&>);
static_assert(!std::is_constructible_v<host_resource_ref, resource&>);

using async_device_resource_gpu_test = gpu_test;

TEST_F(async_device_resource_gpu_test, DefaultPoolsAreTheDevicesPinnedTypePools)
{
  cudaMemPool_t current = current_pool_handle<resource>(device_);
  cudaMemPool_t dflt    = default_pool_handle<resource>(device_);
  ASSERT_NE(current, nullptr);
  ASSERT_NE(dflt, nullptr);
  cudaMemPool_t device_current{};
  ASSERT_EQ(cudaDeviceGetMemPool(&device_current, device_), cudaSuccess);
  EXPECT_EQ(current, device_current);

  resource const r;
  EXPECT_EQ(r.pool_handle(), current);
  EXPECT_EQ(r.device(), device_);
  resource const d{default_pool{}};
  EXPECT_EQ(d.pool_handle(), dflt);
  resource const e{device_};
  EXPECT_EQ(e.pool_handle(), current);
  EXPECT_EQ(e.device(), device_);
}

/** The device's current pool becomes `pool` (cudaMemSetMemPool; before CUDA 13.0,
 * cudaDeviceSetMemPool). */
cudaError_t set_current_pool(int device, cudaMemPool_t pool)
{
#if CUDART_VERSION >= 13000
  cudaMemLocation loc{cudaMemLocationTypeDevice, device};
  return cudaMemSetMemPool(&loc, cudaMemAllocationTypePinned, pool);
#else
  return cudaDeviceSetMemPool(device, pool);
#endif
}

TEST_F(async_device_resource_gpu_test, HonoursCudaMemSetMemPool)
{
  cudaMemPool_t const original = current_pool_handle<resource>(device_);
  cudaMemPool_t const dflt     = default_pool_handle<resource>(device_);
  cudaMemPool_t const mine     = make_test_pool<resource>(device_);
  ASSERT_NE(mine, nullptr);
  ASSERT_EQ(set_current_pool(device_, mine), cudaSuccess);
  struct restore {
    int device;
    cudaMemPool_t original;
    cudaMemPool_t mine;
    ~restore()
    {
      EXPECT_EQ(set_current_pool(device, original), cudaSuccess);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(cudaMemPoolDestroy(mine), cudaSuccess);
    }
  } const guard{device_, original, mine};

  resource const r;
  EXPECT_EQ(r.pool_handle(), mine) << "default construction follows cudaMemSetMemPool";
  resource const d{default_pool{}};
  EXPECT_EQ(d.pool_handle(), dflt) << "default_pool ignores cudaMemSetMemPool";
  EXPECT_FALSE(r == d);
  // The adopted pool had the driver's threshold 0: raised.
  EXPECT_EQ(r.statistics().release_threshold, UINT64_MAX);

  resource alloc = r;
  void* ptr      = alloc.allocate(stream_, MiB);
  ASSERT_NE(ptr, nullptr);
  expect_usable<resource>(ptr, MiB, 3, stream_);
  alloc.deallocate(stream_, ptr, MiB);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

TEST_F(async_device_resource_gpu_test, OwnedPoolReleasesItsDeviceMemoryWithTheLastCopy)
{
  constexpr std::size_t reserve = GiB;
  constexpr std::size_t slack   = 256 * MiB;  // other reservations, rounding
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::size_t free_before{};
  std::size_t total{};
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);

  std::optional<resource> original{std::in_place, pool_options{.initial_pool_size = reserve}};
  std::size_t free_with_pool{};
  ASSERT_EQ(cudaMemGetInfo(&free_with_pool, &total), cudaSuccess);
  EXPECT_LE(free_with_pool + reserve - slack, free_before)
    << "initial_pool_size did not reserve device memory";

  std::optional<resource> copy{*original};
  original.reset();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::size_t free_with_copy{};
  ASSERT_EQ(cudaMemGetInfo(&free_with_copy, &total), cudaSuccess);
  EXPECT_LE(free_with_copy + reserve - slack, free_before)
    << "the pool was released while a copy still held it";
  void* ptr = copy->allocate(stream_, 64 * MiB);
  ASSERT_NE(ptr, nullptr);
  expect_usable<resource>(ptr, 64 * MiB, 8, stream_);
  copy->deallocate(stream_, ptr, 64 * MiB);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  copy.reset();  // the last copy: the pool is destroyed and its memory released
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::size_t free_after{};
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_GE(free_after + slack, free_before) << "the owned pool's memory was not released";
}

TEST_F(async_device_resource_gpu_test, ViewOfADevicePoolIsNotTrimmedOrDestroyed)
{
  cudaMemPool_t const pool = make_test_pool<resource>(device_);
  ASSERT_NE(pool, nullptr);
  std::uint64_t keep = 64 * MiB;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), cudaSuccess);
  {
    resource view{pool};
    EXPECT_EQ(view.statistics().release_threshold, keep) << "a view's attributes are the owner's";
    void* ptr = view.allocate_sync(32 * MiB);
    ASSERT_NE(ptr, nullptr);
    view.deallocate_sync(ptr, 32 * MiB);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::uint64_t reserved{};
  ASSERT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
            cudaSuccess);
  EXPECT_GE(reserved, 32 * MiB) << "below its threshold the pool keeps what it reserved";
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TEST_F(async_device_resource_gpu_test, IpcExportablePoolOrNotSupported)
{
  try {
    resource r{pool_options{.export_handle_type = allocation_handle_type::posix_file_descriptor}};
    int fd = -1;
    ASSERT_EQ(cudaMemPoolExportToShareableHandle(
                &fd, r.pool_handle(), cudaMemHandleTypePosixFileDescriptor, 0),
              cudaSuccess);
    EXPECT_GE(fd, 0);
    if (fd >= 0) { EXPECT_EQ(::close(fd), 0); }

    void* ptr = r.allocate_sync(2 * MiB);
    ASSERT_NE(ptr, nullptr);
    cudaMemPoolPtrExportData exported{};
    EXPECT_EQ(cudaMemPoolExportPointer(&exported, ptr), cudaSuccess);
    expect_usable<resource>(ptr, 2 * MiB, 12, stream_);
    r.deallocate_sync(ptr, 2 * MiB);
    note("IPC (POSIX file descriptor) export pool created and exported");
  } catch (not_supported const& e) {
    note(std::string{"IPC export not supported: "} + e.what());
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(async_device_resource_gpu_test, HardwareDecompressPoolOrNotSupported)
{
  try {
    resource r{pool_options{.hardware_decompress = true}};
    void* ptr = r.allocate(stream_, MiB);
    ASSERT_NE(ptr, nullptr);
    expect_usable<resource>(ptr, MiB, 13, stream_);
    r.deallocate(stream_, ptr, MiB);
    note("hardware-decompress pool created");
  } catch (not_supported const& e) {
    note(std::string{"hardware-decompress pool not supported: "} + e.what());
    EXPECT_TRUE(contains(e.what(), "decompress")) << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(async_device_resource_gpu_test, OwnedPoolAtAnExplicitLocation)
{
  resource r{pool_options{.location = cudaMemLocation{cudaMemLocationTypeDevice, device_}},
             device_};
  EXPECT_EQ(r.device(), device_);
  void* ptr = r.allocate(stream_, MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expect_memory_kind<resource>(ptr, device_);
  r.deallocate(stream_, ptr, MiB);
}

// ---- Streams of another device (2 GPUs)
// ----------------------------------------------------------

/** A non-blocking stream on device 1, made with device 1 current; device 0 current again after. */
class other_device_test : public async_device_resource_gpu_test {
 protected:
  void SetUp() override
  {
    int count{};
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    if (count < 2) { GTEST_SKIP() << "needs 2 GPUs"; }
    async_device_resource_gpu_test::SetUp();
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&other_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaSetDevice(device_), cudaSuccess);
  }
  void TearDown() override
  {
    if (other_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(other_), cudaSuccess);
      EXPECT_EQ(cudaStreamDestroy(other_), cudaSuccess);
    }
    EXPECT_EQ(cudaSetDevice(device_), cudaSuccess);
    async_device_resource_gpu_test::TearDown();
  }

  cudaStream_t other_{};
};

/** Expects `allocate` to throw device_mismatch naming devices 0 and 1; returns the message. */
template <class Allocate>
std::string expect_mismatch(Allocate&& allocate)
{
  try {
    void* ptr = allocate();
    ADD_FAILURE() << "allocated " << ptr << " in the order of another device's stream";
  } catch (device_mismatch const& e) {
    EXPECT_EQ(e.resource_device(), 0);
    EXPECT_EQ(e.stream_device(), 1);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return e.what();
  }
  return {};
}

TEST_F(other_device_test, AStreamOfAnotherDeviceThrowsDeviceMismatch)
{
  resource r{pool_options{}, 0};
  std::string const msg = expect_mismatch([&] { return r.allocate(other_, MiB); });
  EXPECT_TRUE(contains(msg, "device 0")) << msg;
  EXPECT_TRUE(contains(msg, "device 1")) << msg;
  // Through a ref, and with the CCCL 3.0 spelling where it exists: the same check.
  device_async_resource_ref ref{r};
  (void)expect_mismatch([&] { return ref.allocate(other_, MiB, 256); });
#if !RMM_NEXT_CCCL_STREAM_ORDERED_MR
  (void)expect_mismatch([&] { return r.allocate_async(MiB, 256, other_); });
#endif
  EXPECT_EQ(r.statistics().used_bytes, 0U) << "nothing was allocated";
  // The resource keeps working on its own device's streams.
  void* ptr = r.allocate(stream_, MiB);
  expect_usable<resource>(ptr, MiB, 21, stream_);
  r.deallocate(stream_, ptr, MiB);
}

TEST_F(other_device_test, DefaultStreamsBelongToTheCurrentDevice)
{
  resource r{pool_options{}, 0};
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  for (cudaStream_t s : {cudaStream_t{}, cudaStreamLegacy, cudaStreamPerThread}) {
    (void)expect_mismatch([&] { return r.allocate(s, KiB); });
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (cudaStream_t s : {cudaStream_t{}, cudaStreamLegacy, cudaStreamPerThread}) {
    void* ptr = r.allocate(s, KiB);
    EXPECT_NE(ptr, nullptr);
    r.deallocate(s, ptr, KiB);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(other_device_test, PeerAccessToThePoolAllowsTheStream)
{
  int can_access{};
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can_access, 1, 0), cudaSuccess);
  if (can_access == 0) { GTEST_SKIP() << "device 1 cannot access device 0's memory"; }
  resource r{pool_options{}, 0};
  (void)expect_mismatch([&] { return r.allocate(other_, MiB); });
  cudaMemAccessDesc desc{};
  desc.location = {cudaMemLocationTypeDevice, 1};
  desc.flags    = cudaMemAccessFlagsProtReadWrite;
  ASSERT_EQ(cudaMemPoolSetAccess(r.pool_handle(), &desc, 1), cudaSuccess);

  void* ptr = r.allocate(other_, MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);  // a kernel on device 1 writes device 0's memory
  expect_usable<resource>(ptr, MiB, 22, other_);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  r.deallocate(other_, ptr, MiB);
  ASSERT_EQ(cudaStreamSynchronize(other_), cudaSuccess);
  EXPECT_EQ(r.statistics().used_bytes, 0U);
}

TEST_F(other_device_test, AViewedPoolBelongsToItsDevice)
{
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location  = {cudaMemLocationTypeDevice, 1};
  cudaMemPool_t pool{};
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  {
    resource view{pool};  // made with device 0 current
    EXPECT_EQ(view.device(), 1);
    void* ptr = view.allocate(other_, MiB);  // device 1's stream: the pool's own
    ASSERT_NE(ptr, nullptr);
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    expect_usable<resource>(ptr, MiB, 23, other_);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    view.deallocate(other_, ptr, MiB);
    EXPECT_THROW((void)view.allocate(stream_, MiB), device_mismatch);  // device 0 has no access
    EXPECT_THROW((resource{pool, 0}), logic_error);
    EXPECT_EQ((resource{pool, 1}).device(), 1);
    ASSERT_EQ(cudaStreamSynchronize(other_), cudaSuccess);
  }
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
}

TEST_F(other_device_test, AnyDevicesStreamMayFree)
{
  resource r{pool_options{}, 0};
  void* ptr = r.allocate(stream_, MiB);
  ASSERT_NE(ptr, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  r.deallocate(other_, ptr, MiB);  // not checked: memory may be freed on any stream
  ASSERT_EQ(cudaStreamSynchronize(other_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(r.statistics().used_bytes, 0U);
}

// Building, reading and destroying resources never invalidates a graph another thread captures in
// global mode, although the driver refuses each pool call to a thread in global mode then: they
// run in relaxed capture mode.
TEST(AsyncDeviceResourceBesideACapture, ManagementLeavesAGlobalCaptureOnAnotherThreadIntact)
{
  std::string failure;
  capture_elsewhere elsewhere{cudaStreamCaptureModeGlobal};
  try {
    resource owned{pool_options{.initial_pool_size = 1 << 20}};  // create, reserve, threshold
    EXPECT_GE(owned.statistics().reserved_bytes, std::size_t{1} << 20);
    owned.reset_high_watermarks();
    async_pinned_resource pinned{pool_options{}};  // access for every device
    resource current{current_pool{}};              // adopted: its threshold read and set
    (void)current.statistics();
  } catch (std::exception const& e) {  // the owned pools are destroyed before this
    failure = e.what();
  }
  EXPECT_EQ(failure, "");
  EXPECT_EQ(elsewhere.end(), "");
}

}  // namespace
}  // namespace rmm_next::test
