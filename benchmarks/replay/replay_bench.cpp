/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// Replays an allocation log in the format of RMM's logging_resource_adaptor (see log_parser.hpp)
// on resources chosen by name, as RMM's REPLAY_BENCH does: one thread per logged thread, each
// running its thread's events in log order.
//
//   replay_bench --log=trace.csv [--resource=NAME[,NAME...]] [--order=log|free_after_allocate]
//                [Google Benchmark flags]
//   replay_bench --list-resources
// The log also comes from RMM_NEXT_REPLAY_LOG, the resources from RMM_NEXT_REPLAY_RESOURCE and the
// order from RMM_NEXT_REPLAY_ORDER. Without a log, or without a CUDA device, the program says so
// and exits 0 (skipped). A malformed log is an error (exit 1) naming the line.
//
// Order: `log` (the default, RMM's rule): every event waits until the event before it in the log
// is done, whatever thread ran it, so the replay goes through the same states as the logged
// program and its peak in use is the log's. `free_after_allocate`: a free waits only for its own
// allocation when another thread made it; the threads otherwise run concurrently.
//
// Streams: every logged stream value stands for one stream of the replay: 0 and 0x1 for the legacy
// default stream, 0x2 for the per-thread default stream of the replaying thread, any other value
// for a non-blocking stream created for it. An allocation runs on its logged stream, a free on
// the free's logged stream. "allocate failure" lines and frees of pointers the log never
// allocated are not replayed (counted on stderr); blocks the log never frees are freed after
// the timed replay.
//
// One replay per run (Iterations(1)); --benchmark_repetitions=N for more. Time: the wall time of
// the replay, from the threads' common start to the end of the last thread's events. Each run
// makes its resource afresh (driver pools: the current pool trimmed and its high-water marks
// reset) and destroys it after. Counters of replay/<resource>/<order>/...:
//   peak_in_use_bytes    the largest sum of live block sizes during the replay
//   peak_reserved_bytes  the largest memory the resource held from the system (driver pools:
//                        cudaMemPoolAttrReservedMemHigh; RMM pool and arena: the peak bytes of a
//                        statistics_resource_adaptor between them and cuda_memory_resource)
//   fragmentation        peak_reserved_bytes / peak_in_use_bytes
//   peak_pool_used_bytes driver pools only: UsedMemHigh (bytes handed out, thread caches included)
//   events               events in the log

#include "replay/log_parser.hpp"
#include "replay/replay_resource.hpp"
#include "support/bench_support.hpp"

#include <rmm_next/async_device_resource.hpp>
#include <rmm_next/pool_options.hpp>
#include <rmm_next/segment_cache_adaptor.hpp>
#include <rmm_next/thread_cache_adaptor.hpp>

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace rmm_next_bench::replay {
namespace {

// ---- rmm-next's resources -----------------------------------------------------------------------

/** @brief async_device_resource on the current pool (trimmed, marks reset) or an owned pool. */
class driver_pool_resource : public resource_calls<rmm_next::async_device_resource> {
 public:
  explicit driver_pool_resource(rmm_next::async_device_resource r) : resource_calls{std::move(r)}
  {
    reset_pool(resource().pool_handle());
  }
  memory_peaks peaks() override { return driver_pool_peaks(resource().pool_handle()); }
};

using thread_cache  = rmm_next::thread_cache_adaptor<rmm_next::async_device_resource>;
using segment_cache = rmm_next::segment_cache_adaptor<rmm_next::async_device_resource>;

/** @brief A cache (`Cache`, default options) over a driver pool, measured on that pool. */
template <class Cache>
class cache_resource : public resource_calls<Cache> {
 public:
  explicit cache_resource(rmm_next::async_device_resource upstream)
    : resource_calls<Cache>{Cache{upstream}}
  {
    reset_pool(upstream.pool_handle());
  }
  template <class Options>
  cache_resource(rmm_next::async_device_resource upstream, Options const& options)
    : resource_calls<Cache>{Cache{upstream, options}}
  {
    reset_pool(upstream.pool_handle());
  }
  memory_peaks peaks() override
  {
    return driver_pool_peaks(this->resource().upstream_resource().pool_handle());
  }
};

/** @brief A `Measured` resource over the current pool, or over an owned pool. */
template <class Measured, bool OwnedPool>
std::unique_ptr<replay_resource> make_over_pool()
{
  if constexpr (OwnedPool) {
    return std::make_unique<Measured>(rmm_next::async_device_resource{rmm_next::pool_options{}});
  } else {
    return std::make_unique<Measured>(rmm_next::async_device_resource{});
  }
}

add_resource_kind const current_pool{
  {"async_device_current",
   "rmm_next::async_device_resource on the device's current pool",
   &make_over_pool<driver_pool_resource, false>}};
add_resource_kind const owned_pool{
  {"async_device_owned",
   "rmm_next::async_device_resource on an owned pool (pool_options{})",
   &make_over_pool<driver_pool_resource, true>}};
add_resource_kind const cache_current_pool{
  {"thread_cache_current",
   "rmm_next::thread_cache_adaptor over async_device_current",
   &make_over_pool<cache_resource<thread_cache>, false>}};
add_resource_kind const cache_owned_pool{{"thread_cache_owned",
                                          "rmm_next::thread_cache_adaptor over async_device_owned",
                                          &make_over_pool<cache_resource<thread_cache>, true>}};

/**
 * @brief The thread cache (default options) in front of the segment cache (default options) over
 * a driver pool: blocks of up to the thread cache's largest class are the thread's, larger ones the
 * segment cache's. Measured on that pool.
 */
class stacked_cache_resource
  : public resource_calls<rmm_next::thread_cache_adaptor<segment_cache>> {
 public:
  explicit stacked_cache_resource(rmm_next::async_device_resource upstream)
    : resource_calls{rmm_next::thread_cache_adaptor<segment_cache>{segment_cache{upstream}}}
  {
    reset_pool(upstream.pool_handle());
  }
  memory_peaks peaks() override
  {
    return driver_pool_peaks(resource().upstream_resource().upstream_resource().pool_handle());
  }
};

add_resource_kind const stacked_current_pool{
  {"thread_over_segment_cache",
   "rmm_next::thread_cache_adaptor over rmm_next::segment_cache_adaptor over async_device_current",
   &make_over_pool<stacked_cache_resource, false>}};

/**
 * @brief The segment cache with a chosen idle bound, over the current pool. With
 * RMM_NEXT_REPLAY_IDLE_CSV set, every 16th free appends
 * "frees,idle_bytes,segment_bytes,live_bytes,idle_bound,unproven_bytes" to that file (statistics()
 * takes the cache's lock: a run that samples is not a timing run). Idle segments that no fence
 * proves free yet (`unproven_bytes`) cannot go back, and may keep the idle bytes past the bound
 * until their lane's next fence.
 */
template <std::size_t MaxIdleMiB, unsigned FractionPercent = 25>
class segment_cache_bounded : public cache_resource<segment_cache> {
 public:
  /** @brief MaxIdleMiB that keeps every idle segment: what the bound costs in time. */
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  segment_cache_bounded()
    : cache_resource<segment_cache>{rmm_next::async_device_resource{}, options()}
  {
    if (char const* path = std::getenv("RMM_NEXT_REPLAY_IDLE_CSV"); path != nullptr && *path) {
      samples_ = std::fopen(path, "w");
      if (samples_ != nullptr) {
        std::fputs("frees,idle_bytes,segment_bytes,live_bytes,idle_bound,unproven_bytes\n",
                   samples_);
      }
    }
  }
  segment_cache_bounded(segment_cache_bounded const&)            = delete;
  segment_cache_bounded& operator=(segment_cache_bounded const&) = delete;
  ~segment_cache_bounded() override
  {
    if (samples_ != nullptr) { std::fclose(samples_); }
  }
  void deallocate(cudaStream_t stream, void* ptr, std::size_t bytes) noexcept override
  {
    cache_resource<segment_cache>::deallocate(stream, ptr, bytes);
    if (samples_ != nullptr && ++frees_ % 16 == 0) {
      auto const st = resource().statistics();
      std::fprintf(samples_,
                   "%llu,%llu,%llu,%llu,%llu,%llu\n",
                   static_cast<unsigned long long>(frees_),
                   static_cast<unsigned long long>(st.idle_bytes),
                   static_cast<unsigned long long>(st.segment_bytes),
                   static_cast<unsigned long long>(st.live_bytes),
                   static_cast<unsigned long long>(st.idle_bound),
                   static_cast<unsigned long long>(st.unproven_bytes));
    }
  }

 private:
  static rmm_next::segment_cache_options options()
  {
    rmm_next::segment_cache_options o;
    if constexpr (MaxIdleMiB == unbounded) {
      o.max_idle_bytes    = std::numeric_limits<std::size_t>::max();
      o.max_idle_fraction = 0;
    } else {
      o.max_idle_bytes    = MaxIdleMiB << 20;
      o.max_idle_fraction = FractionPercent / 100.0;
    }
    return o;
  }
  std::FILE* samples_{};
  unsigned long long frees_{};
};

template <class Measured>
std::unique_ptr<replay_resource> make_measured()
{
  return std::make_unique<Measured>();
}

add_resource_kind const segment_idle_64{
  {"segment_cache_idle64",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 64 MiB, max_idle_fraction 0.25, over "
   "async_device_current",
   &make_measured<segment_cache_bounded<64>>}};
add_resource_kind const segment_idle_256{
  {"segment_cache_idle256",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 256 MiB, over async_device_current",
   &make_measured<segment_cache_bounded<256>>}};
add_resource_kind const segment_idle_1024{
  {"segment_cache_idle1024",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 1 GiB, over async_device_current",
   &make_measured<segment_cache_bounded<1024>>}};

add_resource_kind const segment_idle_16{
  {"segment_cache_idle16",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 16 MiB, max_idle_fraction 0.25 (the "
   "default), sampled",
   &make_measured<segment_cache_bounded<16>>}};
add_resource_kind const segment_idle_16_half{
  {"segment_cache_idle16_f50",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 16 MiB, max_idle_fraction 0.5, over "
   "async_device_current",
   &make_measured<segment_cache_bounded<16, 50>>}};
add_resource_kind const segment_idle_32_half{
  {"segment_cache_idle32_f50",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 32 MiB, max_idle_fraction 0.5, over "
   "async_device_current",
   &make_measured<segment_cache_bounded<32, 50>>}};
add_resource_kind const segment_idle_32_whole{
  {"segment_cache_idle32_f100",
   "rmm_next::segment_cache_adaptor, max_idle_bytes 32 MiB, max_idle_fraction 1, over "
   "async_device_current",
   &make_measured<segment_cache_bounded<32, 100>>}};

add_resource_kind const segment_unbounded{
  {"segment_cache_unbounded",
   "rmm_next::segment_cache_adaptor that never gives an idle segment back, over "
   "async_device_current",
   &make_measured<segment_cache_bounded<segment_cache_bounded<0>::unbounded>>}};

/** @brief The segment cache, default bounds, fencing every free (`fence_interval` 1). */
rmm_next::segment_cache_options fencing_every_free()
{
  rmm_next::segment_cache_options o;
  o.fence_interval = 1;
  return o;
}

add_resource_kind const segment_fence_every_free{
  {"segment_cache_fence1",
   "rmm_next::segment_cache_adaptor with fence_interval 1 (every free fenced), over "
   "async_device_current",
   [] {
     return std::unique_ptr<replay_resource>{std::make_unique<cache_resource<segment_cache>>(
       rmm_next::async_device_resource{}, fencing_every_free())};
   }}};

add_resource_kind const segment_current_pool{
  {"segment_cache_current",
   "rmm_next::segment_cache_adaptor over async_device_current",
   &make_over_pool<cache_resource<segment_cache>, false>}};
add_resource_kind const segment_owned_pool{
  {"segment_cache_owned",
   "rmm_next::segment_cache_adaptor over async_device_owned",
   &make_over_pool<cache_resource<segment_cache>, true>}};

// ---- The replay ---------------------------------------------------------------------------------

/** @brief The stream standing for logged stream value `logged`. */
class stream_map {
 public:
  explicit stream_map(std::vector<std::uintptr_t> const& logged)
  {
    for (std::uintptr_t const value : logged) {
      if (value == 0 || value == 1) {
        handles_.push_back(cudaStreamLegacy);
      } else if (value == 2) {
        handles_.push_back(cudaStreamPerThread);
      } else {
        owned_.push_back(std::make_unique<stream>());
        handles_.push_back(owned_.back()->get());
      }
    }
  }
  [[nodiscard]] cudaStream_t at(std::size_t index) const { return handles_.at(index); }
  [[nodiscard]] std::size_t created() const noexcept { return owned_.size(); }

 private:
  std::vector<std::unique_ptr<stream>> owned_;
  std::vector<cudaStream_t> handles_;
};

/** @brief What one run shares between its threads. */
struct run_state {
  std::unique_ptr<replay_resource> resource;
  std::vector<void*> blocks;       // per block: the replay's pointer while live
  std::optional<event_gate> gate;  // the cross-thread order
  std::atomic<bool> aborted{false};
  std::mutex error_mutex;
  std::string error;
  std::atomic<std::int64_t> in_use{0};
  std::atomic<std::int64_t> peak{0};

  void fail(std::string message)
  {
    {
      std::scoped_lock lock{error_mutex};
      if (error.empty()) { error = std::move(message); }
    }
    aborted.store(true);
    gate->release_all();  // every waiter goes on, doing nothing more
  }
};

/** @brief One registered benchmark: a resource kind replaying the plan. */
struct replay_benchmark {
  plan const* log_plan;
  stream_map const* streams;
  resource_kind kind;
  int device;
  std::barrier<> barrier;
  std::unique_ptr<run_state> state;

  replay_benchmark(plan const* p, stream_map const* s, resource_kind k, int d)
    : log_plan{p},
      streams{s},
      kind{k},
      device{d},
      barrier{static_cast<std::ptrdiff_t>(p->threads.size())}
  {
  }

  /** @brief Thread 0, before the timed loop: a fresh resource and fresh flags. */
  void begin_run()
  {
    state         = std::make_unique<run_state>();
    state->blocks = std::vector<void*>(log_plan->block_size.size(), nullptr);
    state->gate.emplace(log_plan->event_count);
    try {
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      state->resource = kind.make();
    } catch (std::exception const& e) {
      state->error = std::string{kind.name} + ": " + e.what();
      state->aborted.store(true);
    }
  }

  void add_in_use(std::int64_t bytes)
  {
    std::int64_t const now = state->in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t peak      = state->peak.load(std::memory_order_relaxed);
    while (now > peak && !state->peak.compare_exchange_weak(peak, now)) {}
  }

  /** @brief The events of logged thread `thread`, in order. */
  void replay_thread(std::size_t thread)
  {
    run_state& s = *state;
    for (step const& st : log_plan->per_thread[thread]) {
      s.gate->wait_for(st);
      if (!s.aborted.load(std::memory_order_relaxed)) {
        cudaStream_t const stream = streams->at(st.stream);
        if (st.op == operation::allocate) {
          try {
            s.blocks[st.block] = s.resource->allocate(stream, st.size);
          } catch (std::exception const& e) {
            s.fail(std::string{kind.name} + ": allocation of " + std::to_string(st.size) +
                   " bytes (log line " + std::to_string(st.line) + ") failed: " + e.what());
            return;
          }
          add_in_use(static_cast<std::int64_t>(st.size));
        } else if (st.op == operation::free) {
          s.resource->deallocate(stream, s.blocks[st.block], st.size);
          s.blocks[st.block] = nullptr;
          add_in_use(-static_cast<std::int64_t>(st.size));
        }
      }
      s.gate->done(st);
    }
  }

  /** @brief Thread 0, after every thread's loop: counters, leaked blocks freed, resource gone. */
  void end_run(benchmark::State& bench_state)
  {
    run_state& s = *state;
    try {
      if (s.resource) {
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        memory_peaks const peaks                    = s.resource->peaks();
        auto const in_use                           = static_cast<double>(s.peak.load());
        auto const reserved                         = static_cast<double>(peaks.reserved);
        bench_state.counters["peak_in_use_bytes"]   = in_use;
        bench_state.counters["peak_reserved_bytes"] = reserved;
        bench_state.counters["fragmentation"]       = in_use > 0 ? reserved / in_use : 0.0;
        if (peaks.pool_used) {
          bench_state.counters["peak_pool_used_bytes"] = static_cast<double>(*peaks.pool_used);
        }
        bench_state.counters["events"] = static_cast<double>(log_plan->event_count);
        for (std::size_t b = 0; b < s.blocks.size(); ++b) {
          if (s.blocks[b] != nullptr) {
            s.resource->deallocate(
              streams->at(log_plan->block_stream[b]), s.blocks[b], log_plan->block_size[b]);
          }
        }
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        s.resource.reset();
      }
    } catch (std::exception const& e) {
      if (s.error.empty()) { s.error = std::string{kind.name} + ": " + e.what(); }
    }
  }
};

void run(benchmark::State& bench_state, replay_benchmark* b)
{
  auto const thread = static_cast<std::size_t>(bench_state.thread_index());
  (void)cudaSetDevice(b->device);
  if (thread == 0) { b->begin_run(); }
  b->barrier.arrive_and_wait();
  if (!b->state->resource) {  // set before the barrier: every thread takes the same path
    bench_state.SkipWithError(b->state->error.c_str());
    b->barrier.arrive_and_wait();  // nobody reads the state after this
    return;
  }
  for (auto _ : bench_state) {
    b->replay_thread(thread);
    // Inside the timed loop: every thread's time is the whole replay's (Google Benchmark reports
    // the mean of the threads' real times), not the time until its own last event.
    b->barrier.arrive_and_wait();
  }
  if (thread == 0) { b->end_run(bench_state); }  // every thread's replay is over
  b->barrier.arrive_and_wait();
  if (!b->state->error.empty()) { bench_state.SkipWithError(b->state->error.c_str()); }
  b->barrier.arrive_and_wait();  // the error is read by all before the next run replaces it
}

// ---- Options ------------------------------------------------------------------------------------

struct options {
  std::string log;
  std::vector<std::string> resources;
  order ordering{order::log};
  bool list{false};
};

void split_names(std::string_view text, std::vector<std::string>& out)
{
  while (!text.empty()) {
    auto const comma = text.find(',');
    if (comma != 0) { out.emplace_back(text.substr(0, comma)); }
    if (comma == std::string_view::npos) { break; }
    text.remove_prefix(comma + 1);
  }
}

order parse_order(std::string_view text)
{
  if (text == "log") { return order::log; }
  if (text == "free_after_allocate") { return order::free_after_allocate; }
  throw std::invalid_argument{"unknown order \"" + std::string{text} +
                              "\" (expected log or free_after_allocate)"};
}

/** @brief The value of `--name=value` or `--name value` at argv[i], or nullptr. */
char const* option_value(std::string_view name, int argc, char** argv, int& i)
{
  std::string_view const arg{argv[i]};
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
    return argv[i] + name.size() + 1;
  }
  if (arg == name && i + 1 < argc) { return argv[++i]; }
  return nullptr;
}

options parse_options(int argc, char** argv)
{
  options o;
  auto env = [](char const* name) -> std::string_view {  // unset and empty alike
    char const* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  o.log = env("RMM_NEXT_REPLAY_LOG");
  split_names(env("RMM_NEXT_REPLAY_RESOURCE"), o.resources);
  if (!env("RMM_NEXT_REPLAY_ORDER").empty()) {
    o.ordering = parse_order(env("RMM_NEXT_REPLAY_ORDER"));
  }
  std::vector<std::string> from_args;
  for (int i = 1; i < argc; ++i) {
    if (char const* v = option_value("--log", argc, argv, i)) {
      o.log = v;
    } else if (char const* r = option_value("--resource", argc, argv, i)) {
      split_names(r, from_args);
    } else if (char const* ord = option_value("--order", argc, argv, i)) {
      o.ordering = parse_order(ord);
    } else if (std::string_view{argv[i]} == "--list-resources") {
      o.list = true;
    } else {
      throw std::invalid_argument{std::string{"unknown argument \""} + argv[i] +
                                  "\" (replay_bench --log=FILE [--resource=NAME,...] "
                                  "[--order=log|free_after_allocate] [--list-resources])"};
    }
  }
  if (!from_args.empty()) { o.resources = std::move(from_args); }
  return o;
}

/** @brief The kinds named in `names` (all when empty); throws naming an unknown one. */
std::vector<resource_kind> chosen_kinds(std::vector<std::string> const& names)
{
  auto const& all = resource_kinds();
  if (names.empty()) { return all; }
  std::vector<resource_kind> chosen;
  for (auto const& name : names) {
    auto const it =
      std::find_if(all.begin(), all.end(), [&](resource_kind const& k) { return name == k.name; });
    if (it == all.end()) {
      std::string known;
      for (auto const& k : all) {
        known += std::string{known.empty() ? "" : ", "} + k.name;
      }
      throw std::invalid_argument{"unknown resource \"" + name + "\" in this program (it has " +
                                  known +
                                  "; RMM's rmm_pool, rmm_arena and rmm_cuda_async are in "
                                  "replay_rmm_bench, built with -DRMM_NEXT_RMM_ROOT)"};
    }
    chosen.push_back(*it);
  }
  return chosen;
}

void print_summary(plan const& p, std::string const& log)
{
  std::fprintf(stderr,
               "replay: %s: %zu events, %zu threads, %zu streams, %zu allocations; peak in use "
               "(log order) %zu bytes\n",
               log.c_str(),
               p.event_count,
               p.threads.size(),
               p.streams.size(),
               p.block_size.size(),
               p.peak_bytes_in_use);
  if (p.failures > 0) {
    std::fprintf(stderr, "replay: %zu allocate failure lines, not replayed\n", p.failures);
  }
  if (!p.unknown_frees.empty()) {
    std::fprintf(stderr,
                 "replay: %zu frees of pointers the log never allocated, not replayed (first at "
                 "line %zu)\n",
                 p.unknown_frees.size(),
                 p.unknown_frees.front().line);
  }
  if (!p.reallocated_lines.empty()) {
    std::fprintf(stderr,
                 "replay: %zu allocations return a pointer still live in the log (first at line "
                 "%zu): the older block's free is missing\n",
                 p.reallocated_lines.size(),
                 p.reallocated_lines.front());
  }
  if (!p.leaked_blocks.empty()) {
    std::fprintf(stderr,
                 "replay: %zu blocks are never freed in the log; they are freed after each "
                 "timed replay\n",
                 p.leaked_blocks.size());
  }
  if (p.size_mismatches > 0) {
    std::fprintf(stderr,
                 "replay: %zu frees give a size other than their allocation's (the allocation's "
                 "is used)\n",
                 p.size_mismatches);
  }
}

int replay_main(int argc, char** argv)
{
  benchmark::Initialize(&argc, argv);
  options const opts = parse_options(argc, argv);
  if (opts.list) {
    for (auto const& k : resource_kinds()) {
      std::printf("%-22s %s\n", k.name, k.description);
    }
    return 0;
  }
  auto const kinds = chosen_kinds(opts.resources);
  if (opts.log.empty()) {
    std::fprintf(stderr,
                 "replay: no log given (set RMM_NEXT_REPLAY_LOG or pass --log=FILE): skipped\n");
    return 0;
  }
  plan const log_plan = make_plan(parse_log_file(opts.log), opts.ordering);
  print_summary(log_plan, opts.log);
  if (log_plan.threads.empty()) {
    std::fprintf(stderr, "replay: the log has no events: skipped\n");
    return 0;
  }

  int device_count{};
  cudaError_t const status = cudaGetDeviceCount(&device_count);
  if (status != cudaSuccess || device_count == 0) {
    (void)cudaGetLastError();
    std::fprintf(stderr,
                 "replay: needs a CUDA device (%s): skipped\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device is visible");
    return 0;
  }
  int device{};
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  benchmark::AddCustomContext("gpu_name", prop.name);
  benchmark::AddCustomContext("replay_log", opts.log);
  benchmark::AddCustomContext("replay_order", name_of(opts.ordering));

  stream_map const streams{log_plan.streams};
  std::fprintf(stderr,
               "replay: %zu logged streams replayed on %zu streams created for the replay and "
               "the default streams\n",
               log_plan.streams.size(),
               streams.created());
  std::vector<std::unique_ptr<replay_benchmark>> benchmarks;
  for (auto const& kind : kinds) {
    benchmarks.push_back(std::make_unique<replay_benchmark>(&log_plan, &streams, kind, device));
    std::string const name = std::string{"replay/"} + kind.name + "/" + name_of(opts.ordering);
    benchmark::RegisterBenchmark(name.c_str(), &run, benchmarks.back().get())
      ->Threads(static_cast<int>(log_plan.threads.size()))
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace
}  // namespace rmm_next_bench::replay

int main(int argc, char** argv)
{
  try {
    return rmm_next_bench::replay::replay_main(argc, argv);
  } catch (rmm_next_bench::replay::parse_error const& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  } catch (std::invalid_argument const& e) {
    std::fprintf(stderr, "replay: %s\n", e.what());
    return 64;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "replay: %s\n", e.what());
    return 1;
  }
}
