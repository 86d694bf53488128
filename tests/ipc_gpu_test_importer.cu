/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The second process of ipc_gpu_test: started with one end of a Unix-domain socket (its number is
// the only argument), it receives the exporter's pool handle and an ipc_request, imports the pool
// and the allocation, counts with a kernel the words that do not hold the exporter's pattern,
// writes its own pattern, frees the imported pointer and replies with an ipc_reply. Asked to
// (ipc_request::beside_a_capture), it makes each import and the free while another of its threads
// captures a graph in global mode, and fails when a capture did not survive.

#include "support/capture_elsewhere.hpp"
#include "support/importer_main.hpp"
#include "support/ipc_messages.hpp"
#include "support/kernels.cuh"

#include <rmm_next/ipc.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

using rmm_next::test::ipc_request;

void check(cudaError_t status, char const* what) { rmm_next::test::importer_check(status, what); }

/** @brief `step()`, beside a global-mode capture on another thread when `capture` is set. */
template <class Step>
auto beside(bool capture, char const* what, Step&& step)
{
  if (!capture) { return std::forward<Step>(step)(); }
  rmm_next::test::capture_elsewhere elsewhere{cudaStreamCaptureModeGlobal};
  auto result               = std::forward<Step>(step)();
  std::string const failure = elsewhere.end();
  if (!failure.empty()) {
    throw std::runtime_error{std::string{"importer: "} + what + ": " + failure};
  }
  return result;
}

/** @brief Checks the exporter's pattern, writes the importer's, frees the imported pointer. */
std::uint64_t check_and_overwrite(rmm_next::imported_pool const& pool, ipc_request const& request)
{
  bool const capture                = request.beside_a_capture == 1;
  rmm_next::imported_pointer memory = beside(
    capture, "import_pointer", [&] { return rmm_next::import_pointer(pool, request.allocation); });
  auto* const words   = static_cast<std::uint32_t*>(memory.get());
  std::size_t const n = request.words;

  cudaStream_t stream{};
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  unsigned long long* mismatches{};
  check(cudaMalloc(&mismatches, sizeof(*mismatches)), "cudaMalloc");
  check(cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), stream), "cudaMemsetAsync");
  unsigned int const grid  = rmm_next::test::grid_for(n);
  unsigned int const block = rmm_next::test::block_size;
  rmm_next::test::count_mismatches_kernel<<<grid, block, 0, stream>>>(
    words, n, request.exporter_seed, mismatches);
  check(cudaGetLastError(), "count_mismatches_kernel launch");
  rmm_next::test::fill_kernel<<<grid, block, 0, stream>>>(words, n, request.importer_seed);
  check(cudaGetLastError(), "fill_kernel launch");
  unsigned long long found{};
  check(cudaMemcpyAsync(&found, mismatches, sizeof(found), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaFree(mismatches), "cudaFree");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  // The exporter frees the allocation once it has the reply: the import must be freed first.
  if (capture) {
    beside(true, "imported_pointer::reset", [&] {
      memory.reset();
      return 0;
    });
  } else {
    check(cudaFree(memory.release()), "cudaFree of the imported pointer");
  }
  return found;
}

}  // namespace

int main(int argc, char** argv)
{
  return rmm_next::test::importer_main(argc, argv, [](int socket) {
    rmm_next::shareable_pool_handle const handle = rmm_next::receive_pool_handle(socket);
    ipc_request request{};
    rmm_next::detail::receive_rest(
      socket, reinterpret_cast<char*>(&request), sizeof(request), "importer");
    check(cudaSetDevice(request.device), "cudaSetDevice");
    rmm_next::imported_pool const pool = beside(request.beside_a_capture == 1, "import_pool", [&] {
      return rmm_next::import_pool(handle, request.device);
    });
    return check_and_overwrite(pool, request);
  });
}
