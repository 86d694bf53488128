/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The floor of PyTorch's pluggable-allocator route, for torch_pairs.py: a pair of these two
// functions does next to nothing (one mutex and one hash lookup each; a freed block is handed out
// again for the same size, whatever the stream), so that what PyTorch's CUDAPluggableAllocator
// itself costs per torch.empty + del can be read apart from what an allocator behind it costs.
// Not an allocator to use: it ignores stream order, never gives memory back, and serves one device.
//
//   nvcc -O2 -shared -Xcompiler -fPIC floor_allocator.cpp -o floor_allocator.so

#include <cuda_runtime_api.h>

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

std::mutex blocks_mutex;
std::unordered_map<std::size_t, std::vector<void*>> free_blocks;  // by size rounded to 512

std::size_t rounded(ssize_t size)
{
  return (static_cast<std::size_t>(size) + 511) & ~std::size_t{511};
}

}  // namespace

extern "C" void* floor_alloc(ssize_t size, int /*device*/, cudaStream_t /*stream*/)
{
  std::size_t const bytes = rounded(size);
  {
    std::lock_guard const lock{blocks_mutex};
    if (auto& free = free_blocks[bytes]; !free.empty()) {
      void* const ptr = free.back();
      free.pop_back();
      return ptr;
    }
  }
  void* ptr = nullptr;
  return cudaMalloc(&ptr, bytes) == cudaSuccess ? ptr : nullptr;
}

extern "C" void floor_free(void* ptr, ssize_t size, int /*device*/, cudaStream_t /*stream*/)
{
  std::lock_guard const lock{blocks_mutex};
  free_blocks[rounded(size)].push_back(ptr);
}
