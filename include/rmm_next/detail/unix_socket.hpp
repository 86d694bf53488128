/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/throw_error.hpp>

#if !defined(_WIN32)

#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>

/**
 * @file
 * @brief A message of fixed size and at most one file descriptor over a connected Unix-domain
 * socket (`SCM_RIGHTS`): the receiver gets its own descriptor of the same open file.
 */

namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail {

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

/** @brief Receives the rest of `bytes` after a short read; the peer closing is an error. */
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
 * @brief Receives `size` bytes and the descriptor sent with them.
 * @return the received descriptor (close-on-exec, owned by the caller), or -1 when none came.
 * @throws std::system_error when the socket fails or the peer closes it first; a descriptor
 * received before the failure is closed.
 */
inline int receive_with_fd(int socket, void* bytes, std::size_t size, char const* who)
{
  iovec io{bytes, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
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
  if (n == 0) { throw_socket_error(ECONNRESET, who, "the peer closed the socket before sending"); }
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    if (fd >= 0) { ::close(fd); }
    throw_socket_error(EMSGSIZE, who, "more descriptors arrived than one message carries");
  }
  try {
    receive_rest(socket, static_cast<char*>(bytes) + n, size - static_cast<std::size_t>(n), who);
  } catch (...) {
    if (fd >= 0) { ::close(fd); }
    throw;
  }
  return fd;
}

}  // namespace rmm_next::inline RMM_NEXT_ABI_NAMESPACE::detail

#endif  // !defined(_WIN32)
