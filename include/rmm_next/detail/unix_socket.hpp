/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>

#if !defined(_WIN32)

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

/**
 * @file
 * @brief A message of fixed size and at most one file descriptor over a connected Unix-domain
 * socket (`SCM_RIGHTS`): the receiver gets its own descriptor of the same open file, and closes
 * every other descriptor a peer sends.
 */

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {
namespace detail {

[[noreturn]] inline void throw_socket_error(int error, char const* who, char const* what)
{
  throw std::system_error{error, std::generic_category(), error_message(who, what)};
}

/** @brief Sends the rest of `bytes` after a short write (`MSG_NOSIGNAL`: no SIGPIPE). */
inline void send_rest(int socket, char const* bytes, std::size_t size, char const* who)
{
  while (size > 0) {
    ssize_t const n = ::send(socket, bytes, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) { continue; }
    if (n <= 0) { throw_socket_error(n < 0 ? errno : EPIPE, who, "send failed"); }
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

/** @brief Receives the rest of `bytes` after a short read; the peer closing is an error.
 * Descriptors sent with these bytes never enter the process: `recv` takes no control data, so the
 * kernel drops them. */
inline void receive_rest(int socket, char* bytes, std::size_t size, char const* who)
{
  while (size > 0) {
    ssize_t const n = ::recv(socket, bytes, size, 0);
    if (n < 0 && errno == EINTR) { continue; }
    if (n < 0) { throw_socket_error(errno, who, "recv failed"); }
    if (n == 0) { throw_socket_error(ECONNRESET, who, "the peer closed the socket mid-message"); }
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

/**
 * @brief Sends `size` bytes (at least one) and, unless `fd` is negative, a copy of `fd`.
 * @throws std::system_error when the socket refuses.
 */
inline void send_with_fd(int socket, void const* bytes, std::size_t size, int fd, char const* who)
{
  iovec io{const_cast<void*>(bytes), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
  msghdr msg{};
  msg.msg_iov    = &io;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control     = control;
    msg.msg_controllen  = sizeof(control);
    cmsghdr* const cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level    = SOL_SOCKET;
    cmsg->cmsg_type     = SCM_RIGHTS;
    cmsg->cmsg_len      = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  ssize_t n{};
  do {
    n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) { throw_socket_error(n < 0 ? errno : EPIPE, who, "sendmsg failed"); }
  // The descriptor went with the first byte; the rest of a short write follows alone.
  send_rest(socket, static_cast<char const*>(bytes) + n, size - static_cast<std::size_t>(n), who);
}

/**
 * @brief The credentials of the peer of `socket`, as the kernel recorded them when it was
 * connected (`SO_PEERCRED`).
 * @throws std::system_error when `socket` is not a Unix-domain socket (no peer is known) or the
 * query fails.
 */
inline ucred socket_peer_credentials(int socket, char const* who)
{
  int domain{};
  socklen_t length = sizeof(domain);
  if (::getsockopt(socket, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0) {
    throw_socket_error(errno, who, "getsockopt(SO_DOMAIN) failed");
  }
  if (domain != AF_UNIX) {
    throw_socket_error(EAFNOSUPPORT,
                       who,
                       "the socket is not a Unix-domain socket, so the kernel knows no peer "
                       "credentials; use a connected Unix-domain socket (a fabric handle may "
                       "travel by other means as its bytes, fabric_handle())");
  }
  ucred credentials{};
  length = sizeof(credentials);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    throw_socket_error(errno, who, "getsockopt(SO_PEERCRED) failed");
  }
  return credentials;
}

/** @brief How many descriptors one `recvmsg` takes at least; many more arrive truncated
 * (`MSG_CTRUNC`). */
inline constexpr std::size_t max_received_fds = 16;

/** @brief Room for the control data of one `recvmsg`: an `SCM_RIGHTS` of `max_received_fds`
 * descriptors, the `SCM_CREDENTIALS` of a socket with `SO_PASSCRED` and the `SCM_SECURITY` label
 * of one with `SO_PASSSEC`, so that only many descriptors truncate it. */
inline constexpr std::size_t receive_control_size =
  CMSG_SPACE(sizeof(int) * max_received_fds) + CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(256);

/**
 * @brief The descriptors that came with one message: the first is kept, closed with the object
 * unless released; every later one is closed as it arrives, and only counted.
 */
class received_fds {
 public:
  received_fds() noexcept                      = default;
  received_fds(received_fds const&)            = delete;
  received_fds& operator=(received_fds const&) = delete;
  received_fds& operator=(received_fds&&)      = delete;

  received_fds(received_fds&& other) noexcept
    : first_{std::exchange(other.first_, -1)}, count_{std::exchange(other.count_, 0)}
  {
  }

  ~received_fds()
  {
    if (first_ >= 0) { (void)::close(first_); }
  }

  /** @brief Takes ownership of `fd`, a descriptor that has just arrived. */
  void add(int fd) noexcept
  {
    ++count_;
    if (first_ < 0) {
      first_ = fd;
    } else {
      (void)::close(fd);
    }
  }

  /** @brief How many descriptors arrived, the closed ones included. */
  [[nodiscard]] std::size_t count() const noexcept { return count_; }

  /** @brief Gives up the first descriptor (-1 when none came), which the caller now closes. */
  [[nodiscard]] int release() noexcept { return std::exchange(first_, -1); }

 private:
  int first_{-1};
  std::size_t count_{};
};

/** @brief Takes every descriptor of every `SCM_RIGHTS` in the control data of `msg` into `fds`;
 * other control messages (credentials, security labels) carry none. */
inline void take_fds(msghdr& msg, received_fds& fds) noexcept
{
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) {
      continue;
    }
    std::size_t const count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd{};
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.add(fd);
    }
  }
}

/**
 * @brief One `recvmsg` of at most `size` bytes; the descriptors that came with them, close-on-exec,
 * go to `fds` before anything throws.
 * @param whole whether the bytes are one record (a datagram or sequenced-packet socket), which
 * must then be exactly `size` bytes.
 * @param started whether part of the message came before, for the message when the peer closes.
 * @return how many bytes arrived (at least one).
 */
inline std::size_t receive_part(int socket,
                                char* bytes,
                                std::size_t size,
                                received_fds& fds,
                                bool whole,
                                bool started,
                                char const* who)
{
  iovec io{bytes, size};
  alignas(cmsghdr) char control[receive_control_size]{};
  msghdr msg{};
  msg.msg_iov        = &io;
  msg.msg_iovlen     = 1;
  msg.msg_control    = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n{};
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) { throw_socket_error(errno, who, "recvmsg failed"); }
  take_fds(msg, fds);
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    throw_error<logic_error>(who,
                             "the message came with more control data than " +
                               std::to_string(sizeof(control)) + " bytes hold (room for at least " +
                               std::to_string(max_received_fds) +
                               " file descriptors), and it was truncated (MSG_CTRUNC); every "
                               "descriptor received was closed; send one descriptor per "
                               "message, with send_pool_handle");
  }
  if (n == 0) {
    throw_socket_error(ECONNRESET,
                       who,
                       started ? "the peer closed the socket mid-message"
                               : "the peer closed the socket before sending");
  }
  if (whole && ((msg.msg_flags & MSG_TRUNC) != 0 || static_cast<std::size_t>(n) != size)) {
    throw_error<logic_error>(who,
                             std::string{"a record of "} +
                               ((msg.msg_flags & MSG_TRUNC) != 0 ? "more than " : "") +
                               std::to_string(n) + " bytes arrived where " + std::to_string(size) +
                               " were expected; every descriptor that came with it was closed; "
                               "send it with send_pool_handle");
  }
  return static_cast<std::size_t>(n);
}

/**
 * @brief Receives a message of `size` bytes and the descriptors sent with it (close-on-exec).
 *
 * On a stream socket the bytes may come in several reads, each of which takes the descriptors
 * that came with it; on a datagram or sequenced-packet socket the message is one record.
 * @return the descriptors: the first is owned by the result, any other one is already closed.
 * @throws std::system_error when the socket fails or the peer closes it first.
 * @throws logic_error when more descriptors came than one read takes (`MSG_CTRUNC`), or a record
 * is not `size` bytes.
 * Whatever throws, every descriptor received has been closed.
 */
inline received_fds receive_with_fds(int socket, void* bytes, std::size_t size, char const* who)
{
  int type{};
  socklen_t length = sizeof(type);
  if (::getsockopt(socket, SOL_SOCKET, SO_TYPE, &type, &length) != 0) {
    throw_socket_error(errno, who, "getsockopt(SO_TYPE) failed");
  }
  received_fds fds;
  auto* const p     = static_cast<char*>(bytes);
  bool const stream = type == SOCK_STREAM;
  std::size_t got   = 0;
  do {
    got += receive_part(socket, p + got, size - got, fds, !stream, got > 0, who);
  } while (got < size);
  return fds;
}

}  // namespace detail
}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next

#endif  // !defined(_WIN32)
