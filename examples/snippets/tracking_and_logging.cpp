/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
// The code shown in docs/adaptors.md for tracking_adaptor and logging_adaptor, and the stack of
// adaptors in docs/user_guide.md. Each block between "// [name]" and "// [name end]" is quoted
// there verbatim (tests/docs/check_snippets.py checks it), and this program runs them all on a GPU
// (exit 77 without one) and checks what the docs state.
#include "gpu_check.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/limiting_adaptor.hpp>
#include <rmm_next/logging_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>
#include <rmm_next/tracking_adaptor.hpp>

#include <cuda_runtime_api.h>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

using rmm_next_test::expect;

namespace {

void tracking(cudaStream_t stream)
{
  // [tracking-adaptor]
  rmm_next::tracking_adaptor mr{rmm_next::async_device_resource{}, {.stack_traces = true}};
  void* p = mr.allocate(stream, 1 << 20);
  void* q = mr.allocate(stream, 4096);
  mr.deallocate(stream, q, 4096);

  for (rmm_next::tracked_allocation const& a : mr.outstanding()) {  // oldest first: only p
    std::cout << a.ptr << ": " << a.bytes << " bytes, allocated at\n" << a.stack_trace;
  }
  std::cout << mr.report();          // the count and the bytes, then one line per allocation
  mr.log_outstanding_allocations();  // the same, to std::cerr (or the stream given), flushed
  mr.deallocate(stream, p, 1 << 20);
  // [tracking-adaptor end]
  expect(mr.count_outstanding() == 0 && mr.bytes_outstanding() == 0, "tracking: all freed");
}

void logging(cudaStream_t stream)
{
  std::ostringstream out;
  // [logging-adaptor]
  rmm_next::logging_adaptor mr{rmm_next::async_device_resource{}, out};  // or a file's path
  void* p = mr.allocate(stream, 4096);
  mr.deallocate(stream, p, 4096);
  mr.flush();  // the last copy's destruction flushes too
  // out: Thread,Time,Action,Pointer,Size,Stream
  //      <thread>,<time>,allocate,<p>,4096,<stream>
  //      <thread>,<time>,free,<p>,4096,<stream>
  // [logging-adaptor end]
  std::string const log = out.str();
  expect(log.rfind("Thread,Time,Action,Pointer,Size,Stream\n", 0) == 0, "logging: header");
  expect(log.find(",allocate,") != std::string::npos && log.find(",free,") != std::string::npos,
         "logging: an allocate and a free line");
}

void logging_sinks(cudaStream_t stream)
{
  std::string const path = (std::filesystem::temp_directory_path() /
                            ("rmm_next_snippet_" + std::to_string(::getpid()) + ".csv"))
                             .string();
  {
    // [logging-sinks]
    // Every line to a file and to std::clog, each written out and flushed as it is logged: a
    // program that crashes leaves its log behind, up to its last call.
    rmm_next::logging_adaptor mr{rmm_next::async_device_resource{},
                                 {rmm_next::log_sink::file(path, /*truncate=*/true), std::clog},
                                 /*auto_flush=*/true};
    void* p = mr.allocate(stream, 4096);  // its line is in the file already
    mr.deallocate(stream, p, 4096);
    // [logging-sinks end]
    std::ifstream in{path};
    std::string header;
    std::string first;
    std::getline(in, header);
    std::getline(in, first);
    expect(header == mr.header(), "logging-sinks: the header is in the file before flush()");
    expect(
      first.find(",allocate,") != std::string::npos && first.find(",4096,") != std::string::npos,
      "logging-sinks: the allocation is in the file before flush()");
  }
  std::filesystem::remove(path);
}

void stack(cudaStream_t stream)
{
  // [stack]
  // What a library allocates: at most 4 GiB, every live block listed, small blocks cached per
  // thread, all from the device's current pool (the one the whole process shares).
  using cached  = rmm_next::thread_cache_adaptor<rmm_next::async_device_resource>;
  using tracked = rmm_next::tracking_adaptor<cached>;
  rmm_next::limiting_adaptor<tracked> mr{tracked{cached{rmm_next::async_device_resource{}}},
                                         std::size_t{4} << 30};

  void* p = mr.allocate(stream, 1000);  // counted as 1024 bytes of the limit
  std::printf("%zu bytes in use, %zu live allocation(s)\n",
              mr.bytes_in_use(),                            // 1024
              mr.upstream_resource().count_outstanding());  // 1
  mr.deallocate(stream, p, 1000);                           // into this thread's cache for `stream`
  // [stack end]
  expect(mr.bytes_in_use() == 0, "stack: nothing in use after the free");
  expect(mr.upstream_resource().count_outstanding() == 0, "stack: nothing outstanding");
}

}  // namespace

int main()
{
  rmm_next_test::require_devices();
  cudaStream_t stream{};
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) { return 1; }
  tracking(stream);
  logging(stream);
  logging_sinks(stream);
  stack(stream);
  (void)cudaStreamSynchronize(stream);
  (void)cudaStreamDestroy(stream);
  if (rmm_next_test::failures() != 0) { return 1; }
  std::printf("snippets: all ran\n");
  return 0;
}
