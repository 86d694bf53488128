/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// NCCL all-reduce (float sum, out of place) bus bandwidth over three kinds of buffers, in one run:
//   cudaMalloc    plain device memory, not registered
//   ncclMemAlloc  NCCL's own allocation, registered with ncclCommRegister
//   vmm_resource  blocks of rmm_next::vmm_resource, whose segments nccl_registered() registers
// for sizes doubling from --min-bytes (1M) to --max-bytes (1G), one process per GPU.
//
//   nccl_allreduce_bench [--out DIR] [--gpus N] [--min-bytes 1M] [--max-bytes 1G]
//                        [--iterations N] [--warmup N] [--kinds
//                        cudaMalloc,ncclMemAlloc,vmm_resource]
//
// Started without --rank it is the launcher: it starts itself once per GPU (N: --gpus, else every
// visible GPU; 1 works), with --rank, --ranks and --id-file, where rank 0 writes the ncclUniqueId
// the others read. Rank 0 writes DIR/nccl_allreduce.csv and DIR/nccl_allreduce.json: per kind and
// size the slowest rank's average time, algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (0 on
// one rank) and the number of wrong elements (every rank adds rank + 1: each element must be
// n (n + 1) / 2). The exit status is nonzero when a rank failed or an element was wrong.

#include "support/nccl_bench_plan.hpp"

#include <rmm_next/nccl.hpp>
#include <rmm_next/vmm_resource.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace rmm_next_bench;

void check(cudaError_t status, char const* call)
{
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string{"nccl_allreduce_bench: "} + call +
                             " failed: " + cudaGetErrorString(status));
  }
}

void check(ncclResult_t status, char const* call)
{
  if (status != ncclSuccess) {
    throw std::runtime_error(std::string{"nccl_allreduce_bench: "} + call +
                             " failed: " + ncclGetErrorString(status));
  }
}

__global__ void fill_kernel(float* out, std::size_t n, float value)
{
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

__global__ void count_wrong_kernel(float const* in,
                                   std::size_t n,
                                   float expected,
                                   unsigned long long* wrong)
{
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    mine += in[i] == expected ? 0 : 1;
  }
  if (mine != 0) { atomicAdd(wrong, mine); }
}

/** @brief The exit status of a rank that ran to the end but found wrong sums. */
constexpr int wrong_sums = 2;

constexpr int grid  = 1024;
constexpr int block = 256;

/** @brief The send and receive buffers of one kind, and what frees them. */
struct buffers {
  float* send{};
  float* recv{};
  bool registered{};
  std::vector<void*> handles;  // ncclCommRegister's, for ncclMemAlloc
  std::optional<rmm_next::vmm_resource> vmm;
};

buffers make_buffers(std::string const& kind, std::size_t bytes, ncclComm_t comm)
{
  buffers b;
  void* send{};
  void* recv{};
  if (kind == "cudaMalloc") {
    check(cudaMalloc(&send, bytes), "cudaMalloc");
    check(cudaMalloc(&recv, bytes), "cudaMalloc");
  } else if (kind == "ncclMemAlloc") {
    check(ncclMemAlloc(&send, bytes), "ncclMemAlloc");
    check(ncclMemAlloc(&recv, bytes), "ncclMemAlloc");
    for (void* p : {send, recv}) {
      void* handle{};
      check(ncclCommRegister(comm, p, bytes, &handle), "ncclCommRegister");
      b.handles.push_back(handle);
    }
    b.registered = true;
  } else {
    // Each buffer is larger than a segment at the largest sizes: one segment (one registration)
    // of its own; smaller runs share 64 MiB segments, registered once each.
    b.vmm.emplace(rmm_next::nccl_registered(comm, rmm_next::vmm_options{}));
    send         = b.vmm->allocate_sync(bytes);
    recv         = b.vmm->allocate_sync(bytes);
    b.registered = true;
  }
  b.send = static_cast<float*>(send);
  b.recv = static_cast<float*>(recv);
  return b;
}

void free_buffers(std::string const& kind, buffers& b, std::size_t bytes, ncclComm_t comm)
{
  if (kind == "cudaMalloc") {
    check(cudaFree(b.send), "cudaFree");
    check(cudaFree(b.recv), "cudaFree");
  } else if (kind == "ncclMemAlloc") {
    for (void* h : b.handles) {
      check(ncclCommDeregister(comm, h), "ncclCommDeregister");
    }
    check(ncclMemFree(b.send), "ncclMemFree");
    check(ncclMemFree(b.recv), "ncclMemFree");
  } else {
    b.vmm->deallocate_sync(b.send, bytes);
    b.vmm->deallocate_sync(b.recv, bytes);
    b.vmm.reset();  // deregisters and unmaps its segments, before the communicator goes
  }
}

/** @brief The unique id rank 0 wrote to `path` (written first to path.tmp, then renamed). */
ncclUniqueId share_id(int rank, std::string const& path)
{
  ncclUniqueId id{};
  if (rank == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    std::string const tmp = path + ".tmp";
    {
      std::ofstream out{tmp, std::ios::binary};
      out.write(id.internal, sizeof id.internal);
      if (!out) { throw std::runtime_error("nccl_allreduce_bench: cannot write " + tmp); }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw std::runtime_error("nccl_allreduce_bench: cannot rename " + tmp + " to " + path);
    }
    return id;
  }
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds{120};
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in{path, std::ios::binary};
    if (in.read(id.internal, sizeof id.internal)) { return id; }
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  throw std::runtime_error("nccl_allreduce_bench: rank " + std::to_string(rank) +
                           " found no unique id in " + path + " within 120 s");
}

std::vector<nccl_bench_row> run_rank(nccl_bench_options const& o)
{
  int devices{};
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  check(cudaSetDevice(o.rank % devices), "cudaSetDevice");
  ncclUniqueId const id = share_id(o.rank, o.id_file);
  ncclComm_t comm{};
  check(ncclCommInitRank(&comm, o.ranks, id, o.rank), "ncclCommInitRank");
  cudaStream_t stream{};
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start{};
  cudaEvent_t stop{};
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  double* slowest{};  // the ranks' times, reduced to the largest
  unsigned long long* wrong{};
  check(cudaMalloc(&slowest, sizeof(double)), "cudaMalloc");
  check(cudaMalloc(&wrong, sizeof(unsigned long long)), "cudaMalloc");

  std::vector<nccl_bench_row> rows;
  float const expected = static_cast<float>(o.ranks) * static_cast<float>(o.ranks + 1) / 2.0F;
  for (std::string const& kind : o.kinds) {
    buffers b = make_buffers(kind, o.max_bytes, comm);
    fill_kernel<<<grid, block, 0, stream>>>(
      b.send, o.max_bytes / sizeof(float), static_cast<float>(o.rank + 1));
    check(cudaGetLastError(), "fill_kernel");
    for (std::size_t bytes : nccl_bench_sizes(o.min_bytes, o.max_bytes)) {
      std::size_t const count = bytes / sizeof(float);
      int const iterations    = iterations_for(bytes, o.iterations);
      for (int i = 0; i < o.warmup; ++i) {
        check(ncclAllReduce(b.send, b.recv, count, ncclFloat, ncclSum, comm, stream),
              "ncclAllReduce");
      }
      check(cudaEventRecord(start, stream), "cudaEventRecord");
      for (int i = 0; i < iterations; ++i) {
        check(ncclAllReduce(b.send, b.recv, count, ncclFloat, ncclSum, comm, stream),
              "ncclAllReduce");
      }
      check(cudaEventRecord(stop, stream), "cudaEventRecord");
      check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms{};
      check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      double const mine = static_cast<double>(ms) / 1e3 / iterations;
      check(cudaMemcpyAsync(slowest, &mine, sizeof mine, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync");
      check(ncclAllReduce(slowest, slowest, 1, ncclFloat64, ncclMax, comm, stream),
            "ncclAllReduce");
      check(cudaMemsetAsync(wrong, 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
      count_wrong_kernel<<<grid, block, 0, stream>>>(b.recv, count, expected, wrong);
      check(cudaGetLastError(), "count_wrong_kernel");
      nccl_bench_row row;
      row.kind       = kind;
      row.bytes      = bytes;
      row.ranks      = o.ranks;
      row.iterations = iterations;
      row.registered = b.registered;
      unsigned long long bad{};
      check(cudaMemcpyAsync(&row.seconds, slowest, sizeof(double), cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
      check(cudaMemcpyAsync(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      row.wrong = bad;
      if (o.rank == 0) { std::fputs(csv_line(row).c_str(), stdout); }
      rows.push_back(row);
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    free_buffers(kind, b, o.max_bytes, comm);
  }
  check(cudaFree(slowest), "cudaFree");
  check(cudaFree(wrong), "cudaFree");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  check(ncclCommDestroy(comm), "ncclCommDestroy");
  return rows;
}

void write_results(nccl_bench_options const& o, std::vector<nccl_bench_row> const& rows)
{
  int version{};
  (void)ncclGetVersion(&version);
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, o.rank);
  std::ofstream csv{o.out_dir + "/nccl_allreduce.csv"};
  csv << csv_header();
  std::ofstream json{o.out_dir + "/nccl_allreduce.json"};
  json << "{\"benchmark\": \"nccl_allreduce\", \"nccl_version\": " << version << ", \"device\": \""
       << prop.name << "\", \"ranks\": " << o.ranks << ", \"warmup\": " << o.warmup
       << ", \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    csv << csv_line(rows[i]);
    json << "  " << json_object(rows[i]) << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json << "]}\n";
  if (!csv || !json) {
    throw std::runtime_error("nccl_allreduce_bench: cannot write the results into " + o.out_dir);
  }
}

/** @brief Starts this program once per rank and waits for all; the exit status of the run. */
int launch(nccl_bench_options const& o, std::vector<std::string> const& args)
{
  int ranks = o.gpus;
  if (ranks == 0) {
    int devices{};
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "benchmark needs a CUDA device: no usable CUDA device\n");
      return 1;
    }
    ranks = devices;
  }
  std::error_code made;
  std::filesystem::create_directories(o.out_dir, made);  // the results folder, as --out names it
  if (made) {
    std::fprintf(stderr,
                 "nccl_allreduce_bench: cannot make %s: %s\n",
                 o.out_dir.c_str(),
                 made.message().c_str());
    return 1;
  }
  std::string const id_file =
    o.out_dir + "/.nccl_unique_id." + std::to_string(static_cast<long>(::getpid()));
  std::vector<pid_t> children;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> child_args{"nccl_allreduce_bench"};
    child_args.insert(child_args.end(), args.begin(), args.end());
    for (std::string const& extra : {std::string{"--rank"},
                                     std::to_string(rank),
                                     std::string{"--ranks"},
                                     std::to_string(ranks),
                                     std::string{"--id-file"},
                                     id_file}) {
      child_args.push_back(extra);
    }
    std::vector<char*> argv;
    for (auto& a : child_args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    pid_t const pid = ::fork();
    if (pid == 0) {
      ::execv("/proc/self/exe", argv.data());
      std::perror("nccl_allreduce_bench: execv");
      ::_exit(127);
    }
    if (pid < 0) {
      std::perror("nccl_allreduce_bench: fork");
      break;
    }
    children.push_back(pid);
  }
  // A rank that fails leaves the others waiting in a collective: stop them too (not for a rank
  // that finished with wrong sums, exit status wrong_sums: the others finish and report).
  int failed              = 0;
  auto const stop_all_but = [&](pid_t spared) {
    for (pid_t const child : children) {
      if (child != spared) { (void)::kill(child, SIGTERM); }
    }
  };
  if (children.size() != static_cast<std::size_t>(ranks)) {
    failed = 1;
    stop_all_but(-1);
  }
  std::size_t running = children.size();
  while (running > 0) {
    int status{};
    pid_t const done = ::waitpid(-1, &status, 0);
    if (done < 0) { break; }
    if (std::find(children.begin(), children.end(), done) == children.end()) { continue; }
    --running;
    if (WIFEXITED(status) && WEXITSTATUS(status) == wrong_sums) {
      failed = 1;
    } else if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && failed == 0) {
      failed = 1;
      stop_all_but(done);
    }
  }
  std::remove(id_file.c_str());
  return failed;
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<std::string> const args(argv + 1, argv + argc);
  try {
    nccl_bench_options const o = parse_nccl_bench_options(args);
    if (o.rank < 0) { return launch(o, args); }
    std::vector<nccl_bench_row> const rows = run_rank(o);
    if (o.rank == 0) { write_results(o, rows); }
    for (auto const& r : rows) {
      if (r.wrong != 0) {
        std::fprintf(stderr,
                     "nccl_allreduce_bench: rank %d: %llu wrong elements (%s, %zu bytes)\n",
                     o.rank,
                     static_cast<unsigned long long>(r.wrong),
                     r.kind.c_str(),
                     r.bytes);
        return wrong_sums;
      }
    }
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
