/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// A model of the CUDA driver for model-based randomized tests on the CPU (driver_model.cpp). The
// program that links it gets the driver entry points the library looks up
// (cudaGetDriverEntryPointByVersion) and the runtime calls it makes, answered from a model of
// contexts, streams, events, captures, graphs, user objects and virtual memory in which every
// stream carries a vector clock: what its work is ordered after. Calls the driver would refuse, or
// that would invalidate a capture, are recorded as violations. A test drives worker threads one
// operation at a time (`worker`) and checks what the library hands out against the clocks.

#include <cuda.h>  // types only
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace model {

/** @brief What a stream's work is ordered after: for each stream uid, a position on it. */
using vclock = std::map<std::uint64_t, std::uint64_t>;

void merge(vclock& into, vclock const& from);
bool covers(vclock const& have, vclock const& need);

struct context {
  int device;
  bool alive{true};
};

struct graph;

struct stream {
  std::uint64_t uid{};  // the stream's id (cuStreamGetId), never reused
  int ctx{};
  bool alive{true};
  bool blocking{false};
  bool library{false};  // made through cuStreamCreate or cudaStreamCreateWithFlags
  std::uint64_t pos{0};
  vclock clock;
  // The capture, while `capturing`: its mode, thread, id and graph; `invalidated` once it failed.
  bool capturing{false};
  bool invalidated{false};
  cudaStreamCaptureMode mode{};
  std::thread::id capture_thread;
  std::uint64_t capture_id{};
  graph* into{};
};

struct event {
  int ctx{};
  vclock clock;
  bool captured{false};
  std::uint64_t capture_id{};
  bool alive{true};
  bool library{false};  // made by the library, not by the test (`as_user`)
};

/** @brief A node of a captured graph: work (no `fn`) or a host function. */
struct graph_node {
  CUhostFn fn{};
  void* data{};
};

/** @brief A user object (cuUserObjectCreate): `destroy(data)` runs when `refs` reaches 0. */
struct user_object {
  void* data{};
  CUhostFn destroy{};
  unsigned refs{};
};

/** @brief What a capture recorded: its nodes in order (one stream: a chain), held objects. */
struct graph {
  int ctx{};
  bool alive{true};
  vclock before;  // the captured stream's clock when the capture began
  std::vector<graph_node> nodes;
  std::map<user_object*, unsigned> held;
  std::size_t launches{0};
};

/** @brief The virtual memory of the model: physical allocations, reservations and mappings. */
struct vmm_model {
  struct allocation {
    std::size_t bytes{};
    int device{};
    bool released{false};
    int maps{0};
  };
  struct mapping {
    std::size_t bytes{};
    CUmemGenericAllocationHandle handle{};
    std::vector<int> access;  // devices granted read-write access
  };
  std::size_t minimum_granularity{std::size_t{64} << 10};
  std::size_t recommended_granularity{std::size_t{128} << 10};
  std::size_t capacity{std::size_t{16} << 20};  // per device
  bool fabric_supported{false};
  bool refuse_fabric{false};  // cuMemCreate answers NOT_PERMITTED for FABRIC (no IMEX channel)
  std::map<CUmemGenericAllocationHandle, allocation> allocations;
  std::map<CUdeviceptr, std::size_t> reserved;
  std::map<CUdeviceptr, mapping> mapped;
  std::size_t in_use[2]{};
  CUdeviceptr next_address{CUdeviceptr{1} << 40};
  long refusals{0};  // cuMemCreate calls answered CUDA_ERROR_OUT_OF_MEMORY

  /** @brief True when [p, p + bytes) lies in one mapping that `device` may read and write. */
  bool accessible(CUdeviceptr p, std::size_t bytes, int device) const;
};

/** @brief The whole model; every entry point locks `mutex`. */
struct world {
  std::recursive_mutex mutex;
  std::vector<context> contexts{{0}, {0}, {1}};  // 0: primary of device 0, 1: a second context
                                                 // of device 0, 2: primary of device 1
  std::vector<std::unique_ptr<stream>> streams;  // handles are addresses of these records
  std::map<int, stream*> legacy;                 // per context
  std::map<std::pair<std::thread::id, int>, stream*> per_thread;
  std::vector<std::unique_ptr<event>> events;
  std::vector<std::unique_ptr<graph>> graphs;
  std::vector<std::unique_ptr<user_object>> user_objects;
  std::vector<int> created_in;      // the context of every stream made through cuStreamCreate
  vclock completed;                 // what the host has seen finish
  std::map<int, vclock> graveyard;  // per context: the work of its destroyed streams
  vmm_model vmm;
  std::uint64_t next_uid{1};
  std::uint64_t next_capture_id{1};
  std::vector<std::string> violations;
  int invalidated_captures{0};
  // The primary contexts (0 and 2): retains through cuDevicePrimaryCtxRetain, per device, and
  // whether the runtime holds one (as it does after its first call on the device). A primary
  // context nobody holds is destroyed at its last release, and made again at the next retain.
  int primary_retains[2]{0, 0};
  bool runtime_holds_primary[2]{true, true};
  // cuDeviceGet calls refused for an ordinal the driver does not know: an error the driver
  // reports, which tools that watch its errors (compute-sanitizer) count against the program.
  int refused_device_gets{0};

  void violation(std::string what);
  bool any_capture() const;
  /** Invalidates the capture of `s` (once), a violation naming `why`. */
  void invalidate(stream& s, std::string const& why);
  void invalidate_captures(char const* why);
  /**
   * True when the calling thread may not make `call`, a potentially unsafe call (a host wait),
   * in its capture interaction mode: the captures that refuse it are invalidated.
   */
  bool refuses(char const* call);
  stream* make_stream(int ctx, bool blocking);
  /** A new regular stream, taking a destroyed stream's handle when `reuse` finds one. */
  stream* create_stream(int ctx, bool blocking, bool reuse);
  /** A new regular stream of `ctx` at the handle of `dead`, a destroyed stream: a new uid. */
  stream* remake_stream(stream& dead, int ctx, bool blocking);
  /** A new context of `device` (as cuCtxCreate), never at a destroyed one's index. */
  int create_context(int device);
  /**
   * Destroys context `ctx` as its owner does after synchronizing its streams: they, its events
   * and its graphs go; work of the context is complete.
   */
  void destroy_context(int ctx);

  // ---- Captures and graphs ---------------------------------------------------------------------
  /** `s` begins a capture in `mode` on thread `by`. */
  void begin_capture(stream& s, cudaStreamCaptureMode mode, std::thread::id by);
  /** Ends the capture of `s`: its graph, or null for an invalidated capture (its graph gone). */
  graph* end_capture(stream& s);
  /** Appends a work node to the graph `s` is captured into. */
  void enqueue_captured(stream& s);
  /**
   * Launches `g` on eager stream `on`: its work joins `on`'s clock in order, and each host node
   * runs once the work before it is done (`completed` gains it). `visit(i)` is called before node
   * i runs and `visit(nodes.size())` after the last.
   */
  void launch_graph(graph& g, stream& on, std::function<void(std::size_t)> const& visit);
  /** Destroys `g`, releasing the user objects it holds. */
  void destroy_graph(graph& g);
  void release_user_object(user_object& o, unsigned count);
};

world& the();

/** The calling thread's stack of current contexts (index into `world::contexts`). */
extern thread_local std::vector<int> ctx_stack;

/** In `ctx_stack`: the thread has no current context (`cuCtxSetCurrent(nullptr)`). */
inline constexpr int no_context = -1;

int current_ctx();
CUcontext ctx_handle(int c);
int ctx_of(CUcontext h);

/** The calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode). */
cudaStreamCaptureMode& thread_capture_mode();

/**
 * While one lives, the calling thread's calls into the model are the test's own (a user's
 * cudaEventRecord, ...), not the library's: errors they meet are the test's to avoid.
 */
class as_user {
 public:
  as_user();
  as_user(as_user const&)            = delete;
  as_user& operator=(as_user const&) = delete;
  ~as_user();

 private:
  bool saved_;
};
bool by_user();

/** The stream `h` names for the calling thread, or null (a destroyed handle: a violation). */
stream* resolve(CUstream h, char const* call);
bool is_legacy(CUstream h);
/** True when a blocking stream of `ctx` is being captured: the legacy stream of `ctx` is off. */
bool blocking_capture_in(int ctx);
/** What work newly queued on `s` is ordered after. */
vclock done_before(stream const& s);
void enqueue(stream& s);

/**
 * What a user's cudaEventRecord on `from` (a handle as the calling thread names it, of context
 * `from_ctx`) and cudaStreamWaitEvent of `to` do: `to`'s later work is ordered after `from`'s.
 */
void user_order(CUstream from, int from_ctx, stream& to);

// ---- Driver entry points the tests call themselves -------------------------------------------

CUresult ctx_push_current(CUcontext c);
CUresult ctx_pop_current(CUcontext* c);
CUresult event_create(CUevent* e, unsigned int flags);
CUresult event_record(CUevent e, CUstream h);
CUresult event_destroy(CUevent e);
CUresult stream_wait_event(CUstream h, CUevent e, unsigned int flags);
CUresult stream_destroy(CUstream h);

// ---- Worker threads, driven one step at a time -----------------------------------------------

class worker {
 public:
  explicit worker(int ctx);
  worker(worker const&)            = delete;
  worker& operator=(worker const&) = delete;
  /** Joins the thread; its per-thread default streams end with it. */
  ~worker();

  /** @brief Runs `job` on the worker's thread and waits for it. */
  void call(std::function<void()> job);

  int ctx_;
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_{false};
  std::thread thread_;
};

/** @brief The seed and length of a randomized run. */
struct run_settings {
  std::uint64_t seed;
  double seconds;
};
/**
 * RMM_NEXT_MODEL_SEED (a random seed when unset) and RMM_NEXT_MODEL_SECONDS (`fallback_seconds`
 * when unset), printed after `what`.
 */
run_settings settings_from_environment(char const* what, double fallback_seconds);
/** Calls `step` until `seconds` have passed or a violation was found; returns the steps made. */
long run_steps(double seconds, std::function<void()> const& step);
/** Reports every violation, and every invalidated capture, as a failure of the test naming `seed`.
 */
void report_violations(std::uint64_t seed);

/** @brief Whether the primary context of `device` (0 or 1) is active, as cuDevicePrimaryCtxGetState
 * answers. */
bool primary_active(int device);
/**
 * @brief From now on, as in a process whose runtime has not touched `device` (0 or 1) yet: nobody
 * holds its primary context (not the runtime, nor what earlier tests made), and no violation is
 * left from earlier tests.
 */
void start_with_primary_unheld(int device);

/** The model stream `h` names for the calling thread. */
stream* resolve_on(cudaStream_t h);

}  // namespace model
