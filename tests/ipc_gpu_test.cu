/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Pool memory shared with another process: an owned pool exported as a POSIX file descriptor, one
// allocation exported, a second process (ipc_gpu_test_importer) that imports both, reads what this
// one wrote and writes back; so beside a graph captured on another thread in each capture mode,
// with the allocation imported twice, from a second context of the device in both processes, and
// with a child forked by each process; and the typed errors of pools that cannot be exported.

#include "support/capture_elsewhere.hpp"
#include "support/forked_child.hpp"
#include "support/ipc_messages.hpp"
#include "support/kernels.cuh"
#include "support/second_context.hpp"
#include "support/stream_guard.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/ipc.hpp>
#include <rmm_next/pool_options.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#ifndef RMM_NEXT_TEST_IPC_IMPORTER
#error "RMM_NEXT_TEST_IPC_IMPORTER must name the importer executable"
#endif

extern char** environ;

namespace {

/**
 * The importer program: RMM_NEXT_TEST_IPC_IMPORTER from the environment when set (CTest sets it;
 * a suite moved elsewhere points it there), else where the build put it.
 */
std::string importer_path()
{
  char const* const from_environment = std::getenv("RMM_NEXT_TEST_IPC_IMPORTER");
  return from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                  : RMM_NEXT_TEST_IPC_IMPORTER;
}

using rmm_next::allocation_handle_type;
using rmm_next::async_device_resource;
using rmm_next::pool_options;

constexpr std::size_t MiB = std::size_t{1} << 20;

int supported_handle_types(int device)
{
  int mask{};
  EXPECT_EQ(cudaDeviceGetAttribute(&mask, cudaDevAttrMemoryPoolSupportedHandleTypes, device),
            cudaSuccess);
  return mask;
}

/** @brief Words of `data` that do not hold `pattern(i, seed)`, counted by a kernel. */
unsigned long long count_mismatches(std::uint32_t const* data,
                                    std::size_t n,
                                    std::uint32_t seed,
                                    cudaStream_t stream)
{
  unsigned long long* counter{};
  unsigned long long found{~0ULL};
  EXPECT_EQ(cudaMallocAsync(&counter, sizeof(*counter), stream), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(counter, 0, sizeof(*counter), stream), cudaSuccess);
  rmm_next::test::
    count_mismatches_kernel<<<rmm_next::test::grid_for(n), rmm_next::test::block_size, 0, stream>>>(
      data, n, seed, counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(&found, counter, sizeof(found), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(counter, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return found;
}

/**
 * @brief ipc_gpu_test_importer, started with posix_spawn and one end of a Unix-domain socket
 * pair; killed and reaped with the object if it has not been waited for.
 */
class importer_process {
 public:
  importer_process()
  {
    int fds[2]{-1, -1};
    // Our end closes on exec; the importer's end is inherited.
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
      ADD_FAILURE() << "socketpair failed: errno " << errno;
      return;
    }
    socket_ = fds[0];
    EXPECT_EQ(::fcntl(socket_, F_SETFD, FD_CLOEXEC), 0);
    std::string path = importer_path();
    std::string arg  = std::to_string(fds[1]);
    char* argv[]     = {path.data(), arg.data(), nullptr};
    int const status = ::posix_spawn(&pid_, path.c_str(), nullptr, nullptr, argv, environ);
    EXPECT_EQ(status, 0) << "posix_spawn of " << path << " failed: error " << status;
    if (status != 0) { pid_ = -1; }
    ::close(fds[1]);
  }

  importer_process(importer_process const&)            = delete;
  importer_process& operator=(importer_process const&) = delete;

  ~importer_process()
  {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
    if (socket_ >= 0) { ::close(socket_); }
  }

  [[nodiscard]] bool started() const noexcept { return pid_ > 0 && socket_ >= 0; }

  [[nodiscard]] int socket() const noexcept { return socket_; }

  /** @brief True once the importer has written, or closed its end, within `seconds`. */
  [[nodiscard]] bool answers_within(int seconds) const
  {
    pollfd p{socket_, POLLIN, 0};
    int n{};
    do {
      n = ::poll(&p, 1, seconds * 1000);
    } while (n < 0 && errno == EINTR);
    return n == 1;
  }

  /** @brief Waits for the importer to exit: its exit status, or 128 + the signal that ended it. */
  int wait()
  {
    int status{};
    pid_t r{};
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    pid_ = -1;
    if (r < 0) { return -1; }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_{-1};
  int socket_{-1};
};

using rmm_next::test::ipc_scenario;

/** @brief The calling thread's current context (null if none or the driver cannot say). */
CUcontext current_context()
{
  CUcontext context{};
  (void)rmm_next::detail::driver().ctx_get_current(&context);
  return context;
}

/**
 * @brief Expects `export_pointer(data)` and `export_pool(mr)` to be refused in a forked child
 * with the typed error, and the child to exit cleanly and print nothing.
 */
void expect_refused_in_a_forked_child(async_device_resource const& mr, void* data)
{
  std::string const child = rmm_next::test::run_in_forked_child([&] {
    auto const refused = [](auto&& call) {
      try {
        call();
        return 1;
      } catch (rmm_next::cuda_error const& e) {
        bool const typed = e.code() == cudaErrorInitializationError &&
                           std::string{e.what()}.find("forked") != std::string::npos;
        if (!typed) { std::fprintf(stderr, "not the typed error: %s\n", e.what()); }
        return typed ? 0 : 2;
      }
    };
    return refused([&] { (void)rmm_next::export_pointer(data); }) |
           refused([&] {
             (void)rmm_next::export_pool(mr, allocation_handle_type::posix_file_descriptor);
           }) << 2;
  });
  EXPECT_EQ(child, "") << "1, 4: the child exported; 2, 8: not the typed error naming the fork";
}

/**
 * @brief Exports a pool and an allocation to the importer, which checks what this process wrote
 * and writes its own pattern, as `scenario` says (see `ipc_scenario`). `capture`: every export,
 * import and release runs while another thread of its process captures a graph in that mode.
 * Runs on the calling thread's context.
 */
void share_with_the_importer(async_device_resource& mr,
                             std::optional<cudaStreamCaptureMode> capture,
                             ipc_scenario scenario)
{
  int const device        = mr.device();
  CUcontext const context = current_context();
  rmm_next::test::stream_guard const owned_stream;  // of the calling thread's context
  cudaStream_t const stream         = owned_stream;
  std::size_t const words           = 4 * MiB;
  std::uint32_t const exporter_seed = 0x1234;
  std::uint32_t const importer_seed = 0xbeef;
  auto* const data =
    static_cast<std::uint32_t*>(mr.allocate(stream, words * sizeof(std::uint32_t)));
  rmm_next::test::
    fill_kernel<<<rmm_next::test::grid_for(words), rmm_next::test::block_size, 0, stream>>>(
      data, words, exporter_seed);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  // The importer may use the memory only once its allocation (and here the fill) has completed.
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  std::optional<rmm_next::test::capture_elsewhere> elsewhere;
  if (capture) { elsewhere.emplace(*capture); }
  rmm_next::shareable_pool_handle const handle =
    rmm_next::export_pool(mr, allocation_handle_type::posix_file_descriptor);
  rmm_next::pool_pointer_export const exported = rmm_next::export_pointer(data);
  if (elsewhere) { EXPECT_EQ(elsewhere->end(), "") << "export_pool and export_pointer"; }
  ASSERT_EQ(handle.type(), allocation_handle_type::posix_file_descriptor);
  ASSERT_GE(handle.fd(), 0);
  EXPECT_EQ(current_context(), context) << "an export changed the thread's context";
  if (scenario == ipc_scenario::forked_child) {
    expect_refused_in_a_forked_child(mr, data);
    // The parent keeps working: it allocates and frees, and shares `data` below.
    void* const more = mr.allocate_sync(MiB);
    EXPECT_NE(more, nullptr);
    mr.deallocate_sync(more, MiB);
  }
  rmm_next::test::ipc_request const request{
    exported,
    words,
    exporter_seed,
    importer_seed,
    device,
    capture ? static_cast<std::int32_t>(*capture) : rmm_next::test::no_capture,
    scenario};

  rmm_next::test::ipc_reply reply{};
  int exit_status = -1;
  {
    importer_process importer;
    ASSERT_TRUE(importer.started());
    rmm_next::send_pool_handle(importer.socket(), handle);
    rmm_next::detail::send_rest(
      importer.socket(), reinterpret_cast<char const*>(&request), sizeof(request), "ipc_gpu_test");
    ASSERT_TRUE(importer.answers_within(120)) << "the importer did not answer";
    try {
      rmm_next::detail::receive_rest(
        importer.socket(), reinterpret_cast<char*>(&reply), sizeof(reply), "ipc_gpu_test");
    } catch (std::exception const& e) {
      ADD_FAILURE() << "no reply from the importer (" << e.what() << "); it exited with "
                    << importer.wait();
      return;
    }
    exit_status = importer.wait();
  }
  EXPECT_EQ(exit_status, 0) << "134: the importer aborted, e.g. on a release failure it printed";
  ASSERT_EQ(reply.ok, 1) << reply.message;
  EXPECT_EQ(reply.mismatches, 0U) << "words the importer did not read as this process wrote them";
  // The importer has freed its imported pointer, so this process may free the allocation; first,
  // what the importer wrote is what this process reads.
  EXPECT_EQ(count_mismatches(data, words, importer_seed, stream), 0U);
  mr.deallocate(stream, data, words * sizeof(std::uint32_t));
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(current_context(), context);
}

/**
 * @brief `share_with_the_importer` with an exportable pool of device 0; for
 * `ipc_scenario::second_context`, on a thread whose current context is a second context of the
 * device.
 */
void round_trip_through_the_importer(std::optional<cudaStreamCaptureMode> capture,
                                     ipc_scenario scenario = ipc_scenario::import_once)
{
  int const device = 0;
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  if ((supported_handle_types(device) & cudaMemHandleTypePosixFileDescriptor) == 0) {
    GTEST_SKIP() << "device 0 cannot export pools as POSIX file descriptors";
  }
  async_device_resource mr{
    pool_options{.export_handle_type = allocation_handle_type::posix_file_descriptor}, device};
  if (scenario != ipc_scenario::second_context) {
    share_with_the_importer(mr, capture, scenario);
    return;
  }
  rmm_next::test::second_context const ctx2;
  std::thread{[&] {
    try {
      ctx2.make_current();
      share_with_the_importer(mr, capture, scenario);
      EXPECT_EQ(current_context(), ctx2.get());
    } catch (std::exception const& e) {
      ADD_FAILURE() << e.what();
    }
  }}.join();
}

TEST(Ipc, AnotherProcessReadsAndWritesTheExportedPoolsMemory)
{
  round_trip_through_the_importer(std::nullopt);
}

TEST(Ipc, ExportsImportsAndReleasesLeaveGlobalCapturesOnOtherThreadsIntact)
{
  round_trip_through_the_importer(cudaStreamCaptureModeGlobal);
}

TEST(Ipc, ExportsImportsAndReleasesLeaveThreadLocalCapturesOnOtherThreadsIntact)
{
  round_trip_through_the_importer(cudaStreamCaptureModeThreadLocal);
}

TEST(Ipc, ExportsImportsAndReleasesLeaveRelaxedCapturesOnOtherThreadsIntact)
{
  round_trip_through_the_importer(cudaStreamCaptureModeRelaxed);
}

TEST(Ipc, AnAllocationImportedTwiceIsMappedOnceAndFreedOnceByTheLastImport)
{
  round_trip_through_the_importer(std::nullopt, ipc_scenario::import_twice);
}

TEST(Ipc, AnAllocationImportedTwiceBesideAGlobalCaptureIsFreedOnce)
{
  round_trip_through_the_importer(cudaStreamCaptureModeGlobal, ipc_scenario::import_twice);
}

TEST(Ipc, ExportImportUseAndReleaseWorkFromASecondContextOfTheDevice)
{
  round_trip_through_the_importer(std::nullopt, ipc_scenario::second_context);
}

TEST(Ipc, AnImportOutlivesTheDestroyedContextThatMadeItAndIsFreedOnce)
{
  round_trip_through_the_importer(std::nullopt, ipc_scenario::context_destroyed);
}

TEST(Ipc, ForkedChildrenOfTheExporterAndTheImporterAreRefusedAndLeaveTheParentsMemoryAlone)
{
  round_trip_through_the_importer(std::nullopt, ipc_scenario::forked_child);
}

void expect_not_exportable(async_device_resource const& mr)
{
  try {
    (void)rmm_next::export_pool(mr, allocation_handle_type::posix_file_descriptor);
    ADD_FAILURE() << "exported a pool created without export_handle_type";
  } catch (rmm_next::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::export_pool: ", 0), 0U) << what;
    EXPECT_NE(what.find("posix_file_descriptor"), std::string::npos) << what;
    EXPECT_NE(what.find("export_handle_type"), std::string::npos) << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed export left an error behind";
}

TEST(Ipc, APoolCreatedWithoutTheHandleTypeIsNotExportable)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  async_device_resource owned{pool_options{}, 0};
  expect_not_exportable(owned);
  expect_not_exportable(async_device_resource{});  // the driver's current pool

  void* ptr = owned.allocate_sync(MiB);
  try {
    (void)rmm_next::export_pointer(ptr);
    ADD_FAILURE() << "exported a pointer of a pool created without export_handle_type";
  } catch (rmm_next::logic_error const& e) {
    std::string const what = e.what();
    EXPECT_EQ(what.rfind("rmm_next::export_pointer: ", 0), 0U) << what;
    EXPECT_NE(what.find("export_handle_type"), std::string::npos) << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  owned.deallocate_sync(ptr, MiB);
}

TEST(Ipc, FabricHandlesWorkOrAreNotSupported)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  int const mask             = supported_handle_types(0);
  bool const device_says_yes = (mask & cudaMemHandleTypeFabric) != 0;
  pool_options const fabric{.export_handle_type = allocation_handle_type::fabric};
  if (!device_says_yes) {
    try {
      async_device_resource mr{fabric, 0};
      ADD_FAILURE() << "created a fabric pool on a device whose handle type mask is " << mask;
    } catch (rmm_next::not_supported const& e) {
      std::string const what = e.what();
      EXPECT_NE(what.find("fabric"), std::string::npos) << what;
      EXPECT_NE(what.find("cudaDevAttrMemoryPoolSupportedHandleTypes"), std::string::npos) << what;
    }
    return;
  }
  // The device has fabric handles; the system may still give this process no IMEX channel.
  try {
    async_device_resource mr{fabric, 0};
    rmm_next::shareable_pool_handle const handle =
      rmm_next::export_pool(mr, allocation_handle_type::fabric);
    EXPECT_EQ(handle.type(), allocation_handle_type::fabric);
    EXPECT_EQ(handle.fd(), -1);
    expect_not_exportable(mr);  // a fabric pool is not a POSIX-descriptor pool
  } catch (rmm_next::not_supported const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("fabric"), std::string::npos) << what;
    EXPECT_NE(what.find("IMEX channel"), std::string::npos) << what;
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
