/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/ipc.md. Each block between "// [name]" and "// [name end]" is quoted
// there verbatim (a test checks it). This program is both processes: run without arguments it
// exports, and starts itself again ("import <socket>") to import.
#include "gpu_check.hpp"

#include <rmm_next/rmm_next.hpp>

#include <cuda_runtime_api.h>

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr std::size_t bytes = std::size_t{1} << 20;

void send_bytes(int socket, void const* data, std::size_t size)
{
  auto const* p = static_cast<char const*>(data);
  while (size > 0) {
    ssize_t const n = ::write(socket, p, size);
    if (n <= 0) { throw std::runtime_error{"ipc example: write failed"}; }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void receive_bytes(int socket, void* data, std::size_t size)
{
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t const n = ::read(socket, p, size);
    if (n <= 0) { throw std::runtime_error{"ipc example: read failed"}; }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

/** The importer says it has freed its import (and what it read) with one byte. */
void tell_exporter(int socket, bool read_ok)
{
  char const done = read_ok ? 'y' : 'n';
  send_bytes(socket, &done, 1);
}

bool wait_for_importer(int socket)
{
  char done{};
  receive_bytes(socket, &done, 1);
  return done == 'y';
}

void exporter(int socket)
{
  std::vector<unsigned char> const written(bytes, 0x5a);
  // [exporter]
  // A pool of its own whose memory may be exported as a POSIX file descriptor.
  rmm_next::async_device_resource mr{rmm_next::pool_options{
    .export_handle_type = rmm_next::allocation_handle_type::posix_file_descriptor}};
  void* data = mr.allocate_sync(bytes);  // complete: the importer may use it at once
  RMM_NEXT_CUDA_TRY(cudaMemcpy(data, written.data(), bytes, cudaMemcpyHostToDevice));

  // Once per pool: the descriptor travels over a Unix-domain socket (SCM_RIGHTS).
  rmm_next::shareable_pool_handle const pool =
    rmm_next::export_pool(mr, rmm_next::allocation_handle_type::posix_file_descriptor);
  rmm_next::send_pool_handle(socket, pool);

  // Once per allocation: a few bytes, sent by any means.
  rmm_next::pool_pointer_export const exported = rmm_next::export_pointer(data);
  send_bytes(socket, &exported, sizeof(exported));

  // Free only after every importer has freed its import.
  bool const importer_read_it = wait_for_importer(socket);
  mr.deallocate_sync(data, bytes);
  // [exporter end]
  rmm_next_test::expect(importer_read_it, "the importer read what the exporter wrote");
}

void importer(int socket)
{
  bool read_ok = false;
  // [importer]
  rmm_next::shareable_pool_handle const handle = rmm_next::receive_pool_handle(socket);
  rmm_next::imported_pool const pool = rmm_next::import_pool(handle);  // for the current device

  rmm_next::pool_pointer_export exported{};
  receive_bytes(socket, &exported, sizeof(exported));
  {
    rmm_next::imported_pointer const memory = rmm_next::import_pointer(pool, exported);
    // ... kernels of this process read and write memory.get() ...
    std::vector<unsigned char> read(bytes);
    RMM_NEXT_CUDA_TRY(cudaMemcpy(read.data(), memory.get(), bytes, cudaMemcpyDeviceToHost));
    read_ok = read == std::vector<unsigned char>(bytes, 0x5a);
  }  // freed here (cudaFree), complete when the scope ends

  tell_exporter(socket, read_ok);  // only now may the exporter free the allocation
  // [importer end]
}

/** Starts this program again as the importer, on one end of a socket pair. */
int run_both()
{
  int fds[2]{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) { return 1; }
  int const inherited = ::dup(fds[1]);  // without close-on-exec: the importer's end
  std::string self    = "/proc/self/exe";
  std::string verb    = "import";
  std::string arg     = std::to_string(inherited);
  char* argv[]        = {self.data(), verb.data(), arg.data(), nullptr};
  pid_t pid{};
  int const spawned = ::posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ);
  ::close(inherited);
  ::close(fds[1]);
  if (spawned != 0) {
    std::printf("FAILED: posix_spawn: %s\n", std::strerror(spawned));
    return 1;
  }
  try {
    exporter(fds[0]);
  } catch (std::exception const& e) {
    std::printf("FAILED: exporter: %s\n", e.what());
    ++rmm_next_test::failures();
  }
  ::close(fds[0]);
  int status{};
  rmm_next_test::expect(
    ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
    "the importer exited with 0");
  return rmm_next_test::failures() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc == 3 && std::strcmp(argv[1], "import") == 0) {
    try {
      importer(std::atoi(argv[2]));
      return 0;
    } catch (std::exception const& e) {
      std::printf("FAILED: importer: %s\n", e.what());
      return 1;
    }
  }
  rmm_next_test::require_devices();
  int handle_types{};
  RMM_NEXT_CUDA_TRY(
    cudaDeviceGetAttribute(&handle_types, cudaDevAttrMemoryPoolSupportedHandleTypes, 0));
  if ((handle_types & cudaMemHandleTypePosixFileDescriptor) == 0) {
    std::printf("SKIPPED: device 0 cannot export pools as POSIX file descriptors\n");
    return rmm_next_test::skip_return_code;
  }
  int const result = run_both();
  if (result == 0) { std::printf("snippets: all ran\n"); }
  return result;
}
