/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// What the second processes of the IPC tests (ipc_gpu_test_importer,
// vmm_resource_gpu_test_importer) share: the reply they send, a CUDA check that throws, and main()
// around their work.

#include <rmm_next/detail/unix_socket.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

namespace rmm_next::test {

/** @brief Sent once the importer has given back what it imported. */
struct importer_reply {
  std::int32_t ok;           ///< 1 when every step succeeded
  std::uint64_t mismatches;  ///< words that did not hold the exporter's pattern
  char message[512];         ///< what failed, when `ok` is 0
};

/** @brief Throws "importer: <what> returned <error>" unless `status` is cudaSuccess. */
inline void importer_check(cudaError_t status, char const* what)
{
  if (status != cudaSuccess) {
    throw std::runtime_error{std::string{"importer: "} + what + " returned " +
                             cudaGetErrorName(status)};
  }
}

/**
 * @brief main() of an importer: `argv[1]` is its end of the socket; `work(socket)` returns the
 * mismatches it counted, or throws. Replies with an `importer_reply`; the exit status is 0 when
 * the work succeeded, 1 when it failed, 2 for bad arguments, 3 when no reply could be sent.
 */
template <class Work>
int importer_main(int argc, char** argv, Work&& work)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <socket descriptor>\n", argv[0]);
    return 2;
  }
  int const socket = std::atoi(argv[1]);
  importer_reply reply{};
  try {
    reply.mismatches = work(socket);
    reply.ok         = 1;
  } catch (std::exception const& e) {
    std::snprintf(reply.message, sizeof(reply.message), "%s", e.what());
  }
  try {
    rmm_next::detail::send_rest(
      socket, reinterpret_cast<char const*>(&reply), sizeof(reply), "importer");
  } catch (std::exception const& e) {
    std::fprintf(stderr, "importer: could not reply: %s\n", e.what());
    return 3;
  }
  return reply.ok == 1 ? 0 : 1;
}

}  // namespace rmm_next::test
