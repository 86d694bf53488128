/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// What the IPC API does without a GPU: handle ownership, passing handles over a Unix-domain
// socket (and closing every descriptor a peer sends that is not a handle's), and the typed errors
// of misuse and of a missing driver.
#include "support/without_a_driver.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/ipc.hpp>

#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

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

/** A connected pair of Unix-domain sockets; the receiving end, `fd[1]`, waits 5 s at most, so
 * that a receive of more than was sent fails instead of hanging. */
struct socket_pair {
  std::array<int, 2> fd{-1, -1};
  explicit socket_pair(int type = SOCK_STREAM)
  {
    EXPECT_EQ(::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fd.data()), 0);
    timeval const limit{5, 0};
    EXPECT_EQ(::setsockopt(fd[1], SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)), 0);
  }
  socket_pair(socket_pair const&)            = delete;
  socket_pair& operator=(socket_pair const&) = delete;
  ~socket_pair()
  {
    for (int f : fd) {
      if (f >= 0) { ::close(f); }
    }
  }
};

/** How many descriptors this process has open (the one that reads /proc/self/fd included). */
std::size_t open_fd_count()
{
  return static_cast<std::size_t>(std::distance(
    std::filesystem::directory_iterator{"/proc/self/fd"}, std::filesystem::directory_iterator{}));
}

/** The bytes `send_pool_handle` sends for a handle of `type` (a zero fabric handle). */
rmm_next::detail::pool_handle_message handle_message(allocation_handle_type type)
{
  rmm_next::detail::pool_handle_message message{};
  std::memcpy(
    message.tag, rmm_next::detail::pool_handle_message::expected_tag, sizeof(message.tag));
  message.type = static_cast<std::int32_t>(type);
  return message;
}

/**
 * Sends `size` bytes with `fds` descriptors of /dev/null in one `SCM_RIGHTS` (after an
 * `SCM_CREDENTIALS` when `with_credentials`), as a peer other than `send_pool_handle` may; the
 * sender's copies are closed once sent.
 */
void send_with_devnull(
  int socket, void const* bytes, std::size_t size, std::size_t fds, bool with_credentials = false)
{
  std::vector<int> sent;
  for (std::size_t i = 0; i < fds; ++i) {
    sent.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_GE(sent.back(), 0);
  }
  std::size_t const rights      = fds > 0 ? CMSG_SPACE(sizeof(int) * fds) : 0;
  std::size_t const credentials = with_credentials ? CMSG_SPACE(sizeof(ucred)) : 0;
  std::vector<cmsghdr> control((rights + credentials) / sizeof(cmsghdr) + 1);
  iovec io{const_cast<void*>(bytes), size};
  msghdr msg{};
  msg.msg_iov        = &io;
  msg.msg_iovlen     = 1;
  msg.msg_control    = rights + credentials > 0 ? control.data() : nullptr;
  msg.msg_controllen = rights + credentials;
  cmsghdr* c         = CMSG_FIRSTHDR(&msg);
  if (with_credentials) {
    ucred const self{::getpid(), ::getuid(), ::getgid()};
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type  = SCM_CREDENTIALS;
    c->cmsg_len   = CMSG_LEN(sizeof(self));
    std::memcpy(CMSG_DATA(c), &self, sizeof(self));
    c = CMSG_NXTHDR(&msg, c);
  }
  if (fds > 0) {
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type  = SCM_RIGHTS;
    c->cmsg_len   = CMSG_LEN(sizeof(int) * fds);
    std::memcpy(CMSG_DATA(c), sent.data(), sizeof(int) * fds);
  }
  EXPECT_EQ(::sendmsg(socket, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(size)) << errno;
  for (int fd : sent) {
    ::close(fd);
  }
}

/** Sends a pool handle's bytes of `type` with `fds` descriptors. */
void send_handle_with_devnull(int socket,
                              allocation_handle_type type,
                              std::size_t fds,
                              bool with_credentials = false)
{
  auto const message = handle_message(type);
  send_with_devnull(socket, &message, sizeof(message), fds, with_credentials);
}

/** Sends a posix_file_descriptor handle's bytes in two `sendmsg`, with `first` and `second`
 * descriptors. */
void send_handle_in_two_pieces(int socket, std::size_t first, std::size_t second)
{
  auto const message = handle_message(allocation_handle_type::posix_file_descriptor);
  auto const* bytes  = reinterpret_cast<char const*>(&message);
  send_with_devnull(socket, bytes, 4, first);
  send_with_devnull(socket, bytes + 4, sizeof(message) - 4, second);
}

/**
 * Expects `receive_pool_handle` on `socket` to throw `Exception` whose message contains `says`,
 * and to leave as many descriptors open as before.
 */
template <class Exception>
void expect_refused_and_closed(int socket,
                               std::string const& says,
                               std::function<bool(rmm_next::peer_credentials const&)> const&
                                 accept_peer = rmm_next::is_same_user)
{
  std::size_t const before = open_fd_count();
  try {
    (void)rmm_next::receive_pool_handle(socket, accept_peer);
    ADD_FAILURE() << "received a handle from a message that is not one";
  } catch (Exception const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::receive_pool_handle: ", 0), 0U) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
  }
  EXPECT_EQ(open_fd_count(), before) << "a descriptor the peer sent stayed open";
}

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

TEST(PoolHandleDescriptors, OneDescriptorIsTheHandlesAndClosesWithIt)
{
  socket_pair s;
  send_handle_with_devnull(s.fd[0], allocation_handle_type::posix_file_descriptor, 1);
  std::size_t const before = open_fd_count();
  {
    shareable_pool_handle const received = rmm_next::receive_pool_handle(s.fd[1]);
    EXPECT_TRUE(is_open(received.fd()));
    EXPECT_EQ(open_fd_count(), before + 1);
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(PoolHandleDescriptors, AnyOtherNumberOfDescriptorsIsRefusedAndAllAreClosed)
{
  struct wrong_count {
    allocation_handle_type type;
    std::size_t fds;
    char const* says;
  };
  auto constexpr posix = allocation_handle_type::posix_file_descriptor;
  for (auto const& [type, fds, says] :
       {wrong_count{posix, 2, "this one came with 2"},
        wrong_count{posix, 3, "this one came with 3"},
        wrong_count{posix, 200, "MSG_CTRUNC"},
        wrong_count{posix, 0, "this one came with 0"},
        wrong_count{allocation_handle_type::fabric, 1, "fabric handle comes with 0"}}) {
    SCOPED_TRACE(std::to_string(fds) + " descriptors with a handle of type " +
                 std::to_string(static_cast<int>(type)));
    socket_pair s;
    send_handle_with_devnull(s.fd[0], type, fds);
    expect_refused_and_closed<rmm_next::logic_error>(s.fd[1], says);
  }
}

TEST(PoolHandleDescriptors, ADescriptorBesideOtherBytesIsClosed)
{
  socket_pair s;
  std::array<char, sizeof(rmm_next::detail::pool_handle_message)> garbage{};
  garbage.fill('g');
  send_with_devnull(s.fd[0], garbage.data(), garbage.size(), 2);
  expect_refused_and_closed<rmm_next::logic_error>(s.fd[1], "not a pool handle");
}

TEST(PoolHandleDescriptors, APeerThatClosesMidMessageLeavesNoDescriptor)
{
  socket_pair s;
  auto const message = handle_message(allocation_handle_type::posix_file_descriptor);
  send_with_devnull(s.fd[0], &message, sizeof(message) / 2, 1);
  ::close(s.fd[0]);
  s.fd[0] = -1;
  expect_refused_and_closed<std::system_error>(s.fd[1], "mid-message");
}

TEST(PoolHandleDescriptors, AMessageInPiecesKeepsTheDescriptorOfAnyPiece)
{
  socket_pair s;
  send_handle_in_two_pieces(s.fd[0], 0, 1);
  std::size_t const before = open_fd_count();
  {
    shareable_pool_handle const received = rmm_next::receive_pool_handle(s.fd[1]);
    EXPECT_TRUE(is_open(received.fd()));
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(PoolHandleDescriptors, ADescriptorInEachPieceIsRefusedAndBothClosed)
{
  socket_pair s;
  send_handle_in_two_pieces(s.fd[0], 1, 1);
  expect_refused_and_closed<rmm_next::logic_error>(s.fd[1], "this one came with 2");
}

TEST(PoolHandleDescriptors, ARecordOfAnotherSizeIsRefusedAndItsDescriptorClosed)
{
  socket_pair s{SOCK_SEQPACKET};
  std::array<int, 2> const& fd = s.fd;
  struct longer {
    rmm_next::detail::pool_handle_message message;
    std::array<char, 8> more;
  } const too_long{handle_message(allocation_handle_type::posix_file_descriptor), {}};
  send_with_devnull(fd[0], &too_long, sizeof(too_long), 1);
  expect_refused_and_closed<rmm_next::logic_error>(fd[1], "a record of more than");
  auto const message = handle_message(allocation_handle_type::posix_file_descriptor);
  send_with_devnull(fd[0], &message, sizeof(message) - 1, 1);
  send_with_devnull(fd[0], &message, sizeof(message), 1);
  expect_refused_and_closed<rmm_next::logic_error>(fd[1], "a record of ");
  shareable_pool_handle const next = rmm_next::receive_pool_handle(fd[1]);
  EXPECT_TRUE(is_open(next.fd())) << "the record after the refused one is a handle";
}

TEST(PoolHandleDescriptors, OtherControlMessagesAreIgnored)
{
  socket_pair s;
  int const on = 1;
  ASSERT_EQ(::setsockopt(s.fd[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)), 0);
  pipe_fds p;
  shareable_pool_handle const sent{p.take_read_end()};
  rmm_next::send_pool_handle(s.fd[0], sent);
  {
    std::size_t const before             = open_fd_count();
    shareable_pool_handle const received = rmm_next::receive_pool_handle(s.fd[1]);
    EXPECT_TRUE(is_open(received.fd())) << "credentials beside the descriptor do no harm";
    EXPECT_EQ(open_fd_count(), before + 1);
  }
  send_handle_with_devnull(s.fd[0], allocation_handle_type::posix_file_descriptor, 2, true);
  expect_refused_and_closed<rmm_next::logic_error>(s.fd[1], "this one came with 2");
}

TEST(PeerCredentials, AreThoseOfTheProcessAtTheOtherEnd)
{
  socket_pair s;
  rmm_next::peer_credentials const peer = rmm_next::get_peer_credentials(s.fd[1]);
  EXPECT_EQ(peer.pid, ::getpid());
  EXPECT_EQ(peer.uid, ::geteuid());
  EXPECT_EQ(peer.gid, ::getegid());
  EXPECT_TRUE(rmm_next::is_same_user(peer));
  EXPECT_FALSE(rmm_next::is_same_user({peer.pid, peer.uid + 1, peer.gid}));
}

TEST(PeerCredentials, ASocketOfAnotherDomainHasNone)
{
  int const inet = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(inet, 0);
  for (auto const& call :
       {std::function<void()>{[&] { (void)rmm_next::get_peer_credentials(inet); }},
        std::function<void()>{[&] { (void)rmm_next::receive_pool_handle(inet); }}}) {
    try {
      call();
      ADD_FAILURE() << "found peer credentials on an AF_INET socket";
    } catch (std::system_error const& e) {
      EXPECT_NE(std::string{e.what()}.find("not a Unix-domain socket"), std::string::npos)
        << e.what();
    }
  }
  ::close(inet);
}

TEST(PeerCredentials, TheCheckSeesThePeerAndMayAcceptIt)
{
  socket_pair s;
  pipe_fds p;
  rmm_next::send_pool_handle(s.fd[0], shareable_pool_handle{p.take_read_end()});
  std::optional<rmm_next::peer_credentials> seen;
  shareable_pool_handle const received =
    rmm_next::receive_pool_handle(s.fd[1], [&](rmm_next::peer_credentials const& peer) {
      seen = peer;
      return true;
    });
  EXPECT_TRUE(is_open(received.fd()));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->pid, ::getpid());
  EXPECT_EQ(seen->uid, ::geteuid());
}

TEST(PeerCredentials, ARefusedPeerIsNamedAndItsDescriptorClosed)
{
  socket_pair s;
  send_handle_with_devnull(s.fd[0], allocation_handle_type::posix_file_descriptor, 1);
  auto const refuse = [](rmm_next::peer_credentials const&) { return false; };
  expect_refused_and_closed<rmm_next::peer_refused>(
    s.fd[1], "(pid " + std::to_string(::getpid()) + ", uid " + std::to_string(::geteuid()), refuse);

  send_handle_with_devnull(s.fd[0], allocation_handle_type::posix_file_descriptor, 3);
  try {
    (void)rmm_next::receive_pool_handle(s.fd[1], refuse);
    FAIL() << "accepted a refused peer";
  } catch (rmm_next::peer_refused const& e) {
    EXPECT_EQ(e.code(), std::errc::permission_denied);
    EXPECT_EQ(e.peer().pid, ::getpid());
    EXPECT_EQ(e.peer().uid, ::geteuid());
    EXPECT_EQ(e.peer().gid, ::getegid());
  }
}

TEST(PeerCredentials, AnEmptyCheckIsRefusedBeforeReceiving)
{
  socket_pair s;
  EXPECT_THROW((void)rmm_next::receive_pool_handle(s.fd[1], {}), rmm_next::logic_error);
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
  if (rmm_next::test::has_usable_device()) {
    GTEST_SKIP() << "a device is present: ipc_gpu_test covers these calls";
  }
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
