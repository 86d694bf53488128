/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A fake of the CUDA runtime calls the async resources make, for CPU tests of what only a device
// would otherwise show: which pools are created and destroyed, which attributes are set, what
// happens when a step of construction fails. fake_cuda_runtime.cpp defines the runtime functions
// themselves (extern "C", so the program's own definitions take the place of libcudart's) and
// the driver entry points the library looks up; link it into a test program of its own. In a
// child forked from the program every call fails, with cudaErrorInitializationError
// (CUDA_ERROR_NOT_INITIALIZED from the driver entry points), as the real driver's do.
//
// Handles are addresses of records kept here: a pool is its pool_record, a stream its
// stream_record. Allocations are unique addresses never to be dereferenced.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rmm_next::test::fake_cuda {

struct pool_record {
  cudaMemLocation location{};
  cudaMemAllocationType type{};
  bool created_by_library{false};  ///< made by cudaMemPoolCreate (not a driver or test pool)
  bool destroyed{false};
  std::uint64_t release_threshold{0};
  std::map<int, cudaMemAccessFlags> access;  ///< granted to devices (the owner always has it)
  std::size_t used_bytes{0};
};

struct stream_record {
  int device{};
  bool destroyed{false};
};

/** @brief Everything the fake knows; `reset()` starts over. */
struct state {
  int device_count{2};
  int current_device{0};
  std::vector<std::unique_ptr<pool_record>> pools;
  std::vector<std::unique_ptr<stream_record>> streams;
  std::map<std::string, cudaError_t> fail_next;  ///< call name -> error its next call returns
  bool fail_new_after_pool_create{false};  ///< the operator new after cudaMemPoolCreate throws
  std::vector<std::pair<cudaMemPool_t, std::uint64_t>> threshold_sets;  ///< every change
  std::uintptr_t next_address{0x10000};
};

/** @brief The fake's state. */
state& fake();

/** @brief Forgets every pool, stream and failure; `device_count` devices, device 0 current. */
void reset(int device_count = 2);

/** @brief A pool the test owns (as `cudaMemPoolCreate` by the application would make it). */
cudaMemPool_t make_pool(cudaMemLocation location, cudaMemAllocationType type);

/** @brief The record of `pool`. */
pool_record& record(cudaMemPool_t pool);

/** @brief A stream of `device`. */
cudaStream_t make_stream(int device);

/** @brief Pools the library created with `cudaMemPoolCreate`, and how many of them it destroyed. */
int pools_created();
int pools_destroyed();

/** @brief The driver's current pool for `location` and `type` (made on first use). */
cudaMemPool_t current_pool(cudaMemLocation location, cudaMemAllocationType type);

}  // namespace rmm_next::test::fake_cuda
