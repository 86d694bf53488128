/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */

// librmm_next_allocator.so: the C functions of <rmm_next/allocator_plugin.h>. Every entry point
// catches everything: failures become NULL / -1 and a message for rmm_next_last_error().

#include "device_choice.hpp"
#include "live_allocations.hpp"
#include "plugin_counters.hpp"
#include "stream_order.hpp"
#include "tracing.hpp"
#include "vmm_devices.hpp"

#include <rmm_next/allocator_plugin.h>
#include <rmm_next/detail/device_guard.hpp>
#include <rmm_next/detail/device_id.hpp>
#include <rmm_next/detail/driver_api.hpp>
#include <rmm_next/detail/export.hpp>
#include <rmm_next/detail/owned_stream.hpp>
#include <rmm_next/detail/runtime_teardown.hpp>
#include <rmm_next/detail/stream.hpp>
#include <rmm_next/detail/throw_error.hpp>
#include <rmm_next/error.hpp>
#include <rmm_next/per_device_resource.hpp>
#include <rmm_next/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rmm_next::plugin {
namespace {

constexpr std::size_t alignment = 256;

// ---- Errors ---------------------------------------------------------------------------------

std::string& last_error() noexcept
{
  thread_local std::string message;
  return message;
}

void set_last_error(char const* what) noexcept
{
  try {
    last_error() = what;
  } catch (...) {  // std::bad_alloc: keep the previous message
  }
}

/** @brief Runs `f`; an exception becomes `on_failure` and the thread's last error. */
template <class R, class F>
R guarded(R on_failure, F&& f) noexcept
{
  try {
    return f();
  } catch (std::exception const& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error(
      "rmm_next::allocator_plugin: an unknown exception was caught at the C interface");
  }
  return on_failure;
}

// ---- Process-wide state ---------------------------------------------------------------------

int query_device_count() { return detail::device_count("allocator_plugin"); }

/** @brief Everything the plugin keeps; made on first use and never destroyed, like the map. */
class plugin_state {
 public:
  explicit plugin_state(int devices)
    : device_count{devices},
      resource_map{&get_per_device_resource_map()},
      slots_{std::make_unique<device_slot[]>(static_cast<std::size_t>(devices))},
      counters{static_cast<std::size_t>(devices)},
      live{std::make_unique<live_bytes[]>(static_cast<std::size_t>(devices))},
      segment_streams_{std::make_unique<std::unique_ptr<detail::owned_stream>[]>(
        static_cast<std::size_t>(devices))},
      vmm_{std::make_unique<vmm_device[]>(static_cast<std::size_t>(devices))}
  {
  }

  /** @brief The vmm_resource slot of `device` (checked). */
  vmm_device& vmm(int device) { return vmm_[static_cast<std::size_t>(device)]; }

  /** @brief `device`, or the current device for -1, checked against the device count. */
  [[nodiscard]] int resolve(int device) const
  {
    if (device == detail::current_device_arg) {
      device = detail::current_device("allocator_plugin");
    }
    return detail::checked_device(device, device_count, "allocator_plugin");
  }

  /** @brief The slot of `device`, with the default choice applied on the plugin's first use. */
  device_slot& slot(int device)
  {
    device_slot& s = slots_[static_cast<std::size_t>(device)];
    if (!s.touched.load(std::memory_order_acquire)) {
      std::lock_guard lock{s.mutex};
      if (!s.touched.load(std::memory_order_relaxed)) {
        s.apply(device, default_choice(), live_bytes_of(device), "the default choice");
        s.touched.store(true, std::memory_order_release);
      }
    }
    return s;
  }

  [[nodiscard]] bool touched(int device) const noexcept
  {
    return slots_[static_cast<std::size_t>(device)].touched.load(std::memory_order_acquire);
  }

  /** @brief Applies `choice` to `device` (-1: the default, and every device already used). */
  void choose(int device, resource_choice const& choice, char const* call)
  {
    if (device == detail::every_device) {
      {
        std::lock_guard lock{default_mutex_};
        if (choice.kind) {
          default_.kind = choice.kind;
          default_.pool = choice.pool;
        }
        if (choice.cache) { default_.cache = choice.cache; }
        if (choice.segment) { default_.segment = choice.segment; }
      }
      for (int d = 0; d < device_count; ++d) {
        if (touched(d)) { choose(d, choice, call); }
      }
      return;
    }
    device         = resolve(device);
    device_slot& s = slot(device);
    std::lock_guard lock{s.mutex};
    s.apply(device, choice, live_bytes_of(device), call);
  }

  void forget_default_cache()
  {
    std::lock_guard lock{default_mutex_};
    default_.cache.reset();
  }

  void forget_default_segment_cache()
  {
    std::lock_guard lock{default_mutex_};
    default_.segment.reset();
  }

  [[nodiscard]] std::int64_t live_bytes_of(int device) const
  {
    return live[static_cast<std::size_t>(device)].bytes.current();
  }

  /** @brief The live bytes and peak of `device`. */
  [[nodiscard]] detail::peak_counter& live_of(int device)
  {
    return live[static_cast<std::size_t>(device)].bytes;
  }

  /**
   * @brief A stream of the plugin's own on `device` (made on first use), never captured; it
   * belongs to the device's primary context, whatever context its first caller had current.
   */
  detail::owned_stream const& segment_stream(int device)
  {
    std::lock_guard lock{segment_streams_mutex_};
    auto& stream = segment_streams_[static_cast<std::size_t>(device)];
    if (!stream) { stream = std::make_unique<detail::owned_stream>(device, "allocator_plugin"); }
    return *stream;
  }

  int const device_count;
  /** @brief The process-wide map (`get_per_device_resource_map`), found once. */
  per_device_resource_map<device_async_resource_ref> const* const resource_map;

 private:
  resource_choice default_choice()
  {
    std::lock_guard lock{default_mutex_};
    return default_;
  }

  std::unique_ptr<device_slot[]> slots_;
  std::mutex default_mutex_;
  resource_choice default_;

 public:
  counter_registry counters;
  std::unique_ptr<live_bytes[]> live;  ///< per device
  live_allocations allocations;        ///< every allocation handed out, from every function
  deferred_frees deferred;

 private:
  std::mutex segment_streams_mutex_;
  std::unique_ptr<std::unique_ptr<detail::owned_stream>[]> segment_streams_;
  std::unique_ptr<vmm_device[]> vmm_;
};

/**
 * @brief The plugin's state; the first call that finds a driver makes it.
 * @throws cuda_error in a child forked after the parent made it (`detail::forked_after_cuda`).
 */
plugin_state& state()
{
  if (detail::forked_after_cuda().load(std::memory_order_relaxed)) {
    throw cuda_error{
      cudaErrorInitializationError,
      detail::error_message(
        "allocator_plugin",
        "this process was forked from one in which rmm-next had initialized CUDA, and a forked "
        "child cannot use CUDA or the parent's memory; start processes that use CUDA with the "
        "'spawn' or 'forkserver' start method of multiprocessing, or fork before the first CUDA "
        "call")};
  }
  static plugin_state* const s = [] {
    auto* const made = new plugin_state{query_device_count()};
    // After the runtime's first successful call: a child forked from now on is refused above.
    detail::watch_runtime_teardown();
    return made;
  }();
  return *s;
}

}  // namespace

// ---- Logging and tracking -------------------------------------------------------------------

namespace {

/** @brief The tracing once made (read by the fork handler, which must not make it). */
std::atomic<tracing*> made_tracing{nullptr};

/**
 * @brief The child's side of `fork()`, run in the child's only thread before `fork` returns there:
 * the child starts untraced. (The parent's state is left untouched; the library's fork handler
 * marks it unusable, `detail::forked_after_cuda`.)
 */
void after_fork_in_child() noexcept
{
  if (tracing* const t = made_tracing.load(std::memory_order_acquire)) { t->forget_after_fork(); }
}

[[maybe_unused]] int const fork_handler = pthread_atfork(nullptr, nullptr, &after_fork_in_child);

}  // namespace

tracing& tracing_state()
{
  static tracing* const t = [] {
    auto* made = new tracing;  // never destroyed, like the state
    made->apply_environment();
    made_tracing.store(made, std::memory_order_release);
    return made;
  }();
  return *t;
}

void tracing::apply_environment()
{
  auto const warn = [](char const* variable, char const* value, char const* what) {
    std::fprintf(stderr, "rmm_next: %s=%s is ignored: %s\n", variable, value, what);
  };
  if (char const* path = std::getenv("RMM_NEXT_LOG"); path != nullptr && *path != '\0') {
    try {
      set_log(path);
    } catch (std::exception const& e) {
      warn("RMM_NEXT_LOG", path, e.what());
    }
  }
  if (char const* track = std::getenv("RMM_NEXT_TRACK");
      track != nullptr && *track != '\0' && std::strcmp(track, "0") != 0) {
    bool const stacks = std::strcmp(track, "stacks") == 0;
    if (!stacks && std::strcmp(track, "1") != 0) {
      warn("RMM_NEXT_TRACK", track, "set it to 1, or to stacks for stack traces");
      return;
    }
    try {
      set_tracking(true, {.stack_traces = stacks}, query_device_count());
    } catch (std::exception const& e) {
      warn("RMM_NEXT_TRACK", track, e.what());
    }
  }
}

namespace {

// ---- Allocation and free --------------------------------------------------------------------

/** @brief Counts one failed allocation of `device` (not at all if the count cannot be made). */
void count_failure(plugin_state& st, int device) noexcept
{
  try {
    if (counts_ref const counts = local_counts(st.counters, device)) { bump(counts->failures); }
  } catch (...) {  // NOLINT(bugprone-empty-catch): std::bad_alloc: not counted
  }
}

/**
 * @brief An allocation call of the C interface on `device` (-1: the current device): returns
 * `allocate(state, device)` with the device resolved, and counts whatever it throws (a bad size,
 * out of memory) as a failed allocation of that device. A device that does not exist is refused
 * before: no statistics describe it.
 */
template <class Allocate>
void* allocation_call(int device, Allocate&& allocate)
{
  plugin_state& st = state();
  device           = st.resolve(device);
  try {
    return std::forward<Allocate>(allocate)(st, device);
  } catch (...) {
    count_failure(st, device);
    throw;
  }
}

/**
 * @brief `call()`, with `stream` vouched for as eager to the resources below
 * (`detail::eager_stream_scope`) when `c`, its capture state just asked, says it is, so that they
 * need not ask again. A stream captured, or whose state the driver could not tell, they ask.
 */
template <class Call>
decltype(auto) vouching_for(cudaStream_t stream, capture_info const& c, Call&& call)
{
  if (c.status != capture_status::none) { return std::forward<Call>(call)(); }
  detail::eager_stream_scope const eager{stream};
  return std::forward<Call>(call)();
}

/**
 * @brief The resource of `device`, read once, when it is the plugin's segment cache, alone or
 * under the plugin's thread cache, with no log or tracker in front; else empty. A call goes
 * straight to that resource, and without the thread in relaxed capture mode: the segment cache
 * makes its own upstream calls in relaxed mode, and a hit or a free into either cache asks the
 * driver only what every mode allows, so the two mode exchanges a call would cost are saved. Every
 * other resource is called through `tracing_state()` in relaxed mode: while another thread captures
 * in global mode, the driver refuses a pool call from a thread in global mode, on any stream, and
 * invalidates that capture. (A resource set from C++ by another thread after this read gets that
 * one call as the resource read before.)
 */
std::optional<device_async_resource_ref> direct_resource(plugin_state& st, int device)
{
  device_slot& slot              = st.slot(device);
  device_slot::own_top const top = slot.cache_on_top();
  if (top.top == nullptr || tracing_state().in_front()) { return std::nullopt; }
  // The map's version alone, while it is the one at which the resource was last found to be the
  // cache: one atomic load instead of the map's read of the ref (a thread-local entry and the
  // ref's comparison), lines a cold call would otherwise miss.
  std::uint64_t const version = detail::per_device_resource_map_access::version(*st.resource_map);
  device_async_resource_ref const on_top =
    top.cache_top ? device_async_resource_ref{*static_cast<cache_adaptor*>(top.top)}
                  : device_async_resource_ref{*static_cast<segment_adaptor*>(top.top)};
  if (version == slot.top_validated_at()) { return on_top; }
  if (get_per_device_resource_ref(device) != on_top) { return std::nullopt; }
  slot.note_top_validated(version);
  return on_top;
}

/** @brief Gives `ptr` back to `direct` when the plugin called it directly, else through
 * `tracing_state()`, in the order of `stream`. */
[[gnu::always_inline]] inline void release_to(std::optional<device_async_resource_ref> direct,
                                              int device,
                                              cudaStream_t stream,
                                              void* ptr,
                                              std::size_t bytes) noexcept
{
  if (direct) {
    direct->deallocate(cuda::stream_ref{stream}, ptr, bytes, alignment);
  } else {
    tracing_state().deallocate(device, stream, ptr, bytes, alignment);
  }
}

/** @brief `bytes` from the resource of `device` (resolved) in the order of `stream`, recorded. */
void* allocate(plugin_state& st, source from, std::size_t bytes, int device, cudaStream_t stream)
{
  if (bytes == 0) { return nullptr; }
  std::optional<device_async_resource_ref> direct = direct_resource(st, device);
  rmm_next::detail::relaxed_capture_mode const relaxed{!direct};
  counts_ref const counts = local_counts(st.counters, device);
  // On a thread with no context yet, the driver answers nothing about a default stream: it would
  // be taken for one a capture may hold, and the allocation sent past the caches.
  detail::default_stream_context const in_context{stream, device};
  capture_info const c = detail::capture_of(stream);
  void* const ptr      = vouching_for(stream, c, [&] {
    return direct ? direct->allocate(cuda::stream_ref{stream}, bytes, alignment)
                       : tracing_state().allocate(device, stream, bytes, alignment);
  });
  allocation_record record{.bytes   = bytes,
                           .stream  = stream,
                           .device  = device,
                           .from    = from,
                           .capture = c.status == capture_status::active ? c.id : 0,
                           .users   = {}};
  std::optional<allocation_record> replaced;
  try {
    replaced = st.allocations.insert(ptr, std::move(record));
  } catch (...) {
    release_to(direct, device, stream, ptr, bytes);
    throw;
  }
  if (counts) {
    bump(counts->allocations[static_cast<std::size_t>(from)]);
    bump(counts->bytes_allocated, bytes);
  }
  st.live_of(device).add(static_cast<std::int64_t>(bytes));
  if (replaced && replaced->by == served_by::device_resource) {
    // Handed out again by the resource: freed behind the plugin's back (by C++ code through the
    // per-device resource). Its bytes are no longer live.
    if (counts_ref const c = local_counts(st.counters, replaced->device)) {
      bump(c->bytes_freed, replaced->bytes);
    }
    st.live_of(replaced->device).sub(static_cast<std::int64_t>(replaced->bytes));
  }
  return ptr;
}

/**
 * @brief A size PyTorch passed (`ssize_t`) as bytes.
 * @throws std::invalid_argument naming `call` for a negative size, which PyTorch never passes.
 */
std::size_t torch_bytes(ssize_t size, char const* call)
{
  if (size < 0) {
    detail::throw_error<std::invalid_argument>("allocator_plugin",
                                               std::string{call} + " was given a negative size (" +
                                                 std::to_string(size) +
                                                 " bytes); pass the number of bytes");
  }
  return static_cast<std::size_t>(size);
}

/**
 * @brief Refuses a null output pointer of the C function `call`.
 * @throws std::invalid_argument "<call> was given a null output pointer".
 */
void require_output(void const* out, char const* call)
{
  if (out == nullptr) {
    detail::throw_error<std::invalid_argument>(
      "allocator_plugin", std::string{call} + " was given a null output pointer");
  }
}

/**
 * @brief Takes the record of `ptr`, a live allocation served by `by`, for its free by `call`.
 * @throws std::invalid_argument naming `call` for anything else (a host address, a pointer into a
 * block, a block freed already, one of the other resource): nothing is freed or counted then.
 */
allocation_record take_record(plugin_state& st, void* ptr, served_by by, char const* call)
{
  std::optional<allocation_record> record =
    st.allocations.take_if(ptr, [by](allocation_record const& r) { return r.by == by; });
  if (!record) {
    detail::throw_error<std::invalid_argument>(
      "allocator_plugin",
      std::string{call} +
        " was given a pointer this allocator did not hand out (or freed already); it is not "
        "freed");
  }
  return std::move(*record);
}

/**
 * @brief Frees now, in the order of `f.stream` and after the streams `f.ptr` was recorded on:
 * into `direct` (`direct_resource` of the record's device), else through `tracing_state()`.
 */
void free_now(plugin_state& st,
              pending_free const& f,
              capture_info const& own,
              std::optional<device_async_resource_ref> direct) noexcept
{
  allocation_record const& r = f.record;
  if (!r.users.empty()) { wait_for_users(f.stream, r.users, own); }
  release_to(direct, r.device, f.stream, f.ptr, r.bytes);
  if (counts_ref const counts = local_counts(st.counters, r.device)) {
    bump(counts->deallocations);
    bump(counts->bytes_freed, r.bytes);
  }
  st.live_of(r.device).sub(static_cast<std::int64_t>(r.bytes));
}

/** @brief Frees that waited for a capture which has ended (relaxed, as in allocate: they wait on
 * recorded streams and free through any resource). */
void release_deferred(plugin_state& st) noexcept
{
  if (st.deferred.count() == 0) { return; }
  rmm_next::detail::relaxed_capture_mode const relaxed;
  for (pending_free const& f : st.deferred.take_ready()) {
    free_now(st, f, capture_info{}, std::nullopt);
  }
}

/**
 * @brief The free `call` of `ptr` (from the per-device resource) on `stream`, or on the stream it
 * was allocated on when none is given (CuPy's): now, or once the captures it must wait for ended.
 * @throws std::invalid_argument naming `call` when the plugin did not hand out `ptr`.
 */
void deallocate(void* ptr, std::optional<cudaStream_t> stream, char const* call)
{
  if (ptr == nullptr) { return; }
  plugin_state& st = state();
  release_deferred(st);
  pending_free f{ptr, {}, take_record(st, ptr, served_by::device_resource, call)};
  // As in allocate; relaxed also for the waits on the streams recorded for the block, which may
  // synchronize a stream.
  std::optional<device_async_resource_ref> direct = direct_resource(st, f.record.device);
  rmm_next::detail::relaxed_capture_mode const relaxed{!f.record.users.empty() || !direct};
  f.stream = stream.value_or(f.record.stream);
  detail::default_stream_context const in_context{f.stream, f.record.device};  // as in allocate
  capture_info const c = detail::capture_of(f.stream);
  bool const graph_own = c.status == capture_status::active && f.record.capture == c.id;
  if (!c.capturing()) {
    // A recorded stream that another thread captures cannot be waited on until that capture ends.
    f.captured_user = user_captured_elsewhere(f.record.users, f.stream, c);
  }
  if ((c.capturing() && !graph_own) || f.captured_user != nullptr) {
    // A free node may only free what its own capture allocated: free after the capture. So is a
    // free on a stream whose capture state the driver cannot tell.
    try {
      st.deferred.push(f);
    } catch (...) {  // std::bad_alloc: the block stays live, and the call fails
      (void)st.allocations.insert(ptr, std::move(f.record));
      throw;
    }
    return;
  }
  vouching_for(f.stream, c, [&] { free_now(st, f, c, direct); });
}

}  // namespace
}  // namespace rmm_next::plugin

// ---- The C interface ------------------------------------------------------------------------

using rmm_next::plugin::allocation_call;
using rmm_next::plugin::guarded;
using rmm_next::plugin::plugin_state;
using rmm_next::plugin::source;
using rmm_next::plugin::state;

extern "C" {

RMM_NEXT_EXPORT int rmm_next_abi_version(void) { return RMM_NEXT_ALLOCATOR_ABI_VERSION; }

RMM_NEXT_EXPORT char const* rmm_next_last_error(void)
{
  return rmm_next::plugin::last_error().c_str();
}

RMM_NEXT_EXPORT int rmm_next_device_count(void)
{
  return guarded(-1, [] { return state().device_count; });
}

RMM_NEXT_EXPORT int rmm_next_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes)
{
  return guarded(-1, [&] {
    rmm_next::plugin::require_output(free_bytes, "rmm_next_mem_get_info");
    rmm_next::plugin::require_output(total_bytes, "rmm_next_mem_get_info");
    device = state().resolve(device);
    rmm_next::detail::relaxed_capture_mode const relaxed;  // see rmm_next_get_statistics
    rmm_next::detail::device_guard const on_device{device};
    if (cudaError_t const s = cudaMemGetInfo(free_bytes, total_bytes); s != cudaSuccess) {
      rmm_next::detail::throw_cuda_error(s, "cudaMemGetInfo", "allocator_plugin");
    }
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_use_current_pool(int device)
{
  return guarded(-1, [&] {
    rmm_next::plugin::resource_choice choice;
    choice.kind = rmm_next::plugin::resource_kind::current_pool;
    state().choose(device, choice, "rmm_next_use_current_pool");
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_use_owned_pool(int device, rmm_next_pool_options const* options)
{
  return guarded(-1, [&] {
    rmm_next::plugin::resource_choice choice;
    choice.kind = rmm_next::plugin::resource_kind::owned_pool;
    choice.pool = rmm_next::plugin::to_pool_options(options);
    state().choose(device, choice, "rmm_next_use_owned_pool");
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_use_managed_memory(int device)
{
  return guarded(-1, [&] {
    rmm_next::plugin::resource_choice choice;
    choice.kind = rmm_next::plugin::resource_kind::managed;
    state().choose(device, choice, "rmm_next_use_managed_memory");
    return 0;
  });
}

namespace {

/**
 * @brief What `rmm_next_disable_thread_cache` and `rmm_next_disable_segment_cache` do: `remove`
 * (a member of `device_slot`) on `device`, or on every device used so far and as the default.
 */
int remove_from(int device,
                void (rmm_next::plugin::device_slot::*remove)(int),
                void (rmm_next::plugin::plugin_state::*forget_default)())
{
  return guarded(-1, [&] {
    auto& st        = state();
    auto const once = [&](int d) {
      rmm_next::plugin::device_slot& s = st.slot(d);
      std::lock_guard lock{s.mutex};
      (s.*remove)(d);
    };
    if (device == rmm_next::detail::every_device) {
      (st.*forget_default)();
      for (int d = 0; d < st.device_count; ++d) {
        if (st.touched(d)) { once(d); }
      }
    } else {
      once(st.resolve(device));
    }
    return 0;
  });
}

/** @brief Applies `choice` to `device` (-1: every device, and the default), for `call`. */
int choose_for(int device, rmm_next::plugin::resource_choice const& choice, char const* call)
{
  return guarded(-1, [&] {
    state().choose(device, choice, call);
    return 0;
  });
}

}  // namespace

RMM_NEXT_EXPORT int rmm_next_enable_thread_cache(int device,
                                                 rmm_next_thread_cache_options const* options)
{
  rmm_next::plugin::resource_choice choice;
  choice.cache = rmm_next::plugin::to_cache_options(options);
  return choose_for(device, choice, "rmm_next_enable_thread_cache");
}

RMM_NEXT_EXPORT int rmm_next_disable_thread_cache(int device)
{
  return remove_from(device,
                     &rmm_next::plugin::device_slot::remove_cache,
                     &rmm_next::plugin::plugin_state::forget_default_cache);
}

RMM_NEXT_EXPORT int rmm_next_enable_segment_cache(int device,
                                                  rmm_next_segment_cache_options const* options)
{
  rmm_next::plugin::resource_choice choice;
  choice.segment = rmm_next::plugin::to_segment_options(options);
  return choose_for(device, choice, "rmm_next_enable_segment_cache");
}

RMM_NEXT_EXPORT int rmm_next_disable_segment_cache(int device)
{
  return remove_from(device,
                     &rmm_next::plugin::device_slot::remove_segment_cache,
                     &rmm_next::plugin::plugin_state::forget_default_segment_cache);
}

RMM_NEXT_EXPORT int rmm_next_get_segment_cache_statistics(int device,
                                                          rmm_next_segment_cache_statistics* out)
{
  return guarded(-1, [&] {
    if (out == nullptr) {
      rmm_next::detail::throw_error<std::invalid_argument>(
        "allocator_plugin", "rmm_next_get_segment_cache_statistics: a null output pointer");
    }
    auto& st                            = state();
    device                              = st.resolve(device);
    rmm_next::plugin::device_slot& slot = st.slot(device);
    std::lock_guard lock{slot.mutex};
    *out = rmm_next_segment_cache_statistics{};
    if (auto* cache = slot.segment_cache()) {
      rmm_next::segment_cache_statistics const c = cache->statistics();
      *out                                       = {1,
                                                    c.hits,
                                                    c.misses,
                                                    c.bypasses,
                                                    c.segments,
                                                    c.segment_bytes,
                                                    c.live_bytes,
                                                    c.idle_bytes,
                                                    c.released_segments,
                                                    c.unproven_bytes,
                                                    c.graph_pending_bytes,
                                                    c.lost_bytes};
    }
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_release_unused(int device)
{
  return guarded(-1, [&] {
    // Relaxed: a capture in global mode on another thread would refuse the trim below, and be
    // invalidated by the refusal.
    rmm_next::detail::relaxed_capture_mode const relaxed;
    auto& st = state();
    rmm_next::plugin::release_deferred(st);
    auto const release = [&](int d) {
      if (!st.touched(d)) { return; }  // never make a context on a device the plugin never used
      rmm_next::plugin::device_slot& s = st.slot(d);
      std::lock_guard lock{s.mutex};
      // The cache's flush waits for the blocks it returns. Nothing synchronizes the device: that
      // would invalidate a capture running on any thread. Frees still queued on a stream are
      // released by a later call, once their stream has reached them.
      if (auto* cache = s.cache()) { cache->flush(); }
      if (auto* segments = s.segment_cache()) { (void)segments->trim(); }
      if (cudaMemPool_t const pool = s.pool(d); pool != nullptr) {
        (void)cudaMemPoolTrimTo(pool, 0);
        (void)cudaGetLastError();
      }
    };
    if (device == rmm_next::detail::every_device) {
      for (int d = 0; d < st.device_count; ++d) {
        release(d);
      }
    } else {
      release(st.resolve(device));
    }
    return 0;
  });
}

RMM_NEXT_EXPORT void* rmm_next_allocate(size_t size, int device, cudaStream_t stream)
{
  return guarded<void*>(nullptr, [&] {
    return allocation_call(device, [&](plugin_state& st, int d) {
      return rmm_next::plugin::allocate(st, source::other, size, d, stream);
    });
  });
}

RMM_NEXT_EXPORT void rmm_next_deallocate(void* ptr,
                                         size_t /*size*/,
                                         int /*device*/,
                                         cudaStream_t stream)
{
  guarded(0, [&] {
    rmm_next::plugin::deallocate(ptr, stream, "rmm_next_deallocate");
    return 0;
  });
}

// ---- PyTorch --------------------------------------------------------------------------------

RMM_NEXT_EXPORT void* rmm_next_torch_alloc(ssize_t size, int device, cudaStream_t stream)
{
  return guarded<void*>(nullptr, [&] {
    return allocation_call(device, [&](plugin_state& st, int d) {
      std::size_t const bytes = rmm_next::plugin::torch_bytes(size, "rmm_next_torch_alloc");
      return rmm_next::plugin::allocate(st, source::torch, bytes, d, stream);
    });
  });
}

RMM_NEXT_EXPORT void rmm_next_torch_free(void* ptr,
                                         ssize_t size,
                                         int /*device*/,
                                         cudaStream_t stream)
{
  guarded(0, [&] {
    if (ptr == nullptr) { return 0; }
    // A negative size is not PyTorch's: such a free is refused, the memory not freed.
    (void)rmm_next::plugin::torch_bytes(size, "rmm_next_torch_free");
    rmm_next::plugin::deallocate(ptr, stream, "rmm_next_torch_free");
    return 0;
  });
}

RMM_NEXT_EXPORT void rmm_next_torch_record_stream(void* ptr, cudaStream_t stream)
{
  guarded(0, [&] {
    if (ptr == nullptr) { return 0; }
    bool const live = state().allocations.update(ptr, [&](rmm_next::plugin::allocation_record& r) {
      if (std::find(r.users.begin(), r.users.end(), stream) == r.users.end()) {
        r.users.push_back(stream);
      }
    });
    if (!live) {
      rmm_next::detail::throw_error<std::invalid_argument>(
        "allocator_plugin",
        "rmm_next_torch_record_stream was given a pointer this allocator did not hand out (or "
        "freed already); nothing is recorded");
    }
    return 0;
  });
}

RMM_NEXT_EXPORT void rmm_next_torch_empty_cache(void) { (void)rmm_next_release_unused(-1); }

RMM_NEXT_EXPORT void* rmm_next_torch_segment_alloc(ssize_t size,
                                                   int device,
                                                   cudaStream_t /*stream*/)
{
  return guarded<void*>(nullptr, [&] {
    return allocation_call(device, [&](plugin_state& st, int d) -> void* {
      std::size_t const bytes = rmm_next::plugin::torch_bytes(size, "rmm_next_torch_segment_alloc");
      if (bytes == 0) {
        rmm_next::detail::throw_error<std::invalid_argument>(
          "allocator_plugin",
          "rmm_next_torch_segment_alloc was given a size of 0 bytes; a segment needs a positive "
          "size");
      }
      // Relaxed: PyTorch asks for a segment while a stream may be captured, here or elsewhere.
      rmm_next::detail::relaxed_capture_mode const relaxed;
      rmm_next::detail::owned_stream const& own = st.segment_stream(d);
      // In the stream's context (the device's primary one), also for a caller that has another
      // context of the device current: that context is current again when the call returns.
      rmm_next::detail::context_scope const in_context{own.context()};
      cudaStream_t const stream = own.get();
      void* const ptr           = rmm_next::plugin::allocate(st, source::torch, bytes, d, stream);
      if (cudaError_t const s = cudaStreamSynchronize(stream); s != cudaSuccess) {
        rmm_next::plugin::deallocate(ptr, stream, "rmm_next_torch_segment_alloc");
        rmm_next::detail::throw_cuda_error(s, "cudaStreamSynchronize", "allocator_plugin");
      }
      return ptr;
    });
  });
}

// ---- CuPy -----------------------------------------------------------------------------------

RMM_NEXT_EXPORT void* rmm_next_cupy_malloc(void* param, size_t size, int device_id)
{
  return guarded<void*>(nullptr, [&] {
    return allocation_call(device_id, [&](plugin_state& st, int d) {
      return rmm_next::plugin::allocate(
        st, source::cupy, size, d, static_cast<cudaStream_t>(param));
    });
  });
}

RMM_NEXT_EXPORT void rmm_next_cupy_free(void* /*param*/, void* ptr, int /*device_id*/)
{
  guarded(0, [&] {
    // CuPy passes neither size nor stream: the block is freed on the stream it was allocated on.
    rmm_next::plugin::deallocate(ptr, std::nullopt, "rmm_next_cupy_free");
    return 0;
  });
}

RMM_NEXT_EXPORT void rmm_next_cupy_forget_stream(cudaStream_t stream)
{
  guarded(0, [&] {
    // Live blocks of the destroyed stream are freed on the legacy default stream from now on,
    // which waits for the work of every blocking stream (CuPy's streams are blocking unless made
    // with non_blocking=True). No device synchronization: it would invalidate a capture running
    // on any thread.
    auto& st = state();
    st.allocations.for_each([&](void*, rmm_next::plugin::allocation_record& r) {
      if (r.stream == stream) { r.stream = cudaStreamLegacy; }
    });
    st.deferred.restream(stream, cudaStreamLegacy);
    return 0;
  });
}

// ---- Numba ----------------------------------------------------------------------------------

RMM_NEXT_EXPORT void* rmm_next_numba_alloc(size_t size, int device)
{
  return guarded<void*>(nullptr, [&] {
    return allocation_call(device, [&](plugin_state& st, int d) {
      return rmm_next::plugin::allocate(st, source::numba, size, d, cudaStreamLegacy);
    });
  });
}

RMM_NEXT_EXPORT void rmm_next_numba_free(void* ptr, size_t /*size*/, int /*device*/)
{
  guarded(0, [&] {
    rmm_next::plugin::deallocate(ptr, cudaStreamLegacy, "rmm_next_numba_free");
    return 0;
  });
}

// ---- Statistics -----------------------------------------------------------------------------

RMM_NEXT_EXPORT int rmm_next_get_statistics(int device, rmm_next_statistics* out)
{
  return guarded(-1, [&] {
    rmm_next::plugin::require_output(out, "rmm_next_get_statistics");
    // Relaxed: statistics are read while another thread may capture a graph in global mode, which
    // a refused query would invalidate. Nothing here is stream work a capture could record.
    rmm_next::detail::relaxed_capture_mode const relaxed;
    auto& st = state();
    device   = st.resolve(device);
    rmm_next::plugin::release_deferred(st);  // what a capture that has ended held back
    rmm_next_statistics s            = {};
    rmm_next::plugin::count_totals t = st.counters.totals(static_cast<std::size_t>(device));
    for (std::uint64_t const n : t.allocations) {
      s.allocations += n;
    }
    s.torch_allocations     = t.allocations[static_cast<std::size_t>(source::torch)];
    s.cupy_allocations      = t.allocations[static_cast<std::size_t>(source::cupy)];
    s.numba_allocations     = t.allocations[static_cast<std::size_t>(source::numba)];
    s.other_allocations     = t.allocations[static_cast<std::size_t>(source::other)];
    s.deallocations         = t.deallocations;
    s.failed_allocations    = t.failures;
    s.allocated_bytes       = t.bytes_allocated - t.bytes_freed;
    s.total_allocated_bytes = t.bytes_allocated;
    s.allocated_bytes_high =
      static_cast<std::uint64_t>(std::max<std::int64_t>(st.live_of(device).peak(), 0));
    s.deferred_frees                    = st.deferred.count();
    rmm_next::plugin::device_slot& slot = st.slot(device);
    std::lock_guard lock{slot.mutex};
    s.resource_kind = static_cast<std::int32_t>(slot.kind(device));
    if (cudaMemPool_t const pool = slot.pool(device); pool != nullptr) {
      auto const read = [pool](cudaMemPoolAttr attr) -> std::uint64_t {
        cuuint64_t value{};
        if (cudaMemPoolGetAttribute(pool, attr, &value) != cudaSuccess) {
          (void)cudaGetLastError();
          return 0;
        }
        return value;
      };
      s.pool_reserved_bytes      = read(cudaMemPoolAttrReservedMemCurrent);
      s.pool_reserved_bytes_high = read(cudaMemPoolAttrReservedMemHigh);
      s.pool_used_bytes          = read(cudaMemPoolAttrUsedMemCurrent);
      s.pool_used_bytes_high     = read(cudaMemPoolAttrUsedMemHigh);
    }
    if (slot.cache_in_place(device)) {
      rmm_next::thread_cache_statistics const c = slot.cache()->statistics();
      s.thread_cache_enabled                    = 1;
      s.cache_hits                              = c.hits;
      s.cache_misses                            = c.misses;
      s.cache_bypasses                          = c.bypasses;
      s.cached_bytes                            = c.cached_bytes;
    }
    *out = s;
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_get_pool_attribute(int device, int attribute, uint64_t* value)
{
  return guarded(-1, [&] {
    rmm_next::plugin::require_output(value, "rmm_next_get_pool_attribute");
    rmm_next::detail::relaxed_capture_mode const relaxed;  // see rmm_next_get_statistics
    auto& st                            = state();
    device                              = st.resolve(device);
    rmm_next::plugin::device_slot& slot = st.slot(device);
    cudaMemPool_t pool{};
    {
      std::lock_guard lock{slot.mutex};
      pool = slot.kind(device) == rmm_next::plugin::resource_kind::external ? nullptr
                                                                            : slot.pool(device);
    }
    if (pool == nullptr) {
      rmm_next::detail::throw_error<std::logic_error>(
        "allocator_plugin",
        "device " + std::to_string(device) +
          " is served by no pool this library knows (a resource set from C++); read its "
          "attributes where it was made");
    }
    auto const attr = static_cast<cudaMemPoolAttr>(attribute);
    bool const flag = attr == cudaMemPoolReuseFollowEventDependencies ||
                      attr == cudaMemPoolReuseAllowOpportunistic ||
                      attr == cudaMemPoolReuseAllowInternalDependencies;
    cuuint64_t read{};  // wide enough for either type; a flag is an int at its start
    if (cudaError_t const s = cudaMemPoolGetAttribute(pool, attr, &read); s != cudaSuccess) {
      rmm_next::detail::throw_cuda_error(s, "cudaMemPoolGetAttribute", "allocator_plugin");
    }
    int narrow{};
    std::memcpy(&narrow, &read, sizeof(narrow));
    *value = flag ? static_cast<uint64_t>(narrow != 0) : static_cast<uint64_t>(read);
    return 0;
  });
}

// ---- Logging and tracking -------------------------------------------------------------------

namespace {
std::vector<rmm_next::plugin::outstanding_entry>& outstanding_snapshot()
{
  thread_local std::vector<rmm_next::plugin::outstanding_entry> snapshot;
  return snapshot;
}
}  // namespace

RMM_NEXT_EXPORT int rmm_next_set_log(char const* path)
{
  return guarded(-1, [&] {
    rmm_next::plugin::tracing_state().set_log(path == nullptr ? std::string{} : std::string{path});
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_flush_log(void)
{
  return guarded(-1, [] { return rmm_next::plugin::tracing_state().flush() ? 1 : 0; });
}

RMM_NEXT_EXPORT int rmm_next_set_tracking(int enabled, int stack_traces)
{
  return guarded(-1, [&] {
    auto& tracing = rmm_next::plugin::tracing_state();
    if (enabled == 0) {
      tracing.set_tracking(false, {}, 0);
    } else {
      tracing.set_tracking(true, {.stack_traces = stack_traces != 0}, state().device_count);
    }
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_reset_peak_statistics(int device)
{
  return guarded(-1, [&] {
    rmm_next::detail::relaxed_capture_mode const relaxed;  // see rmm_next_get_statistics
    auto& st = state();
    device   = st.resolve(device);
    st.live_of(device).reset_peak();
    rmm_next::plugin::device_slot& slot = st.slot(device);
    std::lock_guard lock{slot.mutex};
    if (cudaMemPool_t const pool = slot.pool(device); pool != nullptr) {
      for (cudaMemPoolAttr const attr :
           {cudaMemPoolAttrReservedMemHigh, cudaMemPoolAttrUsedMemHigh}) {
        cuuint64_t zero = 0;  // the driver's watermarks restart from the pool's current values
        if (cudaMemPoolSetAttribute(pool, attr, &zero) != cudaSuccess) { (void)cudaGetLastError(); }
      }
    }
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_get_tracing(int* logging, int* tracking)
{
  return guarded(-1, [&] {
    rmm_next::plugin::require_output(logging, "rmm_next_get_tracing");
    rmm_next::plugin::require_output(tracking, "rmm_next_get_tracing");
    auto const& tracing = rmm_next::plugin::tracing_state();
    *logging            = tracing.logging() ? 1 : 0;
    *tracking           = tracing.tracking() ? 1 : 0;
    return 0;
  });
}

RMM_NEXT_EXPORT int64_t rmm_next_outstanding(int device)
{
  return guarded<int64_t>(-1, [&] {
    if (device != rmm_next::detail::every_device) { device = state().resolve(device); }
    auto& snapshot = outstanding_snapshot();
    snapshot       = rmm_next::plugin::tracing_state().outstanding(device);
    return static_cast<int64_t>(snapshot.size());
  });
}

RMM_NEXT_EXPORT int rmm_next_outstanding_entry(size_t index, rmm_next_allocation* out)
{
  return guarded(-1, [&] {
    auto const& snapshot = outstanding_snapshot();
    if (out == nullptr || index >= snapshot.size()) {
      rmm_next::detail::throw_error<std::out_of_range>(
        "allocator_plugin",
        "rmm_next_outstanding_entry: entry " + std::to_string(index) + " of a snapshot of " +
          std::to_string(snapshot.size()) + " (or a null output pointer); call " +
          "rmm_next_outstanding first and pass an index below its count");
    }
    auto const& e = snapshot[index];
    *out          = rmm_next_allocation{
      e.allocation.ptr,
      e.allocation.bytes,
      e.allocation.alignment,
      e.allocation.stream,
      e.thread,
      std::chrono::duration_cast<std::chrono::nanoseconds>(e.allocation.time.time_since_epoch())
        .count(),
      e.device,
      0,
      e.allocation.stack_trace.c_str()};
    return 0;
  });
}

// ---- Memory NCCL can register ---------------------------------------------------------------

RMM_NEXT_EXPORT int rmm_next_vmm_configure(int device, rmm_next_vmm_options const* options)
{
  return guarded(-1, [&] {
    rmm_next_vmm_options const normalized = rmm_next::plugin::normalized_vmm_options(options);
    auto& st                              = state();
    device                                = st.resolve(device);
    st.vmm(device).configure(device, normalized);
    return 0;
  });
}

RMM_NEXT_EXPORT void* rmm_next_vmm_alloc(ssize_t size, int device, cudaStream_t /*stream*/)
{
  rmm_next::plugin::vmm_device* slot = nullptr;  // where the call counts, once the device is known
  void* const ptr                    = guarded<void*>(nullptr, [&]() -> void* {
    auto& st                = state();
    device                  = st.resolve(device);
    slot                    = &st.vmm(device);
    std::size_t const bytes = rmm_next::plugin::torch_bytes(size, "rmm_next_vmm_alloc");
    if (bytes == 0) {
      slot = nullptr;  // 0 bytes: NULL, neither an allocation nor a failure
      return nullptr;
    }
    // Relaxed: PyTorch asks for a segment while a stream may be captured, here or elsewhere.
    rmm_next::detail::relaxed_capture_mode const relaxed;
    rmm_next::vmm_resource mr = slot->resource(device);
    void* const p             = mr.allocate_sync(bytes);
    rmm_next::plugin::allocation_record record{.bytes  = bytes,
                                                                  .device = device,
                                                                  .by     = rmm_next::plugin::served_by::vmm_resource,
                                                                  .users  = {}};
    try {
      (void)st.allocations.insert(p, std::move(record));
    } catch (...) {
      mr.deallocate_sync(p, bytes);
      throw;
    }
    return p;
  });
  if (slot != nullptr) {
    (ptr != nullptr ? slot->allocations : slot->failures).fetch_add(1, std::memory_order_relaxed);
  }
  return ptr;
}

RMM_NEXT_EXPORT void rmm_next_vmm_free(void* ptr, ssize_t size, int /*device*/, cudaStream_t stream)
{
  guarded(0, [&] {
    if (ptr == nullptr) { return 0; }
    // A negative size is refused, the block not freed, as rmm_next_torch_free does.
    (void)rmm_next::plugin::torch_bytes(size, "rmm_next_vmm_free");
    auto& st                                   = state();
    rmm_next::plugin::allocation_record record = rmm_next::plugin::take_record(
      st, ptr, rmm_next::plugin::served_by::vmm_resource, "rmm_next_vmm_free");
    rmm_next::plugin::vmm_device& slot       = st.vmm(record.device);
    std::optional<rmm_next::vmm_resource> mr = slot.existing();  // it made the block
    // The legacy default stream is the current device's: the block's device orders its free. On a
    // stream being captured the graph frees the block, when it first runs past this point.
    std::optional<rmm_next::detail::device_guard> on_device;
    try {
      on_device.emplace(record.device);
    } catch (...) {  // the block stays live, and the call fails
      (void)st.allocations.insert(ptr, std::move(record));
      throw;
    }
    if (mr) { mr->deallocate(stream, ptr, record.bytes); }
    slot.deallocations.fetch_add(1, std::memory_order_relaxed);
    return 0;
  });
}

RMM_NEXT_EXPORT int rmm_next_vmm_get_statistics(int device, rmm_next_vmm_statistics* out)
{
  return guarded(-1, [&] {
    rmm_next::plugin::require_output(out, "rmm_next_vmm_get_statistics");
    auto& st = state();
    rmm_next::plugin::read_vmm_statistics(st.vmm(st.resolve(device)), *out);
    return 0;
  });
}

RMM_NEXT_EXPORT int64_t rmm_next_vmm_segments(int device,
                                              void** bases,
                                              size_t* sizes,
                                              size_t capacity)
{
  return guarded<int64_t>(-1, [&]() -> int64_t {
    if (capacity != 0 && (bases == nullptr || sizes == nullptr)) {
      rmm_next::detail::throw_error<std::invalid_argument>(
        "allocator_plugin", "rmm_next_vmm_segments was given a capacity but a null output array");
    }
    auto& st                                       = state();
    std::optional<rmm_next::vmm_resource> const mr = st.vmm(st.resolve(device)).existing();
    if (!mr) { return 0; }
    std::vector<rmm_next::vmm_segment> const segments = mr->segments();
    for (std::size_t i = 0; i < segments.size() && i < capacity; ++i) {
      bases[i] = segments[i].base;
      sizes[i] = segments[i].bytes;
    }
    return static_cast<int64_t>(segments.size());
  });
}

}  // extern "C"
