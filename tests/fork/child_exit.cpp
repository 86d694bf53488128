/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// A process whose statics hold CUDA state forks, and the child exits with std::exit(0), which
// destroys those statics: a function-local static async_device_resource that owns its pool (with
// memory still allocated from it), a static thread_cache_adaptor over it with a block cached in
// the exiting thread, and the process-wide map with its ref set to the resource. The child cannot
// use CUDA (the driver refuses every call there), yet must exit with status 0 and print nothing,
// also when it frees memory first. The parent checks each child's status, then that its own
// resources still work.
//
// Built with assertions on (RMM_NEXT_TEST_ASSERTS: a release failure the library does not
// tolerate asserts) and with NDEBUG, against the CUDA runtime (gpu: exits 77 without a device)
// and against tests/support/fake_cuda_runtime.cpp (cpu), whose calls fail in a forked child.

#if defined(RMM_NEXT_TEST_ASSERTS)
#undef NDEBUG
#endif

#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <execinfo.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using rmm_next::async_device_resource;
using rmm_next::default_alignment;
using cached_resource = rmm_next::thread_cache_adaptor<async_device_resource>;

constexpr std::size_t block_bytes = 256;

async_device_resource& owned_pool_resource()
{
  static async_device_resource resource{rmm_next::pool_options{.initial_pool_size = 1 << 20}};
  return resource;
}

cached_resource& cache()
{
  static cached_resource adaptor{owned_pool_resource()};
  return adaptor;
}

/** @brief What the child does before `std::exit(0)`. */
enum class child_work { none, free_memory };

/** @brief In a child: a crash prints where it happened before the child dies. */
void report_crashes()
{
  struct sigaction action{};
  action.sa_handler = [](int sig) {
    void* frames[64];
    int const n      = backtrace(frames, 64);
    char const msg[] = "child crashed; backtrace:\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    backtrace_symbols_fd(frames, n, 2);
    _exit(128 + sig);
  };
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

struct parent_memory {
  void* block;         ///< from the resource, still allocated
  void* cached_block;  ///< from the adaptor, still allocated
};

/** @brief Forks a child that does `work` and exits; the child's wait status, or -1. */
int run_child(child_work work, parent_memory memory)
{
  std::fflush(stdout);  // the child's exit would print the parent's buffered output again
  pid_t const pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return -1;
  }
  if (pid == 0) {
    report_crashes();
    if (work == child_work::free_memory && memory.block != nullptr) {
      owned_pool_resource().deallocate_sync(memory.block, block_bytes);
      cache().deallocate(cuda::stream_ref{cudaStreamPerThread}, memory.cached_block, block_bytes);
    }
    std::exit(0);
  }
  int status{};
  if (waitpid(pid, &status, 0) != pid) {
    std::perror("waitpid");
    return -1;
  }
  return status;
}

/**
 * @brief The wait status of a child that exits at once, forked after this process allocated from,
 * and freed to, a pool it made with the runtime alone (destroyed again afterwards).
 */
int raw_pool_child()
{
  cudaMemPoolProps props{};
  props.allocType     = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id   = 0;
  cudaMemPool_t pool{};
  if (cudaMemPoolCreate(&pool, &props) != cudaSuccess) { return 0; }
  std::uint64_t keep = UINT64_MAX;  // the memory stays mapped, as in rmm-next's pools
  (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  void* p{};
  if (cudaMallocFromPoolAsync(&p, 256, pool, cudaStreamPerThread) == cudaSuccess) {
    (void)cudaFreeAsync(p, cudaStreamPerThread);
  }
  (void)cudaStreamSynchronize(cudaStreamPerThread);
  std::fflush(stdout);
  pid_t const pid = fork();
  if (pid == 0) { std::exit(0); }
  int status{};
  (void)waitpid(pid, &status, 0);
  (void)cudaMemPoolDestroy(pool);
  return status;
}

void expect_clean_exit(int status, char const* what)
{
  bool const clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!clean && status != -1) {
    if (WIFSIGNALED(status)) {
      std::printf("child (%s) was killed by signal %d\n", what, WTERMSIG(status));
    } else if (WIFEXITED(status)) {
      std::printf("child (%s) exited with status %d\n", what, WEXITSTATUS(status));
    }
  }
  rmm_next_test::expect(clean, what);
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  // A child of a process that has used CUDA, before any rmm-next object exists: the baseline.
  (void)cudaFree(nullptr);  // the runtime and the primary context exist
  expect_clean_exit(run_child(child_work::none, {nullptr, nullptr}),
                    "a child forked before any rmm-next object");
  // The same after an allocation from a pool the process made, with the runtime alone: where the
  // driver's own exit in a forked child fails then, nothing rmm-next does can be shown here.
  if (int const status = raw_pool_child(); !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    std::printf(
      "SKIPPED: a forked child of a process that allocated from a pool of its own "
      "(cudaMemPoolCreate, cudaMallocFromPoolAsync; no rmm-next) %s %d in the driver\n",
      WIFSIGNALED(status) ? "dies of signal" : "exits with status",
      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return 77;
  }
  cuda::stream_ref const stream{cudaStreamPerThread};

  async_device_resource& resource = owned_pool_resource();
  rmm_next::set_current_device_resource_ref(resource);
  parent_memory const memory{
    rmm_next::get_current_device_resource_ref().allocate_sync(block_bytes, default_alignment),
    cache().allocate(stream, block_bytes)};
  cache().deallocate(stream, cache().allocate(stream, block_bytes), block_bytes);  // cached here
  if (cudaStreamSynchronize(cudaStreamPerThread) != cudaSuccess) {
    std::printf("FAILED: cudaStreamSynchronize\n");
    return 1;
  }

  expect_clean_exit(run_child(child_work::none, memory), "a child that exits at once");
  expect_clean_exit(run_child(child_work::free_memory, memory),
                    "a child that frees memory, then exits");

  // The parent's CUDA state is its own: the children changed nothing here.
  rmm_next_test::expect(!rmm_next::detail::runtime_unloading().load(),
                        "the parent still makes CUDA calls");
  resource.deallocate_sync(memory.block, block_bytes);
  cache().deallocate(stream, memory.cached_block, block_bytes);
  void* const again = resource.allocate_sync(block_bytes);
  rmm_next_test::expect(again != nullptr, "the parent allocates after the children exited");
  resource.deallocate_sync(again, block_bytes);
  (void)cudaStreamSynchronize(cudaStreamPerThread);

  std::printf("%s\n", rmm_next_test::failures() == 0 ? "passed" : "FAILED");
  return rmm_next_test::failures() == 0 ? 0 : 1;
}
