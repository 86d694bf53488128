/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// vmm_resource on a device: kernels write and read its blocks, across streams and segments; the
// segments honour the granularity and the hooks run once per segment; a segment exported as a
// POSIX file descriptor is imported by a second process (vmm_resource_gpu_test_importer), which
// reads what this one wrote and writes back. And where a user can reach it: every call while a
// graph is captured on another thread (each mode) or on the calling thread, a block freed behind
// a kernel and reused from a second context of the device, and a forked child.

#include "support/capture_elsewhere.hpp"
#include "support/device_round_trip.cuh"
#include "support/kernels.cuh"
#include "support/second_context.hpp"
#include "support/vmm_messages.hpp"

#include <rmm_next/detail/unix_socket.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/vmm_resource.hpp>

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
#include <utility>
#include <vector>

#ifndef RMM_NEXT_TEST_VMM_IMPORTER
#error "RMM_NEXT_TEST_VMM_IMPORTER must name the importer executable"
#endif

extern char** environ;

namespace {

using rmm_next::vmm_options;
using rmm_next::vmm_resource;

constexpr std::size_t MiB = std::size_t{1} << 20;

/** @brief A resource, or a skip when the device lacks virtual memory management. */
#define RMM_NEXT_VMM_OR_SKIP(name, ...)        \
  std::optional<vmm_resource> name##_holder;   \
  try {                                        \
    name##_holder.emplace(__VA_ARGS__);        \
  } catch (rmm_next::not_supported const& e) { \
    GTEST_SKIP() << e.what();                  \
  }                                            \
  vmm_resource& name = *name##_holder

/** @brief Words of `data` that do not hold `pattern(i, seed)`, counted by a kernel. */
unsigned long long count_mismatches(std::uint32_t const* data,
                                    std::size_t n,
                                    std::uint32_t seed,
                                    cudaStream_t stream)
{
  return rmm_next::test::device_mismatches(data, n, seed, stream);
}

void fill(std::uint32_t* data, std::size_t n, std::uint32_t seed, cudaStream_t stream)
{
  rmm_next::test::
    fill_kernel<<<rmm_next::test::grid_for(n), rmm_next::test::block_size, 0, stream>>>(
      data, n, seed);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

struct owned_stream {
  owned_stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  owned_stream(owned_stream const&)            = delete;
  owned_stream& operator=(owned_stream const&) = delete;
  ~owned_stream() { (void)cudaStreamDestroy(s); }
  cudaStream_t s{};
};

TEST(VmmResourceGpu, KernelsWriteAndReadBlocksOfSeveralSegments)
{
  std::vector<std::pair<void*, std::size_t>> mapped;
  vmm_options options{.segment_size = 8 * MiB};
  options.on_segment_map = [&](void* base, std::size_t bytes) { mapped.emplace_back(base, bytes); };
  RMM_NEXT_VMM_OR_SKIP(mr, options);
  owned_stream stream;
  std::vector<std::pair<std::uint32_t*, std::size_t>> blocks;
  for (std::size_t i = 0; i < 12; ++i) {
    std::size_t const words = (i + 1) * 256 * 1024;  // 1 MiB ... 12 MiB
    auto* p = static_cast<std::uint32_t*>(mr.allocate(stream.s, words * sizeof(std::uint32_t)));
    fill(p, words, static_cast<std::uint32_t>(i), stream.s);
    blocks.emplace_back(p, words);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(
      count_mismatches(blocks[i].first, blocks[i].second, static_cast<std::uint32_t>(i), stream.s),
      0U)
      << "block " << i;
  }
  EXPECT_GT(mr.segments().size(), 1U);
  EXPECT_EQ(mapped.size(), mr.segments().size());  // once per segment
  for (auto const& s : mr.segments()) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.base) % mr.granularity(), 0U);
    EXPECT_EQ(s.bytes % mr.granularity(), 0U);
    EXPECT_GE(s.bytes, 8 * MiB);
  }
  for (auto const& [p, words] : blocks) {
    mr.deallocate(stream.s, p, words * sizeof(std::uint32_t));
  }
  EXPECT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
}

TEST(VmmResourceGpu, ABlockFreedOnOneStreamIsSafeOnAnother)
{
  RMM_NEXT_VMM_OR_SKIP(mr, vmm_options{.segment_size = 2 * MiB});
  owned_stream a;
  owned_stream b;
  std::size_t const words = 256 * 1024;
  auto* p                 = static_cast<std::uint32_t*>(mr.allocate(a.s, words * 4));
  fill(p, words, 1, a.s);
  mr.deallocate(a.s, p, words * 4);
  auto* q = static_cast<std::uint32_t*>(mr.allocate(b.s, words * 4));
  EXPECT_EQ(q, p);  // reused, after b waited for a's free
  fill(q, words, 2, b.s);
  EXPECT_EQ(count_mismatches(q, words, 2, b.s), 0U);
  mr.deallocate(b.s, q, words * 4);
}

TEST(VmmResourceGpu, HooksRunOncePerSegmentAndUnmapAtTheEnd)
{
  std::vector<void*> mapped;
  std::vector<void*> unmapped;
  {
    vmm_options options{.segment_size = 4 * MiB};
    options.on_segment_map   = [&](void* base, std::size_t) { mapped.push_back(base); };
    options.on_segment_unmap = [&](void* base, std::size_t) { unmapped.push_back(base); };
    RMM_NEXT_VMM_OR_SKIP(mr, options);
    std::vector<void*> ptrs;
    for (int i = 0; i < 64; ++i) {
      ptrs.push_back(mr.allocate_sync(256 * 1024));
    }
    for (void* p : ptrs) {
      mr.deallocate_sync(p, 256 * 1024);
    }
    for (int i = 0; i < 64; ++i) {
      mr.deallocate_sync(mr.allocate_sync(256 * 1024), 256 * 1024);
    }
    EXPECT_EQ(mapped.size(), mr.segments().size());
    EXPECT_TRUE(unmapped.empty());
  }
  EXPECT_EQ(unmapped, mapped);
}

TEST(VmmResourceGpu, AlignmentAboveTheGranularityIsRefused)
{
  RMM_NEXT_VMM_OR_SKIP(mr);
  EXPECT_THROW((void)mr.allocate_sync(1, mr.granularity() * 2), rmm_next::bad_alloc);
  void* p = mr.allocate_sync(1, mr.granularity());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % mr.granularity(), 0U);
  mr.deallocate_sync(p, 1);
}

std::string importer_path()
{
  char const* const from_environment = std::getenv("RMM_NEXT_TEST_VMM_IMPORTER");
  return from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                  : RMM_NEXT_TEST_VMM_IMPORTER;
}

TEST(VmmResourceGpu, AnotherProcessImportsASegmentAsAPosixFd)
{
  RMM_NEXT_VMM_OR_SKIP(
    mr, vmm_options{.handle_types = rmm_next::vmm_handle_types::posix_fd, .segment_size = 4 * MiB});
  owned_stream stream;
  void* first             = mr.allocate(stream.s, 4096);  // the block is not at the base
  std::size_t const words = 512 * 1024;
  auto* block             = static_cast<std::uint32_t*>(mr.allocate(stream.s, words * 4));
  fill(block, words, 11, stream.s);
  ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
  auto const segment = mr.segment_of(block);
  ASSERT_TRUE(segment.has_value());
  int const fd = mr.export_segment_fd(block);
  ASSERT_GE(fd, 0);

  int fds[2]{-1, -1};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_EQ(::fcntl(fds[0], F_SETFD, FD_CLOEXEC), 0);
  ASSERT_EQ(::fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
  std::string path = importer_path();
  std::string arg  = std::to_string(fds[1]);
  char* argv[]     = {path.data(), arg.data(), nullptr};
  pid_t pid{-1};
  ASSERT_EQ(::posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, environ), 0) << path;
  ::close(fds[1]);

  rmm_next::test::vmm_request request{};
  request.segment_bytes = segment->bytes;
  request.granularity   = mr.granularity();
  request.offset =
    reinterpret_cast<std::uintptr_t>(block) - reinterpret_cast<std::uintptr_t>(segment->base);
  request.words         = words;
  request.exporter_seed = 11;
  request.importer_seed = 12;
  request.device        = mr.device();
  rmm_next::detail::send_with_fd(fds[0], &request, sizeof(request), fd, "vmm_resource_gpu_test");
  ::close(fd);

  pollfd p{fds[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 60000), 1) << "the importer did not answer within 60 s";
  rmm_next::test::vmm_reply reply{};
  rmm_next::detail::receive_rest(
    fds[0], reinterpret_cast<char*>(&reply), sizeof(reply), "vmm_resource_gpu_test");
  int status{};
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(fds[0]);
  ASSERT_EQ(reply.ok, 1) << reply.message;
  EXPECT_EQ(reply.mismatches, 0U);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(count_mismatches(block, words, 12, stream.s), 0U);  // what the importer wrote
  mr.deallocate(stream.s, block, words * 4);
  mr.deallocate(stream.s, first, 4096);
}

// ---- Captures, a second context, fork ----------------------------------------------------------

/** Where a capture runs while the calling thread (in its default, global mode) uses the resource.
 */
enum class capture_place {
  other_thread_global,
  other_thread_thread_local,
  other_thread_relaxed,
  this_thread_global
};

char const* name_of(capture_place c)
{
  switch (c) {
    case capture_place::other_thread_global: return "other_thread_global";
    case capture_place::other_thread_thread_local: return "other_thread_thread_local";
    case capture_place::other_thread_relaxed: return "other_thread_relaxed";
    case capture_place::this_thread_global: return "this_thread_global";
  }
  return "?";
}

/** Each step a user takes with a resource, none of them on the captured stream. */
std::string use_beside_a_capture(cudaStream_t a, cudaStream_t b)
{
  std::string done = "construct";
  try {
    vmm_resource mr{vmm_options{.segment_size = 2 * MiB}};
    std::size_t const words = 64 * 1024;
    done                    = "allocate (the first segment)";
    auto* p                 = static_cast<std::uint32_t*>(mr.allocate(a, words * 4));
    fill(p, words, 1, a);
    done = "deallocate (a fence)";
    mr.deallocate(a, p, words * 4);
    done    = "allocate on another stream (a wait)";
    auto* q = static_cast<std::uint32_t*>(mr.allocate(b, words * 4));
    EXPECT_EQ(q, p);
    fill(q, words, 2, b);
    mr.deallocate(b, q, words * 4);
    done    = "allocate_sync (a host wait)";
    void* r = mr.allocate_sync(words * 4);
    EXPECT_EQ(r, p);
    mr.deallocate_sync(r, words * 4);
    done      = "allocate (a second segment)";
    void* big = mr.allocate(a, 3 * MiB);
    mr.deallocate(a, big, 3 * MiB);
    EXPECT_EQ(mr.segments().size(), 2U);
    done = "destroy (waits for the frees, unmaps)";
  } catch (rmm_next::not_supported const& e) {
    if (done == "construct") { return std::string{"skip: "} + e.what(); }
    return done + ": " + e.what();
  } catch (std::exception const& e) {
    return done + ": " + e.what();
  }
  return {};
}

class VmmBesideACapture : public ::testing::TestWithParam<capture_place> {};

TEST_P(VmmBesideACapture, EveryCallLeavesTheCaptureIntact)
{
  capture_place const place = GetParam();
  owned_stream a;
  owned_stream b;
  std::string failure;
  std::string capture;  // what became of the capture
  if (place == capture_place::this_thread_global) {
    owned_stream capturing;
    constexpr std::size_t captured_words = 4096;
    std::uint32_t* captured{};
    ASSERT_EQ(cudaMalloc(&captured, captured_words * 4), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(capturing.s, cudaStreamCaptureModeGlobal), cudaSuccess);
    fill(captured, captured_words, 21, capturing.s);
    failure = use_beside_a_capture(a.s, b.s);
    cudaGraph_t graph{};
    cudaError_t const ended = cudaStreamEndCapture(capturing.s, &graph);
    if (ended != cudaSuccess) {
      capture = std::string{"cudaStreamEndCapture returned "} + cudaGetErrorName(ended);
    } else {  // the captured work runs
      cudaGraphExec_t exec{};
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, a.s), cudaSuccess);
      EXPECT_EQ(count_mismatches(captured, captured_words, 21, a.s), 0U);
      (void)cudaGraphExecDestroy(exec);
    }
    if (graph != nullptr) { (void)cudaGraphDestroy(graph); }
    (void)cudaFree(captured);
  } else {
    rmm_next::test::capture_elsewhere elsewhere{
      place == capture_place::other_thread_global         ? cudaStreamCaptureModeGlobal
      : place == capture_place::other_thread_thread_local ? cudaStreamCaptureModeThreadLocal
                                                          : cudaStreamCaptureModeRelaxed};
    failure = use_beside_a_capture(a.s, b.s);
    capture = elsewhere.end();
  }
  (void)cudaGetLastError();
  if (failure.rfind("skip: ", 0) == 0) { GTEST_SKIP() << failure; }
  EXPECT_EQ(failure, "") << name_of(place);
  EXPECT_EQ(capture, "") << name_of(place);
}

INSTANTIATE_TEST_SUITE_P(EveryPlace,
                         VmmBesideACapture,
                         ::testing::Values(capture_place::other_thread_global,
                                           capture_place::other_thread_thread_local,
                                           capture_place::other_thread_relaxed,
                                           capture_place::this_thread_global),
                         [](auto const& info) { return std::string{name_of(info.param)}; });

TEST(VmmResourceGpu, ABlockFreedBehindAKernelIsReusedFromASecondContextOnlyAfterIt)
{
  RMM_NEXT_VMM_OR_SKIP(mr, vmm_options{.segment_size = 2 * MiB});
  owned_stream a;
  constexpr std::size_t words = 16 * 1024;
  auto* p                     = static_cast<std::uint32_t*>(mr.allocate(a.s, words * 4));
  // Keeps writing 0xdead into the block for 400 ms after its free on a.
  rmm_next::test::keep_writing_kernel<<<1, 256, 0, a.s>>>(
    p, words, std::uint32_t{0xdead}, 400'000'000ULL);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  mr.deallocate(a.s, p, words * 4);
  rmm_next::test::second_context ctx2;
  void* q                       = nullptr;
  unsigned long long mismatches = ~0ULL;
  std::thread{[&] {
    ctx2.make_current();
    owned_stream b;  // a stream of the second context
    q = mr.allocate(b.s, words * 4);
    fill(static_cast<std::uint32_t*>(q), words, 13, b.s);
    mismatches = count_mismatches(static_cast<std::uint32_t*>(q), words, 13, b.s);
    mr.deallocate(b.s, q, words * 4);
    EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  }}.join();
  EXPECT_EQ(q, p);  // the same block, after the second context's stream waited for the kernel
  EXPECT_EQ(mismatches, 0U);
  EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
  EXPECT_EQ(mr.allocated_bytes(), 0U);
}

/** The capture modes a stream can be captured in. */
char const* name_of(cudaStreamCaptureMode m)
{
  switch (m) {
    case cudaStreamCaptureModeGlobal: return "global";
    case cudaStreamCaptureModeThreadLocal: return "thread_local";
    case cudaStreamCaptureModeRelaxed: return "relaxed";
  }
  return "?";
}

class VmmFreeOnTheCapturingStream : public ::testing::TestWithParam<cudaStreamCaptureMode> {};

TEST_P(VmmFreeOnTheCapturingStream, TheCaptureEndsAndTheGraphFreesTheBlockWhenItRuns)
{
  RMM_NEXT_VMM_OR_SKIP(mr, vmm_options{.segment_size = 2 * MiB});
  owned_stream c;
  owned_stream b;
  constexpr std::size_t words = 64 * 1024;
  auto* p = static_cast<std::uint32_t*>(mr.allocate(c.s, words * 4));  // before the capture
  fill(p, words, 1, c.s);
  ASSERT_EQ(cudaStreamSynchronize(c.s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(c.s, GetParam()), cudaSuccess);
  fill(p, words, 7, c.s);            // the graph's last use of the block
  mr.deallocate(c.s, p, words * 4);  // freed on the capturing stream itself
  cudaGraph_t graph{};
  ASSERT_EQ(cudaStreamEndCapture(c.s, &graph), cudaSuccess) << name_of(GetParam());
  EXPECT_EQ(mr.allocated_bytes(), 0U);
  EXPECT_EQ(mr.graph_pending_bytes(), words * 4);
  void* before = mr.allocate(b.s, words * 4);  // the graph has not run: another block
  EXPECT_NE(before, p);
  mr.deallocate(b.s, before, words * 4);
  cudaGraphExec_t exec{};
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, c.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(c.s), cudaSuccess);
  EXPECT_EQ(mr.graph_pending_bytes(), 0U);
  auto* again = static_cast<std::uint32_t*>(mr.allocate(b.s, words * 4));
  EXPECT_EQ(again, p);                                    // the graph's host node gave it back
  EXPECT_EQ(count_mismatches(again, words, 7, b.s), 0U);  // after the graph's write
  mr.deallocate(b.s, again, words * 4);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  EXPECT_EQ(mr.allocated_bytes(), 0U);
}

INSTANTIATE_TEST_SUITE_P(EveryMode,
                         VmmFreeOnTheCapturingStream,
                         ::testing::Values(cudaStreamCaptureModeGlobal,
                                           cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed),
                         [](auto const& info) { return std::string{name_of(info.param)}; });

TEST(VmmResourceGpu, AFreeFromASecondContextDestroyedSinceLeavesTheSegmentUsable)
{
  RMM_NEXT_VMM_OR_SKIP(mr, vmm_options{.segment_size = 2 * MiB});
  owned_stream a;
  constexpr std::size_t words = 64 * 1024;
  auto* p                     = static_cast<std::uint32_t*>(mr.allocate(a.s, words * 4));
  void* neighbour             = mr.allocate(a.s, words * 4);
  ASSERT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
  {
    rmm_next::test::second_context ctx2;
    std::thread{[&] {
      ctx2.make_current();
      owned_stream s2;  // a stream of the second context
      fill(p, words, 9, s2.s);
      mr.deallocate(s2.s, p, words * 4);
      EXPECT_EQ(cudaStreamSynchronize(s2.s), cudaSuccess);
    }}.join();
  }  // the second context is destroyed here, after its stream
  void* again = nullptr;
  EXPECT_NO_THROW(again = mr.allocate(a.s, words * 4));
  EXPECT_EQ(again, p);
  EXPECT_EQ(count_mismatches(p, words, 9, a.s), 0U);  // the second context's write, done
  mr.deallocate(a.s, again, words * 4);
  void* sync = nullptr;
  EXPECT_NO_THROW(sync = mr.allocate_sync(words * 4));
  EXPECT_EQ(sync, p);
  mr.deallocate_sync(sync, words * 4);
  mr.deallocate(a.s, neighbour, words * 4);
  void* whole = nullptr;  // the merged block, another size
  EXPECT_NO_THROW(whole = mr.allocate(a.s, 2 * MiB));
  EXPECT_EQ(whole, p);
  mr.deallocate(a.s, whole, 2 * MiB);
  EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
}

TEST(VmmResourceGpu, SizesNearSizeMaxAreOutOfMemoryAndTheResourceKeepsWorking)
{
  RMM_NEXT_VMM_OR_SKIP(mr, vmm_options{.segment_size = 2 * MiB});
  owned_stream a;
  std::size_t const max = ~std::size_t{0};
  for (std::size_t const bytes : {max, max - 200, max - 4095, max - mr.granularity() + 1}) {
    try {
      (void)mr.allocate(a.s, bytes);
      ADD_FAILURE() << bytes << " bytes were handed out";
    } catch (rmm_next::out_of_memory const& e) {
      EXPECT_NE(std::string{e.what()}.find(std::to_string(bytes)), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)mr.allocate_sync(bytes), rmm_next::out_of_memory);
  }
  EXPECT_EQ(mr.allocated_bytes(), 0U);
  auto* p = static_cast<std::uint32_t*>(mr.allocate(a.s, 4096));
  auto* q = static_cast<std::uint32_t*>(mr.allocate(a.s, 4096));
  EXPECT_NE(p, q);
  fill(p, 1024, 3, a.s);
  EXPECT_EQ(count_mismatches(p, 1024, 3, a.s), 0U);
  mr.deallocate(a.s, p, 4096);
  mr.deallocate(a.s, q, 4096);
}

TEST(VmmResourceGpu, AForkedChildFreesAllocatesAndDropsTheResourceAndExitsCleanly)
{
  std::optional<vmm_resource> mr;
  try {
    mr.emplace(vmm_options{.segment_size = 2 * MiB});
  } catch (rmm_next::not_supported const& e) {
    GTEST_SKIP() << e.what();
  }
  owned_stream a;
  owned_stream b;
  void* live  = mr->allocate(a.s, 4096);
  void* freed = mr->allocate(a.s, 4096);
  mr->deallocate(a.s, freed, 4096);  // a fence the child's copy still holds
  ASSERT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
  int err[2]{-1, -1};
  ASSERT_EQ(::pipe(err), 0);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t const pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(err[1], 2);  // what the child prints on stderr goes to the parent
    ::close(err[0]);
    int code = 0;
    mr->deallocate(b.s, live, 4096);  // no CUDA work can run here; must not crash
    try {
      (void)mr->allocate(b.s, 4096);  // the block freed in the parent: refused, not handed out
      code = 4;
    } catch (rmm_next::cuda_error const&) {  // NOLINT(bugprone-empty-catch): the typed error
    } catch (...) {
      code = 5;
    }
    try {
      (void)mr->allocate(b.s, 3 * MiB);  // a new segment: the driver refuses in a child
      code = 2;
    } catch (std::exception const&) {  // NOLINT(bugprone-empty-catch): the expected typed error
    } catch (...) {
      code = 3;
    }
    mr.reset();  // waits for no event, unmaps nothing, reports nothing
    ::_exit(code);
  }
  ::close(err[1]);
  std::string printed;
  char buffer[256];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof(buffer))) > 0;) {
    printed.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(err[0]);
  int status{};
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << ": "
                                 << printed;
  EXPECT_EQ(WEXITSTATUS(status), 0)
    << "2: the child's allocation did not throw; 3: not a std::exception; 4: the child was handed "
       "the parent's freed block; 5: not a cuda_error";
  EXPECT_EQ(printed, "");
  // The parent's resource is untouched: its blocks work and are freed as usual.
  auto* words = static_cast<std::uint32_t*>(live);
  fill(words, 1024, 5, a.s);
  EXPECT_EQ(count_mismatches(words, 1024, 5, a.s), 0U);
  mr->deallocate(a.s, live, 4096);
  void* again = mr->allocate(a.s, 4096);
  EXPECT_EQ(mr->allocated_bytes(), 4096U);
  mr->deallocate(a.s, again, 4096);
  EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
}

}  // namespace
