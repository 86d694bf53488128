#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Copies the library and the allocator plugin's source into DEST with timers (the CPU's time
stamp counter) around each part of the plugin's PyTorch calls and of the segment cache's allocate
and deallocate, for finding where a training step's allocator time goes:

    part_timers.py DEST
    cmake -S DEST -B DEST/build -DCMAKE_BUILD_TYPE=Release -DRMM_NEXT_BUILD_TESTS=OFF \\
          -DRMM_NEXT_BUILD_BENCHMARKS=OFF -DRMM_NEXT_BUILD_EXAMPLES=OFF
    cmake --build DEST/build --target rmm_next_allocator_plugin
    RMM_NEXT_ALLOCATOR_LIBRARY=DEST/build/src/allocator_plugin/librmm_next_allocator.so \\
        python3 benchmarks/python/train_steps.py gpt2 segments --steps 100

At its exit the plugin prints to stderr, per part, the mean time per call and the total: lines
"plugin ..." (rmm_next_torch_alloc and rmm_next_torch_free, split into the plugin's own steps
and the resource's call) and "segment cache ..." (hits, misses and frees, split the same way).
The timers add their own cost (about 10 ns a part); the totals tell parts apart, not the
allocator's cost without them. The copy is made by replacing exact lines of the source: a change
to those lines makes this script fail, saying which (the CPU test part_timers builds the copy).
"""

import pathlib
import shutil
import sys

root = pathlib.Path(__file__).resolve().parents[2]

# ---- The timers, shared by both files (one copy per translation unit that includes them) -------
PRELUDE = r'''
#ifndef RMM_NEXT_PART_TIMERS_PRELUDE
#define RMM_NEXT_PART_TIMERS_PRELUDE
#include <x86intrin.h>
#include <atomic>
#include <chrono>
#include <cstdio>
namespace rmm_next_part_timers {
struct table {
  char const* title;
  char const* const* names;  // part i counts the calls of counter counted_by[i]
  int const* counted_by;
  int parts;
  std::atomic<unsigned long long> ticks[16]{};
  std::atomic<unsigned long long> calls[8]{};
  unsigned long long tsc0 = __rdtsc();
  std::chrono::steady_clock::time_point clock0 = std::chrono::steady_clock::now();
  void add(int part, unsigned long long t) noexcept { ticks[part].fetch_add(t, std::memory_order_relaxed); }
  void count(int counter) noexcept { calls[counter].fetch_add(1, std::memory_order_relaxed); }
  ~table()
  {
    double const ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - clock0).count();
    double const per_ns = static_cast<double>(__rdtsc() - tsc0) / ns;
    for (int i = 0; i < parts; ++i) {
      unsigned long long const n = calls[counted_by[i]].load();
      double const total_ns = static_cast<double>(ticks[i].load()) / per_ns;
      std::fprintf(stderr, "%s %-34s %9llu calls %10.1f ns/call %10.3f ms\n", title, names[i], n,
                   n != 0 ? total_ns / static_cast<double>(n) : 0.0, total_ns / 1e6);
    }
  }
};
}
#endif
'''

PLUGIN_TABLE = r'''
namespace rmm_next_part_timers {
inline char const* const plugin_names[] = {
  "alloc: entry (state, device)", "alloc: relax check, counters", "alloc: capture query",
  "alloc: the resource", "alloc: registry insert", "alloc: counts, live bytes",
  "alloc: in allocate, in all", "alloc: the C call, in all",
  "free: entry (state)", "free: deferred, registry take", "free: relax check",
  "free: capture query", "free: recorded users", "free: the resource", "free: counts, live bytes",
  "free: in deallocate, in all"};
inline int const plugin_counted_by[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
inline table plugin{"plugin", plugin_names, plugin_counted_by, 16};
}
'''

CACHE_TABLE = r'''
namespace rmm_next_part_timers {
inline char const* const cache_names[] = {
  "hit: before the lock", "hit: the lock", "hit: take a cached block", "hit: the idle bound",
  "miss: before the upstream", "miss: idle traded for it", "miss: the upstream's allocate",
  "miss: the new segment, the bound", "free: before the lock", "free: the lock",
  "free: a free that gives nothing back", "free: a free that gives segments back"};
inline int const cache_counted_by[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3};
inline table cache{"segment cache", cache_names, cache_counted_by, 12};
}
'''

T = "rmm_next_part_timers::"


def replace(text, old, new, where):
    if text.count(old) != 1:
        sys.exit(f"part_timers.py: {where} no longer has exactly one of these lines:\n{old}")
    return text.replace(old, new, 1)


def plugin(text):
    w = "src/allocator_plugin/allocator_plugin.cpp"
    text = replace(text, "#include <pthread.h>\n", "#include <pthread.h>\n" + PRELUDE + PLUGIN_TABLE, w)
    P = T + "plugin."
    text = replace(text, '''  if (bytes == 0) { return nullptr; }
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
  });''',
                   f'''  if (bytes == 0) {{ return nullptr; }}
  unsigned long long const p0 = __rdtsc();
  std::optional<device_async_resource_ref> direct = direct_resource(st, device);
  rmm_next::detail::relaxed_capture_mode const relaxed{{!direct}};
  counts_ref const counts = local_counts(st.counters, device);
  unsigned long long const p1 = __rdtsc();
  detail::default_stream_context const in_context{{stream, device}};
  capture_info const c    = detail::capture_of(stream);
  unsigned long long const p2 = __rdtsc();
  void* const ptr         = vouching_for(stream, c, [&] {{
    return direct ? direct->allocate(cuda::stream_ref{{stream}}, bytes, alignment)
                  : tracing_state().allocate(device, stream, bytes, alignment);
  }});
  unsigned long long const p3 = __rdtsc();
  {P}add(1, p1 - p0); {P}add(2, p2 - p1); {P}add(3, p3 - p2);''', w)
    text = replace(text, '''  if (counts) {
    bump(counts->allocations[static_cast<std::size_t>(from)]);
    bump(counts->bytes_allocated, bytes);
  }
  st.live_of(device).add(static_cast<std::int64_t>(bytes));''', f'''  unsigned long long const p4 = __rdtsc();
  if (counts) {{
    bump(counts->allocations[static_cast<std::size_t>(from)]);
    bump(counts->bytes_allocated, bytes);
  }}
  st.live_of(device).add(static_cast<std::int64_t>(bytes));
  unsigned long long const p5 = __rdtsc();
  {P}add(4, p4 - p3); {P}add(5, p5 - p4); {P}add(6, p5 - p0); {P}count(0);''', w)
    text = replace(text, '''  plugin_state& st = state();
  release_deferred(st);
  pending_free f{ptr, {}, take_record(st, ptr, served_by::device_resource, call)};''',
                   f'''  unsigned long long const q0 = __rdtsc();
  plugin_state& st = state();
  unsigned long long const q1 = __rdtsc();
  release_deferred(st);
  pending_free f{{ptr, {{}}, take_record(st, ptr, served_by::device_resource, call)}};
  unsigned long long const q2 = __rdtsc();
  struct at_end {{
    unsigned long long q0;
    ~at_end() {{ {P}add(15, __rdtsc() - q0); {P}count(1); }}
  }} const end_{{q0}};''', w)
    text = replace(text, '''  f.stream = stream.value_or(f.record.stream);
  detail::default_stream_context const in_context{f.stream, f.record.device};  // as in allocate
  capture_info const c = detail::capture_of(f.stream);
  bool const graph_own = c.status == capture_status::active && f.record.capture == c.id;
  if (!c.capturing()) {
    // A recorded stream that another thread captures cannot be waited on until that capture ends.
    f.captured_user = user_captured_elsewhere(f.record.users, f.stream, c);
  }''', f'''  f.stream = stream.value_or(f.record.stream);
  unsigned long long const q3 = __rdtsc();
  detail::default_stream_context const in_context{{f.stream, f.record.device}};  // as in allocate
  capture_info const c = detail::capture_of(f.stream);
  unsigned long long const q4 = __rdtsc();
  bool const graph_own = c.status == capture_status::active && f.record.capture == c.id;
  if (!c.capturing()) {{
    // A recorded stream that another thread captures cannot be waited on until that capture ends.
    f.captured_user = user_captured_elsewhere(f.record.users, f.stream, c);
  }}
  {P}add(8, q1 - q0); {P}add(9, q2 - q1); {P}add(10, q3 - q2); {P}add(11, q4 - q3);
  {P}add(12, __rdtsc() - q4);''', w)
    text = replace(text, '''  release_to(direct, r.device, f.stream, f.ptr, r.bytes);
  if (counts_ref const counts = local_counts(st.counters, r.device)) {
    bump(counts->deallocations);
    bump(counts->bytes_freed, r.bytes);
  }
  st.live_of(r.device).sub(static_cast<std::int64_t>(r.bytes));''', f'''  unsigned long long const r0 = __rdtsc();
  release_to(direct, r.device, f.stream, f.ptr, r.bytes);
  unsigned long long const r1 = __rdtsc();
  if (counts_ref const counts = local_counts(st.counters, r.device)) {{
    bump(counts->deallocations);
    bump(counts->bytes_freed, r.bytes);
  }}
  st.live_of(r.device).sub(static_cast<std::int64_t>(r.bytes));
  {P}add(13, r1 - r0); {P}add(14, __rdtsc() - r1);''', w)
    text = replace(text, '''  return guarded<void*>(nullptr, [&] {
    return allocation_call(device, [&](plugin_state& st, int d) {
      std::size_t const bytes = rmm_next::plugin::torch_bytes(size, "rmm_next_torch_alloc");
      return rmm_next::plugin::allocate(st, source::torch, bytes, d, stream);
    });
  });''', f'''  unsigned long long const o0 = __rdtsc();
  unsigned long long o1 = o0;
  void* const out = guarded<void*>(nullptr, [&] {{
    return allocation_call(device, [&](plugin_state& st, int d) {{
      o1 = __rdtsc();
      std::size_t const bytes = rmm_next::plugin::torch_bytes(size, "rmm_next_torch_alloc");
      return rmm_next::plugin::allocate(st, source::torch, bytes, d, stream);
    }});
  }});
  {P}add(0, o1 - o0); {P}add(7, __rdtsc() - o0);
  return out;''', w)
    return text


def cache(text):
    w = "include/rmm_next/segment_cache_adaptor.hpp"
    C = T + "cache."
    text = replace(text, "#include <cuda.h>  // types only\n",
                   "#include <cuda.h>  // types only\n" + PRELUDE + CACHE_TABLE, w)
    text = replace(text, "  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }\n",
                   "  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }\n"
                   "  [[nodiscard]] std::uint64_t part_timers_released() const noexcept\n"
                   "  {\n    return released_segments_;\n  }\n", w)
    text = replace(text, '''    if (bytes == 0) { return nullptr; }
    cudaStream_t const handle = stream.get();''', '''    if (bytes == 0) { return nullptr; }
    unsigned long long const h0 = __rdtsc();
    cudaStream_t const handle = stream.get();''', w)
    text = replace(text, '''    auto& st = *state_;
    std::lock_guard const lock{st.mutex};
    if (void* ptr = st.take_cached(handle, lane, sizes)) {
      st.release_past_bound_locked(handle, lane);
      return ptr;
    }''', f'''    auto& st = *state_;
    unsigned long long const h1 = __rdtsc();
    std::lock_guard const lock{{st.mutex}};
    unsigned long long const h2 = __rdtsc();
    if (void* ptr = st.take_cached(handle, lane, sizes)) {{
      unsigned long long const h3 = __rdtsc();
      st.release_past_bound_locked(handle, lane);
      {C}add(0, h1 - h0); {C}add(1, h2 - h1); {C}add(2, h3 - h2); {C}add(3, __rdtsc() - h3);
      {C}count(0);
      return ptr;
    }}
    unsigned long long const m1 = __rdtsc();
    {C}add(4, m1 - h0); {C}count(1);''', w)
    text = replace(text, '''    st.trade_idle_for_miss_locked(handle, lane, sizes.segment);
    void* segment = nullptr;
    try {
      segment = detail::stream_allocate(st.upstream(), stream, sizes.segment, default_alignment);''',
                   f'''    st.trade_idle_for_miss_locked(handle, lane, sizes.segment);
    unsigned long long const m2 = __rdtsc();
    {C}add(5, m2 - m1);
    void* segment = nullptr;
    try {{
      segment = detail::stream_allocate(st.upstream(), stream, sizes.segment, default_alignment);
      {C}add(6, __rdtsc() - m2);''', w)
    text = replace(text, '''      void* const ptr = st.take_new_segment(segment, lane, sizes);
      st.release_past_bound_locked(handle, lane);''', f'''      unsigned long long const m3 = __rdtsc();
      void* const ptr = st.take_new_segment(segment, lane, sizes);
      st.release_past_bound_locked(handle, lane);
      {C}add(7, __rdtsc() - m3);''', w)
    text = replace(text, '''    cudaStream_t const handle = stream.get();
    auto& st                  = *state_;
    detail::default_stream_context const in_context{handle, st.device()};''', '''    unsigned long long const f0 = __rdtsc();
    cudaStream_t const handle = stream.get();
    auto& st                  = *state_;
    detail::default_stream_context const in_context{handle, st.device()};''', w)
    text = replace(text, '''      std::lock_guard const lock{st.mutex};
      auto const live = st.find_live(ptr);
      if (live != st.live_end() && !capture.capturing()) {
        st.free_eager(live, handle, lane, detail::is_default_stream(handle));
        return;
      }''', f'''      unsigned long long const f1 = __rdtsc();
      std::lock_guard const lock{{st.mutex}};
      unsigned long long const f2 = __rdtsc();
      auto const live = st.find_live(ptr);
      if (live != st.live_end() && !capture.capturing()) {{
        auto const released = st.part_timers_released();
        st.free_eager(live, handle, lane, detail::is_default_stream(handle));
        unsigned long long const f3 = __rdtsc();
        {C}add(8, f1 - f0); {C}add(9, f2 - f1); {C}count(2);
        if (st.part_timers_released() != released) {{
          {C}add(11, f3 - f2); {C}count(3);
        }} else {{
          {C}add(10, f3 - f2);
        }}
        return;
      }}''', w)
    return text


if len(sys.argv) != 2:
    sys.exit(__doc__)
dest = pathlib.Path(sys.argv[1])
if dest.exists():
    shutil.rmtree(dest)
dest.mkdir(parents=True)
for part in ("CMakeLists.txt", "cmake", "include", "src"):
    source = root / part
    (shutil.copytree if source.is_dir() else shutil.copy)(source, dest / part)
for name, change in (("src/allocator_plugin/allocator_plugin.cpp", plugin),
                     ("include/rmm_next/segment_cache_adaptor.hpp", cache)):
    path = dest / name
    path.write_text(change(path.read_text()))
print(f"part_timers.py: {dest} has the timed copy")
