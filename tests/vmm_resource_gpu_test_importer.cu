/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The second process of vmm_resource_gpu_test: started with one end of a Unix-domain socket (its
// number is the only argument), it receives a vmm_request with a segment's POSIX file descriptor,
// imports the segment (cuMemImportFromShareableHandle, reserve, map, grant access), counts with a
// kernel the words of the block that do not hold the exporter's pattern, writes its own pattern,
// unmaps and releases the import and replies with a vmm_reply.

#include "support/device_round_trip.cuh"
#include "support/importer_main.hpp"
#include "support/kernels.cuh"
#include "support/vmm_messages.hpp"

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/unix_socket.hpp>

#include <cuda.h>  // types only: the driver is reached through the runtime
#include <cuda_runtime_api.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

using rmm_next::test::vmm_request;

void check(cudaError_t status, char const* what) { rmm_next::test::importer_check(status, what); }

void check(CUresult status, char const* what)
{
  if (status != CUDA_SUCCESS) {
    throw std::runtime_error{std::string{"importer: "} + what + " returned CUresult " +
                             std::to_string(static_cast<int>(status))};
  }
}

std::uint64_t import_check_and_overwrite(int fd, vmm_request const& request)
{
  auto const& api = rmm_next::detail::driver();
  if (api.mem_import_from_shareable_handle == nullptr || api.mem_address_reserve == nullptr) {
    throw std::runtime_error{"importer: the driver lacks the virtual memory entry points"};
  }
  CUmemGenericAllocationHandle handle{};
  check(
    api.mem_import_from_shareable_handle(&handle,
                                         reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
    "cuMemImportFromShareableHandle");
  CUdeviceptr base{};
  check(api.mem_address_reserve(&base, request.segment_bytes, request.granularity, 0, 0),
        "cuMemAddressReserve");
  check(api.mem_map(base, request.segment_bytes, 0, handle, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id   = request.device;
  access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(api.mem_set_access(base, request.segment_bytes, &access, 1), "cuMemSetAccess");

  auto* const words   = reinterpret_cast<std::uint32_t*>(base + request.offset);
  std::size_t const n = request.words;
  cudaStream_t stream{};
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  unsigned long long const found =
    rmm_next::test::device_mismatches(words, n, request.exporter_seed, stream);
  rmm_next::test::
    fill_kernel<<<rmm_next::test::grid_for(n), rmm_next::test::block_size, 0, stream>>>(
      words, n, request.importer_seed);
  check(cudaGetLastError(), "fill_kernel launch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  check(api.mem_unmap(base, request.segment_bytes), "cuMemUnmap");
  check(api.mem_address_free(base, request.segment_bytes), "cuMemAddressFree");
  check(api.mem_release(handle), "cuMemRelease");
  return found;
}

}  // namespace

int main(int argc, char** argv)
{
  return rmm_next::test::importer_main(argc, argv, [](int socket) {
    vmm_request request{};
    rmm_next::detail::received_fds fds =
      rmm_next::detail::receive_with_fds(socket, &request, sizeof(request), "importer");
    int const fd = fds.release();
    if (fd < 0) { throw std::runtime_error{"importer: no descriptor came with the request"}; }
    try {
      check(cudaSetDevice(request.device), "cudaSetDevice");
      std::uint64_t const mismatches = import_check_and_overwrite(fd, request);
      ::close(fd);
      return mismatches;
    } catch (...) {
      ::close(fd);
      throw;
    }
  });
}
