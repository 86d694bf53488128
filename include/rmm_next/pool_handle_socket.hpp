/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

#include <rmm_next/detail/cxx20_check.hpp>  // first: one clear error below C++20

#include <rmm_next/allocation_handle_type.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/handle_names_and_fabric.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/detail/unix_socket.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/shareable_pool_handle.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <system_error>

#if !defined(_WIN32)
#include <sys/types.h>
#include <unistd.h>
#endif

/**
 * @file
 * @brief Sending an exported pool to another process of the node over a connected Unix-domain
 * socket (`send_pool_handle`, `receive_pool_handle`), and the peer check that guards it
 * (`peer_credentials`, `is_same_user`, `peer_refused`). The bytes and the descriptor travel
 * through `detail/unix_socket.hpp`. Not on Windows.
 */

#if !defined(_WIN32)

namespace rmm_next {
inline namespace RMM_NEXT_ABI_NAMESPACE {

/**
 * @brief Who is at the other end of a connected Unix-domain socket, as the kernel recorded it
 * when the socket was connected (`SO_PEERCRED`).
 */
struct peer_credentials {
  pid_t pid;  ///< the peer's process id
  uid_t uid;  ///< its effective user id
  gid_t gid;  ///< its effective group id
};

/**
 * @brief Thrown by `receive_pool_handle` when its peer check refuses the peer; `code()` is
 * `std::errc::permission_denied` and `what()` names the peer's pid, uid and gid.
 */
class peer_refused : public std::system_error {
 public:
  /**
   * @brief Constructs the error.
   * @param msg Names the call, the peer and the remedy.
   * @param peer The refused peer.
   */
  peer_refused(std::string const& msg, peer_credentials const& peer)
    : std::system_error{std::make_error_code(std::errc::permission_denied), msg}, peer_{peer}
  {
  }

  /** @brief The refused peer. */
  [[nodiscard]] peer_credentials const& peer() const noexcept { return peer_; }

 private:
  peer_credentials peer_;
};

namespace detail {

/** @brief What `send_pool_handle` sends; the file descriptor travels beside it. */
struct pool_handle_message {
  static constexpr char expected_tag[8] = {'r', 'm', 'm', 'n', 'i', 'p', 'c', '1'};
  char tag[8];
  std::int32_t type;
  cudaMemFabricHandle_t fabric;
};

/** @brief `get_peer_credentials` for the user's call `who`. */
inline peer_credentials peer_of(int socket, char const* who)
{
  ucred const c = socket_peer_credentials(socket, who);
  return peer_credentials{c.pid, c.uid, c.gid};
}

}  // namespace detail

/**
 * @brief The credentials of the peer at the other end of `socket` (`SO_PEERCRED`), e.g. for an
 * exporter to check whom it sends a pool to.
 * @throws std::system_error when `socket` is not a Unix-domain socket or the query fails.
 */
[[nodiscard]] inline peer_credentials get_peer_credentials(int socket)
{
  return detail::peer_of(socket, "get_peer_credentials");
}

/** @brief True when `peer` runs as this process's effective user: the peer check
 * `receive_pool_handle` makes unless given another. */
[[nodiscard]] inline bool is_same_user(peer_credentials const& peer) noexcept
{
  return peer.uid == ::geteuid();
}

/**
 * @brief Sends `handle` over a connected Unix-domain socket: a file descriptor as `SCM_RIGHTS`
 * (the receiver gets its own descriptor of the pool), a fabric handle as data. `handle` stays
 * owned by the caller.
 * @throws logic_error if `handle` is empty.
 * @throws std::system_error when the socket refuses.
 */
inline void send_pool_handle(int socket, shareable_pool_handle const& handle)
{
  if (!handle) {
    detail::throw_error<logic_error>("send_pool_handle", "the shareable_pool_handle is empty");
  }
  detail::pool_handle_message message{};
  std::memcpy(message.tag, detail::pool_handle_message::expected_tag, sizeof(message.tag));
  message.type   = static_cast<std::int32_t>(handle.type());
  message.fabric = handle.fabric_handle();
  detail::send_with_fd(socket, &message, sizeof(message), handle.fd(), "send_pool_handle");
}

/**
 * @brief Receives a handle sent with `send_pool_handle` by a peer that `accept_peer` accepts; the
 * descriptor it carries is this process's own (close-on-exec), owned by the result.
 *
 * Whoever holds a pool's descriptor can map all of the pool: by default only a peer running as
 * this process's user is accepted. Every descriptor the peer sends that the result does not own is
 * closed, whatever happens: a message with several descriptors, with one where none belongs, or
 * from a refused peer (the message is read first, so nothing of it stays on the socket).
 * @param socket a connected Unix-domain socket.
 * @param accept_peer decides from the peer's credentials (`SO_PEERCRED`, recorded when the socket
 * was connected) whether to take its handle; an exception it throws propagates.
 * @throws peer_refused if `accept_peer` returns false; it names the peer.
 * @throws std::system_error when `socket` is not a Unix-domain socket, fails, or the peer closes
 * it first.
 * @throws logic_error if `accept_peer` is empty, or what arrived is not a pool handle: other
 * bytes, a record of another size, or another number of descriptors than the handle type carries.
 */
[[nodiscard]] inline shareable_pool_handle receive_pool_handle(
  int socket, std::function<bool(peer_credentials const&)> const& accept_peer = is_same_user)
{
  char const* const who = "receive_pool_handle";
  if (!accept_peer) {
    detail::throw_error<logic_error>(
      who, "the peer check is empty; pass one, or leave it out to accept only this user");
  }
  peer_credentials const peer = detail::peer_of(socket, who);
  detail::pool_handle_message message{};
  detail::received_fds fds = detail::receive_with_fds(socket, &message, sizeof(message), who);
  if (!accept_peer(peer)) {
    detail::throw_error<peer_refused>(
      who,
      "the peer check refused the peer (pid " + std::to_string(peer.pid) + ", uid " +
        std::to_string(peer.uid) + ", gid " + std::to_string(peer.gid) +
        ") while this process runs as uid " + std::to_string(::geteuid()) +
        "; its message was read and every descriptor that came with it closed; connect only "
        "trusted peers, or pass receive_pool_handle a check that accepts this one",
      peer);
  }
  auto const type = static_cast<allocation_handle_type>(message.type);
  bool const tagged =
    std::memcmp(message.tag, detail::pool_handle_message::expected_tag, sizeof(message.tag)) == 0;
  bool const known =
    type == allocation_handle_type::posix_file_descriptor || type == allocation_handle_type::fabric;
  std::size_t const carried = type == allocation_handle_type::posix_file_descriptor ? 1 : 0;
  if (tagged && known && fds.count() == carried) {
    if (carried == 1) { return shareable_pool_handle{fds.release()}; }
    return shareable_pool_handle{message.fabric};
  }
  std::string why = "its bytes are not a pool handle's";
  if (tagged && !known) { why = "it names the handle type " + detail::handle_type_label(type); }
  if (tagged && known) {
    why = std::string{"a "} + detail::handle_type_name(type) + " handle comes with " +
          std::to_string(carried) + " file descriptor" + (carried == 1 ? "" : "s") +
          ", this one came with " + std::to_string(fds.count());
  }
  detail::throw_error<logic_error>(who,
                                   "the message received is not a pool handle sent with "
                                   "send_pool_handle: " +
                                     why +
                                     "; every descriptor that came with it was closed; "
                                     "send pool handles with send_pool_handle");
}

}  // namespace RMM_NEXT_ABI_NAMESPACE
}  // namespace rmm_next

#endif  // !defined(_WIN32)
