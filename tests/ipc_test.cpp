/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// What the IPC API does without a GPU: handle ownership, passing handles over a Unix-domain
// socket, and the typed errors of misuse and of a missing driver.
#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/ipc.hpp>

#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace {

using rmm_next::allocation_handle_type;
using rmm_next::shareable_pool_handle;

// Ownership of an OS handle or of imported memory is never duplicated by a copy.
static_assert(!std::is_copy_constructible_v<shareable_pool_handle>);
static_assert(std::is_nothrow_move_constructible_v<shareable_pool_handle>);
static_assert(!std::is_copy_constructible_v<rmm_next::imported_pointer>);
static_assert(std::is_nothrow_move_assignable_v<rmm_next::imported_pointer>);
// The pool is a shared handle, as the resources are.
static_assert(std::is_nothrow_copy_constructible_v<rmm_next::imported_pool>);
// Export data is bytes to send by any means.
static_assert(std::is_trivially_copyable_v<rmm_next::pool_pointer_export>);
static_assert(sizeof(rmm_next::pool_pointer_export) == sizeof(cudaMemPoolPtrExportData));
// Pools, and things with a pool and a device (the resources), export; nothing else does.
template <class T>
concept exportable =
  requires(T const& t) { rmm_next::export_pool(t, allocation_handle_type::posix_file_descriptor); };
static_assert(exportable<cudaMemPool_t>);
static_assert(exportable<rmm_next::async_device_resource>);
static_assert(!exportable<int>);
static_assert(!exportable<void*>);

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

bool has_device()
{
  int count{};
  bool const ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}

/** A pipe whose ends are closed with the object unless handed out. */
struct pipe_fds {
  std::array<int, 2> fd{-1, -1};
  pipe_fds() { EXPECT_EQ(::pipe2(fd.data(), O_CLOEXEC), 0); }
  pipe_fds(pipe_fds const&)            = delete;
  pipe_fds& operator=(pipe_fds const&) = delete;
  ~pipe_fds()
  {
    for (int f : fd) {
      if (f >= 0) { ::close(f); }
    }
  }
  int take_read_end() { return std::exchange(fd[0], -1); }
};

/** A connected pair of Unix-domain stream sockets. */
struct socket_pair {
  std::array<int, 2> fd{-1, -1};
  socket_pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd.data()), 0); }
  socket_pair(socket_pair const&)            = delete;
  socket_pair& operator=(socket_pair const&) = delete;
  ~socket_pair()
  {
    for (int f : fd) {
      if (f >= 0) { ::close(f); }
    }
  }
};

TEST(ShareablePoolHandle, ClosesItsDescriptor)
{
  pipe_fds p;
  int const fd = p.take_read_end();
  {
    shareable_pool_handle handle{fd};
    EXPECT_EQ(handle.type(), allocation_handle_type::posix_file_descriptor);
    EXPECT_EQ(handle.fd(), fd);
    EXPECT_TRUE(is_open(fd));
  }
  EXPECT_FALSE(is_open(fd));
}

TEST(ShareablePoolHandle, ReleaseGivesTheDescriptorUp)
{
  pipe_fds p;
  int const fd = p.take_read_end();
  {
    shareable_pool_handle handle{fd};
    EXPECT_EQ(handle.release(), fd);
    EXPECT_FALSE(handle);
    EXPECT_EQ(handle.fd(), -1);
  }
  EXPECT_TRUE(is_open(fd));
  ::close(fd);
}

TEST(ShareablePoolHandle, MovingTransfersOwnership)
{
  pipe_fds p;
  int const fd = p.take_read_end();
  shareable_pool_handle from{fd};
  shareable_pool_handle to{std::move(from)};
  EXPECT_FALSE(from);  // NOLINT(bugprone-use-after-move): moved-from is documented as empty
  EXPECT_EQ(from.type(), allocation_handle_type::none);
  EXPECT_EQ(to.fd(), fd);
  from = std::move(to);
  EXPECT_EQ(from.fd(), fd);
  from.reset();
  EXPECT_FALSE(is_open(fd));
  EXPECT_EQ(shareable_pool_handle{-1}.type(), allocation_handle_type::none);
}

TEST(PoolHandleOverSocket, TheReceiverGetsItsOwnDescriptorOfTheSameFile)
{
  pipe_fds p;
  socket_pair s;
  shareable_pool_handle const sent{p.take_read_end()};
  rmm_next::send_pool_handle(s.fd[0], sent);
  shareable_pool_handle const received = rmm_next::receive_pool_handle(s.fd[1]);
  ASSERT_EQ(received.type(), allocation_handle_type::posix_file_descriptor);
  EXPECT_NE(received.fd(), sent.fd());
  EXPECT_TRUE(is_open(sent.fd())) << "sending leaves the caller's descriptor open";
  EXPECT_EQ(::fcntl(received.fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  char const byte = 'x';
  ASSERT_EQ(::write(p.fd[1], &byte, 1), 1);
  char got{};
  ASSERT_EQ(::read(received.fd(), &got, 1), 1);
  EXPECT_EQ(got, 'x');
}

TEST(PoolHandleOverSocket, AFabricHandleTravelsAsData)
{
  socket_pair s;
  cudaMemFabricHandle_t fabric{};
  for (std::size_t i = 0; i < sizeof(fabric.reserved); ++i) {
    fabric.reserved[i] = static_cast<char>(i + 1);
  }
  rmm_next::send_pool_handle(s.fd[0], shareable_pool_handle{fabric});
  shareable_pool_handle const received = rmm_next::receive_pool_handle(s.fd[1]);
  EXPECT_EQ(received.type(), allocation_handle_type::fabric);
  EXPECT_EQ(received.fd(), -1);
  EXPECT_EQ(
    std::memcmp(received.fabric_handle().reserved, fabric.reserved, sizeof(fabric.reserved)), 0);
}

TEST(PoolHandleOverSocket, SendingAnEmptyHandleThrows)
{
  socket_pair s;
  EXPECT_THROW(rmm_next::send_pool_handle(s.fd[0], shareable_pool_handle{}), rmm_next::logic_error);
}

TEST(PoolHandleOverSocket, APeerThatClosesFirstIsASystemError)
{
  socket_pair s;
  ::close(s.fd[0]);
  s.fd[0] = -1;
  try {
    (void)rmm_next::receive_pool_handle(s.fd[1]);
    FAIL() << "received a handle from a closed socket";
  } catch (std::system_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("rmm_next::receive_pool_handle"), std::string::npos)
      << e.what();
  }
}

TEST(PoolHandleOverSocket, AnythingElseIsRejected)
{
  socket_pair s;
  std::array<char, sizeof(rmm_next::detail::pool_handle_message)> garbage{};
  garbage.fill('g');
  ASSERT_EQ(::write(s.fd[0], garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  try {
    (void)rmm_next::receive_pool_handle(s.fd[1]);
    FAIL() << "accepted bytes that are not a pool handle";
  } catch (rmm_next::logic_error const& e) {
    EXPECT_NE(std::string{e.what()}.find("not a pool handle"), std::string::npos) << e.what();
  }
}

TEST(IpcMisuse, ExportingAsNoneOrANullPoolThrowsBeforeAnyCudaCall)
{
  // Never dereferenced: the handle type is checked first.
  auto* const some_pool = reinterpret_cast<cudaMemPool_t>(std::uintptr_t{0x1000});
  try {
    (void)rmm_next::export_pool(some_pool, allocation_handle_type::none);
    FAIL() << "exported a pool as none";
  } catch (rmm_next::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::export_pool: ", 0), 0U) << what;
    EXPECT_NE(what.find("none"), std::string::npos) << what;
  }
  EXPECT_THROW((void)rmm_next::export_pool(some_pool, allocation_handle_type::win32),
               rmm_next::logic_error);
  EXPECT_THROW((void)rmm_next::export_pool(nullptr, allocation_handle_type::posix_file_descriptor),
               rmm_next::logic_error);
  EXPECT_THROW((void)rmm_next::export_pointer(nullptr), rmm_next::logic_error);
}

TEST(IpcMisuse, ImportingFromAnEmptyHandleOrPoolThrows)
{
  EXPECT_THROW((void)rmm_next::import_pool(shareable_pool_handle{}), rmm_next::logic_error);
  EXPECT_THROW((void)rmm_next::import_pointer(rmm_next::imported_pool{}, {}),
               rmm_next::logic_error);
}

TEST(IpcWithoutDevice, EveryCallThatNeedsTheDriverSaysItIsMissing)
{
  if (has_device()) { GTEST_SKIP() << "a device is present: ipc_gpu_test covers these calls"; }
  pipe_fds p;
  shareable_pool_handle const handle{p.take_read_end()};
  auto const expect_no_driver = [](auto&& call, char const* who) {
    try {
      call();
      ADD_FAILURE() << who << " succeeded without a usable driver";
    } catch (rmm_next::cuda_error const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("no usable CUDA driver or device"), std::string::npos) << what;
      EXPECT_NE(what.find(who), std::string::npos) << what;
    }
  };
  expect_no_driver([&] { (void)rmm_next::import_pool(handle); }, "rmm_next::import_pool");
  expect_no_driver([&] { (void)rmm_next::import_pool(handle, 0); }, "rmm_next::import_pool");
  int word{};
  expect_no_driver([&] { (void)rmm_next::export_pointer(&word); }, "rmm_next::export_pointer");
  auto* const some_pool = reinterpret_cast<cudaMemPool_t>(std::uintptr_t{0x1000});
  expect_no_driver(
    [&] { (void)rmm_next::export_pool(some_pool, allocation_handle_type::posix_file_descriptor); },
    "rmm_next::export_pool");
}

}  // namespace
