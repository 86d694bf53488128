/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// The second process of ipc_gpu_test: started with one end of a Unix-domain socket (its number is
// the only argument), it receives the exporter's pool handle and an ipc_request, imports the pool
// and the allocation, counts with a kernel the words that do not hold the exporter's pattern,
// writes its own pattern, frees the imported pointer and replies with an ipc_reply. The request's
// scenario adds to that: import the allocation twice, work from a second context of the device
// (and use the import after that context is destroyed), or fork a child that must be refused
// imports and leave the parent's alone. Asked to
// (ipc_request::capture_mode), it makes each import and the free while another of its threads
// captures a graph in that mode, and fails when a capture did not survive.
//
// Assertions are on whatever the build type: a release the library reports as failed (a second
// cudaFree of one mapping, say) prints "rmm_next::release: ..." and aborts the importer.
#undef NDEBUG

#include "support/capture_elsewhere.hpp"
#include "support/device_round_trip.cuh"
#include "support/forked_child.hpp"
#include "support/importer_main.hpp"
#include "support/ipc_messages.hpp"
#include "support/kernels.cuh"
#include "support/second_context.hpp"

#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/ipc.hpp>

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

using rmm_next::imported_pointer;
using rmm_next::test::ipc_request;
using rmm_next::test::ipc_scenario;

void check(cudaError_t status, char const* what) { rmm_next::test::importer_check(status, what); }

[[noreturn]] void fail(std::string const& what) { throw std::runtime_error{"importer: " + what}; }

/** @brief `step()`, beside a capture on another thread in the request's mode, if it asks for one.
 */
template <class Step>
auto beside(ipc_request const& request, char const* what, Step&& step)
{
  if (request.capture_mode == rmm_next::test::no_capture) { return std::forward<Step>(step)(); }
  rmm_next::test::capture_elsewhere elsewhere{
    static_cast<cudaStreamCaptureMode>(request.capture_mode)};
  auto result               = std::forward<Step>(step)();
  std::string const failure = elsewhere.end();
  if (!failure.empty()) { fail(std::string{what} + ": " + failure); }
  return result;
}

/** @brief Fails unless the calling thread's context is `expected` (when not null). */
void check_context(CUcontext expected, char const* after)
{
  if (expected == nullptr) { return; }
  CUcontext now{};
  if (rmm_next::detail::driver().ctx_get_current(&now) != CUDA_SUCCESS || now != expected) {
    fail(std::string{"the second context is no longer current after "} + after);
  }
}

/** @brief A non-blocking stream of the current context, destroyed with the object. */
class importer_stream {
 public:
  importer_stream()
  {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  importer_stream(importer_stream const&)            = delete;
  importer_stream& operator=(importer_stream const&) = delete;
  ~importer_stream() { (void)cudaStreamDestroy(stream_); }
  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_{};
};

/** @brief The words of `memory` that do not hold `pattern(i, seed)`, counted by a kernel. */
std::uint64_t mismatches(imported_pointer const& memory,
                         ipc_request const& request,
                         std::uint32_t seed,
                         cudaStream_t stream)
{
  unsigned long long const found = rmm_next::test::device_mismatches(
    static_cast<std::uint32_t const*>(memory.get()), request.words, seed, stream);
  if (found == ~0ULL) {
    fail(std::string{"counting the words of an import failed: "} +
         cudaGetErrorName(cudaGetLastError()));
  }
  return found;
}

/** @brief Writes the importer's pattern through `memory` and waits for it. */
void overwrite(imported_pointer const& memory, ipc_request const& request, cudaStream_t stream)
{
  std::size_t const n = request.words;
  rmm_next::test::
    fill_kernel<<<rmm_next::test::grid_for(n), rmm_next::test::block_size, 0, stream>>>(
      static_cast<std::uint32_t*>(memory.get()), n, request.importer_seed);
  check(cudaGetLastError(), "fill_kernel launch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

imported_pointer import(rmm_next::imported_pool const& pool, ipc_request const& request)
{
  return beside(
    request, "import_pointer", [&] { return rmm_next::import_pointer(pool, request.allocation); });
}

/**
 * @brief Frees the last import of the allocation: beside the capture with `reset()` when the
 * request asks for one, else the caller's own way, `cudaFree` of what `release()` gave up. The
 * exporter frees the allocation once it has the reply: the import must be freed first.
 */
void free_last(imported_pointer& memory, ipc_request const& request)
{
  if (request.capture_mode != rmm_next::test::no_capture) {
    beside(request, "imported_pointer::reset", [&] {
      memory.reset();
      return 0;
    });
  } else {
    check(cudaFree(memory.release()), "cudaFree of the imported pointer");
  }
  check(cudaGetLastError(), "the free of the imported pointer");
}

/** @brief One import: checks the exporter's pattern, writes the importer's, frees the import. */
std::uint64_t import_once(rmm_next::imported_pool const& pool,
                          ipc_request const& request,
                          CUcontext context)
{
  imported_pointer memory = import(pool, request);
  check_context(context, "import_pointer");
  importer_stream const stream;
  std::uint64_t const found = mismatches(memory, request, request.exporter_seed, stream.get());
  overwrite(memory, request, stream.get());
  free_last(memory, request);
  check_context(context, "the free of the import");
  return found;
}

/**
 * @brief Two imports of the allocation: one address, read through both; the release of either is
 * refused while the other lives; after the first is destroyed the second still reads the
 * exporter's pattern and writes the importer's, and the free, by the second, happens once.
 */
std::uint64_t import_twice(rmm_next::imported_pool const& pool, ipc_request const& request)
{
  imported_pointer first  = import(pool, request);
  imported_pointer second = import(pool, request);
  if (first.get() != second.get()) {
    char addresses[64];
    std::snprintf(addresses, sizeof(addresses), "%p and %p", first.get(), second.get());
    fail(std::string{"the driver mapped the allocation twice, at "} + addresses +
         ": nothing is shared to test");
  }
  importer_stream const stream;
  std::uint64_t found = mismatches(first, request, request.exporter_seed, stream.get()) +
                        mismatches(second, request, request.exporter_seed, stream.get());
  bool refused = false;
  try {
    (void)first.release();
  } catch (rmm_next::logic_error const& e) {
    refused =
      std::string{e.what()}.find("shared with 1 other imported_pointer") != std::string::npos;
  }
  if (!refused || first.get() != second.get()) {
    fail("release() of an import another one shares was not refused with the typed error");
  }
  beside(request, "the first imported_pointer's reset", [&] {
    first.reset();
    return 0;
  });
  check(cudaGetLastError(), "the first imported_pointer's reset");
  // Still mapped for the second: a kernel reads through it (an unmapped address would be an
  // illegal address, which loses the context).
  found += mismatches(second, request, request.exporter_seed, stream.get());
  overwrite(second, request, stream.get());
  found += mismatches(second, request, request.importer_seed, stream.get());
  free_last(second, request);
  return found;
}

/**
 * @brief One import, then a child forked: its import is refused with the typed error, it destroys
 * its copy of the parent's import (no CUDA call) and exits cleanly, printing nothing; the parent's
 * import is intact afterwards and freed by the parent.
 */
std::uint64_t import_and_fork(rmm_next::imported_pool const& pool, ipc_request const& request)
{
  imported_pointer memory = import(pool, request);
  importer_stream const stream;
  std::uint64_t found     = mismatches(memory, request, request.exporter_seed, stream.get());
  std::string const child = rmm_next::test::run_in_forked_child([&] {
    int code = 0;
    try {
      (void)rmm_next::import_pointer(pool, request.allocation);
      code |= 1;
    } catch (rmm_next::cuda_error const& e) {
      if (e.code() != cudaErrorInitializationError ||
          std::string{e.what()}.find("forked") == std::string::npos) {
        std::fprintf(stderr, "not the typed error: %s\n", e.what());
        code |= 2;
      }
    }
    memory.reset();  // the parent's mapping: nothing to free here
    return code;
  });
  if (!child.empty()) {
    fail("the forked child: " + child +
         " (1: it imported; 2: not the typed error naming the fork)");
  }
  found += mismatches(memory, request, request.exporter_seed, stream.get());
  overwrite(memory, request, stream.get());
  free_last(memory, request);
  return found;
}

/**
 * @brief The pool and the allocation imported with a second context current (`context`), the
 * exporter's pattern read there; then that context destroyed. The import belongs to the device's
 * pool, not to the context that made it: from the primary context a kernel still reads the
 * exporter's pattern through it and writes the importer's, and its free (`reset()`, the library's
 * own path) succeeds once.
 */
std::uint64_t import_then_destroy_the_context(
  rmm_next::imported_pool const& pool,
  ipc_request const& request,
  std::optional<rmm_next::test::second_context>& context)
{
  imported_pointer memory = import(pool, request);
  check_context(context->get(), "import_pointer");
  std::uint64_t found = 0;
  {
    importer_stream const stream;
    found += mismatches(memory, request, request.exporter_seed, stream.get());
  }
  context.reset();  // cuCtxDestroy of the current context
  check(cudaSetDevice(request.device), "cudaSetDevice after the second context was destroyed");
  importer_stream const stream;
  found += mismatches(memory, request, request.exporter_seed, stream.get());
  overwrite(memory, request, stream.get());
  memory.reset();
  check(cudaGetLastError(), "the free of an import whose context was destroyed");
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
    std::optional<rmm_next::test::second_context> context;
    if (request.scenario == ipc_scenario::second_context ||
        request.scenario == ipc_scenario::context_destroyed) {
      context.emplace();
      context->make_current();
    }
    CUcontext const expected = context ? context->get() : nullptr;
    rmm_next::imported_pool const pool =
      beside(request, "import_pool", [&] { return rmm_next::import_pool(handle, request.device); });
    check_context(expected, "import_pool");
    switch (request.scenario) {
      case ipc_scenario::import_twice: return import_twice(pool, request);
      case ipc_scenario::forked_child: return import_and_fork(pool, request);
      case ipc_scenario::context_destroyed:
        return import_then_destroy_the_context(pool, request, context);
      case ipc_scenario::import_once:
      case ipc_scenario::second_context: return import_once(pool, request, expected);
    }
    fail("unknown scenario " + std::to_string(static_cast<int>(request.scenario)));
  });
}
