#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Turns the JSON output of benchmarks/run_all.sh into docs/benchmarks.md and docs/benchmarks.png.

Usage: benchmarks/bench_report.py --results DIR [--docs DIR] [--overhead-target PERCENT]

DIR holds <name>.json files written by the *_bench programs (--benchmark_out_format=json) and
context.json written by run_all.sh (GPU, driver, CUDA version, date). Values are medians: the
"median" aggregates when the run had repetitions, else the median over the plain runs.
Needs matplotlib for the chart (no network); without it the Markdown is written without the chart
and the script exits 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RESOURCES = ["device", "managed", "pinned"]
WRAPPED = ["resource", "ref", "current"]
UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


# ---- Loading ---------------------------------------------------------------------------------


def name_tokens(run_name: str) -> tuple[str, ...]:
    """'alloc_free/device/raw/256/min_time:0.050/real_time' -> ('alloc_free','device','raw','256')."""
    return tuple(t for t in run_name.split("/") if ":" not in t and t != "real_time")


class Results:
    """Medians of one benchmark program's JSON output, keyed by (name tokens, threads)."""

    def __init__(self, path: Path):
        data = json.loads(path.read_text())
        self.context = data.get("context", {})
        self.rows: dict[tuple, dict] = {}
        self.spread: dict[tuple, dict] = {}  # standard deviation over repetitions, same fields
        self.fastest: dict[tuple, dict] = {}  # the "min" aggregate, where a benchmark asks for it
        self.errors: list[str] = []
        plain = defaultdict(list)
        for b in data.get("benchmarks", []):
            run_name = b.get("run_name", b["name"])
            key = (name_tokens(run_name), int(b.get("threads", 1)))
            if b.get("error_occurred"):
                self.errors.append(f"{b['name']}: {b.get('error_message', '')}")
                continue
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == "median":
                    self.rows[key] = b
                elif b.get("aggregate_name") == "stddev":
                    self.spread[key] = b
                elif b.get("aggregate_name") == "min":
                    self.fastest[key] = b
            else:
                plain[key].append(b)
        for key, runs in plain.items():
            if key in self.rows:
                continue
            merged, spread = {}, {}
            for field, value in runs[0].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values = [r.get(field, value) for r in runs]
                    merged[field] = statistics.median(values)
                    spread[field] = statistics.stdev(values) if len(values) > 1 else 0.0
                else:
                    merged[field] = spread[field] = value
            self.rows[key] = merged
            if len(runs) > 1:
                self.spread[key] = spread

    def get(self, *tokens: str, threads: int = 1) -> dict | None:
        return self.rows.get((tuple(tokens), threads))

    def time_ns(self, *tokens: str, threads: int = 1) -> float | None:
        row = self.get(*tokens, threads=threads)
        if row is None:
            return None
        return float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")]

    def fastest_time_ns(self, *tokens: str, threads: int = 1) -> float | None:
        """The time of the fastest repetition, in ns (None where the run has no "min")."""
        row = self.fastest.get((tuple(tokens), threads))
        if row is None:
            return None
        return float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")]

    def time_spread_ns(self, *tokens: str, threads: int = 1) -> float | None:
        """Standard deviation of the time over repetitions, in ns (None without repetitions)."""
        row = self.spread.get((tuple(tokens), threads))
        if row is None or "real_time" not in row:
            return None
        return float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")]

    def counter(self, name: str, *tokens: str, threads: int = 1) -> float | None:
        row = self.get(*tokens, threads=threads)
        return None if row is None or name not in row else float(row[name])

    def counter_spread(self, name: str, *tokens: str, threads: int = 1) -> float | None:
        row = self.spread.get((tuple(tokens), threads))
        return None if row is None or name not in row else float(row[name])

    def threads_of(self, *prefix: str) -> list[int]:
        """Thread counts of the rows whose name starts with `prefix`."""
        n = len(prefix)
        return sorted({k[1] for k in self.rows if k[0][:n] == tuple(prefix)})


def load(results_dir: Path) -> tuple[dict, dict[str, Results]]:
    context = {}
    ctx_path = results_dir / "context.json"
    if ctx_path.exists():
        context = json.loads(ctx_path.read_text())
    runs = {}
    for path in sorted(results_dir.glob("*.json")):
        if path.name == "context.json":
            continue
        try:
            runs[path.stem] = Results(path)
        except (json.JSONDecodeError, KeyError) as e:
            print(f"warning: skipping {path}: {e}", file=sys.stderr)
    return context, runs


def load_check_rounds(results_dir: Path) -> dict[str, list[Results]]:
    """The short runs of alloc_free and thread_scaling that run_all.sh makes between programs,
    check/<program>.<round>.json, keyed by program."""
    rounds: dict[str, list[Results]] = defaultdict(list)
    for path in sorted((results_dir / "check").glob("*.json")):
        try:
            rounds[path.name.split(".")[0]].append(Results(path))
        except (json.JSONDecodeError, KeyError) as e:
            print(f"warning: skipping {path}: {e}", file=sys.stderr)
    return dict(rounds)


def fastest_over(runs: list[Results], *tokens: str, threads: int = 1) -> float | None:
    """The fastest repetition of a benchmark over several runs of its program."""
    times = [t for t in (r.fastest_time_ns(*tokens, threads=threads) for r in runs) if t is not None]
    return min(times) if times else None


# ---- Formatting --------------------------------------------------------------------------------


def size_label(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def fmt_ratio(ratio: float | None, target: float) -> str:
    if ratio is None:
        return "–"
    text = f"{ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"
    return f"**{text}**" if ratio > 1 + target else text


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def table(header: list[str], rows: list[list[str]], text_columns: int = 2,
          align: list[str] | None = None) -> list[str]:
    align = align or ["l"] * text_columns + ["r"] * (len(header) - text_columns)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def sizes_of(res: Results, family: str, position: int = 3) -> list[int]:
    return sorted({int(k[0][position]) for k in res.rows if k[0] and k[0][0] == family})


# ---- Sections ----------------------------------------------------------------------------------


def intro(title: str, text: str) -> list[str]:
    return [f"## {title}", "", text, ""]


def alloc_free_section(res: Results, target: float, summary: list[str]) -> list[str]:
    out = intro(
        "Allocate + free latency",
        "One `allocate` + `deallocate` pair on one non-blocking stream (the stream is synchronized "
        "every 4096 pairs, for every variant alike). *raw* is `cudaMallocFromPoolAsync` on the "
        "resource's own pool + `cudaFreeAsync`; *resource* calls the resource; *ref* a resource "
        "ref bound to it; *current* `get_current_device_resource_ref()` after setting it to the "
        "resource. Median ns per pair over interleaved repetitions.",
    )
    rows = []
    ratio_rows = []
    worst: tuple[float, str] | None = None
    worst_current: tuple[float, str] | None = None
    over = []
    for r in RESOURCES:
        for size in sizes_of(res, "alloc_free"):
            s = str(size)
            raw = res.time_ns("alloc_free", r, "raw", s)
            if raw is None:
                continue
            times = {v: res.time_ns("alloc_free", r, v, s) for v in WRAPPED}
            rows.append([r, size_label(size), fmt(raw)] + [fmt(times[v]) for v in WRAPPED])
            cells = [fmt_ratio(ratio(times[v], raw), target) for v in WRAPPED]
            paired = {v: res.counter("ratio", "alloc_free_paired", r, v, s) for v in WRAPPED}
            for v in WRAPPED:
                # The verdict uses the paired ratio (raw and wrapped alternate within one run, so
                # both see the same pool state and clocks); separate runs only when it is absent.
                q = paired[v] if paired[v] is not None else ratio(times[v], raw)
                if q is None:
                    continue
                label = f"{r} {v} at {size_label(size)}"
                if v == "current":
                    if worst_current is None or q > worst_current[0]:
                        worst_current = (q, label)
                    continue
                if worst is None or q > worst[0]:
                    worst = (q, label)
                if q > 1 + target:
                    over.append(f"{label} ({(q - 1) * 100:+.1f} %)")
            cells += [fmt_ratio(paired[v], target) for v in WRAPPED]
            ratio_rows.append([r, size_label(size)] + cells)
    out += table(["memory", "size", "raw ns", "resource ns", "ref ns", "current ns"], rows)
    out += [
        "",
        "### Overhead over the raw call",
        "",
        "Ratios of medians, wrapped / raw: first across separate benchmarks (interleaved "
        "repetitions), then the *paired* ratio, where blocks of raw and wrapped pairs alternate "
        "inside one run and the ratio is that of the two medians over blocks. Separate "
        "benchmarks start from different pool states and drift with the machine, so their "
        "ratios swing both ways by tens of percent from run to run; the paired ratio compares "
        "like with like and is what the verdict below uses. "
        f"Bold: above {target * 100:g} %.",
        "",
    ]
    out += table(
        ["memory", "size", "resource", "ref", "current", "paired resource", "paired ref",
         "paired current"],
        ratio_rows,
    )
    out.append("")
    if worst is not None:
        verdict = (
            "Largest overhead of a resource or a ref over the raw call (paired ratio of medians): "
            f"{(worst[0] - 1) * 100:+.1f} % ({worst[1]}); target ≤ {target * 100:g} %: "
            + ("met at every size." if not over else "not met for " + ", ".join(over) + ".")
        )
        out += [verdict, ""]
        summary.append(verdict)
    if worst_current is not None:
        note = (
            "Through `get_current_device_resource_ref()` (a map read and a `cuCtxGetCurrent` per "
            f"pair), the largest overhead is {(worst_current[0] - 1) * 100:+.1f} % "
            f"({worst_current[1]})."
        )
        out += [note, ""]
        summary.append(note)
    return out


def random_section(res: Results) -> list[str]:
    out = intro(
        "Random allocations",
        "RMM's pattern: each step allocates (probability 0.73, size uniform in [1, max]) or frees "
        "a random live allocation, live bytes capped at 64 MiB; 512 allocations, then everything "
        "left is freed. *cuda* is `cudaMalloc` / `cudaMallocManaged` / `cudaMallocHost` with "
        "their frees; *raw pool* `cudaMallocFromPoolAsync` + `cudaFreeAsync` on the resource's "
        "pool; *resource* the rmm-next resource on one stream. Median µs per sequence.",
    )
    rows = []
    for r in RESOURCES:
        for size in sizes_of(res, "random_allocations"):
            s = str(size)
            cuda = res.time_ns("random_allocations", r, "cuda", s)
            pool = res.time_ns("random_allocations", r, "raw_pool", s)
            mine = res.time_ns("random_allocations", r, "resource", s)
            if cuda is None and mine is None:
                continue
            steps = res.counter("steps", "random_allocations", r, "resource", s)
            per_op = None if mine is None or not steps else mine / steps
            speedup = ratio(cuda, mine)
            rows.append([
                r, size_label(size),
                fmt(None if cuda is None else cuda / 1e3),
                fmt(None if pool is None else pool / 1e3),
                fmt(None if mine is None else mine / 1e3),
                fmt(per_op),
                "–" if speedup is None else f"{speedup:,.1f}×",
                fmt_ratio(ratio(mine, pool), float("inf")),
            ])
    out += table(["memory", "max size", "cuda µs", "raw pool µs", "resource µs",
                  "resource ns/op", "speed-up vs cuda", "resource / raw pool"], rows)
    return out + [""]


def thread_section(res: Results, latency: Results | None,
                   rounds: dict[str, list[Results]] | None = None) -> list[str]:
    out = intro(
        "Thread scaling",
        "Alloc+free pairs of 256 B from one shared pool, each thread on its own stream. Total "
        "pairs per second over all threads (millions), median. Every run starts from a trimmed "
        "pool, as the latency runs do.",
    )
    threads = res.threads_of("thread_scaling")
    rows = []
    for r in RESOURCES:
        for v in ["raw", "resource"]:
            cells = []
            for t in threads:
                row = res.get("thread_scaling", r, v, "256", threads=t)
                ips = None if row is None else row.get("items_per_second")
                cells.append(fmt(None if ips is None else ips / 1e6, 3))
            if any(c != "–" for c in cells):
                rows.append([r, v] + cells)
    out += table(["memory", "variant"] + [f"{t} thr" for t in threads], rows)
    out.append("")
    if latency is not None:
        # One thread here runs the loop of alloc_free/<memory>/<variant>/256 (timed_pairs in
        # support/bench_support.hpp): their fastest repetitions must agree.
        check_rows = []
        scaling_rounds = (rounds or {}).get("thread_scaling", [])
        latency_rounds = (rounds or {}).get("alloc_free", [])
        for r in RESOURCES:
            for v in ["raw", "resource"]:
                row = res.get("thread_scaling", r, v, "256", threads=1)
                single = None
                if row is not None and row.get("items_per_second"):
                    single = 1e9 / float(row["items_per_second"])
                lat = latency.time_ns("alloc_free", r, v, "256")
                best_single = fastest_over([res] + scaling_rounds, "thread_scaling", r, v, "256",
                                           threads=1)
                best_lat = fastest_over([latency] + latency_rounds, "alloc_free", r, v, "256")
                if single is None and lat is None:
                    continue
                q = ratio(best_single, best_lat)
                verdict = "–" if q is None else ("agree" if abs(q - 1) <= 0.15 else
                                                 "**differ: rerun or look into it**")
                check_rows.append([r, v, fmt(single), fmt(lat), fmt(best_single), fmt(best_lat),
                                   fmt(q, 3), verdict])
        if check_rows:
            out += [
                "One thread of this benchmark runs the loop of the latency benchmark at 256 B "
                "(one function, `timed_pairs`), so their ns per pair should agree. They are "
                "compared on the fastest repetition of each (within 15 %), not on the medians. "
                "On the GPU machine every driver call that reads a stream's state "
                "(`cudaStreamQuery` as well as the pool calls) runs at one of two speeds, about "
                "twice apart, which holds for tens of milliseconds to minutes and changes with "
                "the period and the core, while CPU-only work keeps its speed. The two programs "
                "run minutes apart, so their medians can come from different speeds; noise only "
                "adds time, so the fastest repetitions of the same loop agree whatever the "
                "period."
                + (f" A period can outlast every repetition of one program, so both loops also "
                   f"ran in short rounds between the other programs ({len(scaling_rounds)} of "
                   f"thread_scaling, {len(latency_rounds)} of alloc_free, spread over the whole "
                   f"run); the fastest columns are over the main run and those rounds."
                   if scaling_rounds or latency_rounds else "")
                + " Medians are the main run's:",
                "",
            ]
            out += table(["memory", "variant", "1 thread ns/pair (median)",
                          "latency table ns (median)", "1 thread, fastest", "latency, fastest",
                          "ratio of the fastest", "check"], check_rows,
                         align=["l", "l", "r", "r", "r", "r", "r", "l"])
            out.append("")
    return out


# ---- Mixed pattern (issue 8) ------------------------------------------------------------------

MIXED_PEERS = [
    ("raw", "raw pool calls"),
    ("async_device_resource", "async_device_resource"),
    ("thread_cache", "thread_cache_adaptor"),
    ("thread_cache_no_capture", "thread_cache_adaptor, detect_capture = false"),
    ("thread_cache_graph_live", "thread_cache_adaptor, one graph allocation alive"),
    ("rmm_arena", "RMM arena"),
    ("rmm_pool", "RMM pool"),
    ("rmm_cuda_async", "RMM cuda_async"),
]
MIXED_LAYOUTS = [
    ("own_stream", "(a) a stream per thread"),
    ("shared_stream", "(b) one stream shared by all threads"),
    ("four_streams", "(c) 4 streams per thread"),
]
MIB = float(1 << 20)


def mixed_ips(res: Results, layout: str, peer: str, threads: int) -> float | None:
    row = res.get("mixed_pattern", layout, peer, threads=threads)
    return None if row is None or "items_per_second" not in row else float(row["items_per_second"])


def mixed_section(res: Results) -> list[str]:
    out = intro(
        "Mixed sizes from several threads (issue 8)",
        "Each thread keeps 64 live blocks of 256 B to 64 KiB (uniform); each iteration frees a "
        "random live block and allocates a new random size in its place, on the stream of that "
        "block; streams are synchronized every 4096 pairs. Same sizes and slots for every peer. "
        "Each thread first runs untimed pairs of the same pattern (warm-up: 4096, and 65536 for "
        "the thread caches and RMM's arena, whose misses are what a warm-up removes), so the "
        "numbers are steady-state throughput. "
        "*raw*: `cudaMallocFromPoolAsync` / `cudaFreeAsync` on the device's current pool; "
        "*async_device_resource* on that pool; *thread_cache_adaptor* over it (default options, "
        "and with `detect_capture = false`); "
        "*RMM arena* and *RMM pool* (initial size 0) over RMM's `cuda_memory_resource`, and *RMM "
        "cuda_async* (its own driver pool): RMM 26.10 in the same program. Each resource is made "
        "once per process; driver pools are trimmed and thread caches flushed before every run. "
        "Total alloc+free pairs per second over all threads (millions), median.",
    )
    threads = res.threads_of("mixed_pattern")
    peers = [(p, label) for p, label in MIXED_PEERS
             if any(res.get("mixed_pattern", l, p, threads=t) for l, _ in MIXED_LAYOUTS
                    for t in threads)]
    for layout, title in MIXED_LAYOUTS:
        rows = []
        for peer, label in peers:
            cells = [fmt(None if (v := mixed_ips(res, layout, peer, t)) is None else v / 1e6, 2)
                     for t in threads]
            if any(c != "–" for c in cells):
                rows.append([label] + cells)
        if rows:
            out += [f"### {title}", ""]
            out += table(["peer"] + [f"{t} thr" for t in threads], rows, text_columns=1)
            out.append("")

    # thread_cache_adaptor against each peer: ratio of pairs per second (> 1: the cache is faster).
    baselines = [(p, label) for p, label in peers
                 if p not in ("thread_cache", "thread_cache_no_capture")]
    ratio_rows = []
    for layout, title in MIXED_LAYOUTS:
        for peer, label in baselines:
            cells = [fmt(ratio(mixed_ips(res, layout, "thread_cache", t),
                               mixed_ips(res, layout, peer, t)), 2) for t in threads]
            if any(c != "–" for c in cells):
                ratio_rows.append([layout, f"÷ {label}"] + cells)
    if ratio_rows:
        out += ["### thread_cache_adaptor ÷ each peer", "",
                "Pairs per second of `thread_cache_adaptor` divided by the peer's, per layout "
                "and thread count: above 1, the thread cache is faster.", ""]
        out += table(["layout", "ratio"] + [f"{t} thr" for t in threads], ratio_rows)
        out.append("")

    hit_cells = []
    for layout, _ in MIXED_LAYOUTS:
        cells = [fmt(None if (h := res.counter("hit_rate", "mixed_pattern", layout,
                                               "thread_cache", threads=t)) is None
                     else h * 100, 1) for t in threads]
        if any(c != "–" for c in cells):
            hit_cells.append([layout, "hit rate %"] + cells)
    if hit_cells:
        out += table(["layout", "thread_cache_adaptor"] + [f"{t} thr" for t in threads],
                     hit_cells)
        out.append("")

    mem_rows = []
    for layout, _ in MIXED_LAYOUTS:
        in_use = []
        for t in threads:
            values = [v for p, _ in peers
                      if (v := res.counter("peak_in_use_bytes", "mixed_pattern", layout, p,
                                           threads=t)) is not None]
            in_use.append(max(values) if values else None)
        if not any(v is not None for v in in_use):
            continue
        mem_rows.append([layout, "in use (the benchmark's blocks)"] +
                        [fmt(None if v is None else v / MIB, 1) for v in in_use])
        for peer, label in peers:
            cells = []
            for t, used in zip(threads, in_use):
                reserved = res.counter("peak_reserved_bytes", "mixed_pattern", layout, peer,
                                       threads=t)
                if reserved is None:
                    cells.append("–")
                    continue
                q = ratio(reserved, used)
                cells.append(f"{reserved / MIB:,.1f}" + ("" if q is None else f" ({q:,.1f}×)"))
            if any(c != "–" for c in cells):
                mem_rows.append([layout, f"reserved: {label}"] + cells)
    if mem_rows:
        out += [
            "### Peak memory",
            "",
            "MiB at the peak of each run. *In use*: what the benchmark's threads held (each "
            "thread's peak, summed). *Reserved*: device memory the peer took from the system "
            "during the run: a driver pool's `ReservedMemHigh` (trimmed before the run); for RMM "
            "arena and pool, what they held from `cudaMalloc` (counted by RMM's "
            "`statistics_resource_adaptor`), which includes what they took in earlier runs and "
            "kept, and for the arena its whole arena (by default half of the free device memory, "
            "taken at construction). In brackets: reserved ÷ in use.",
            "",
        ]
        out += table(["layout", "bytes"] + [f"{t} thr" for t in threads], mem_rows)
        out.append("")
    return out


# ---- Per-device refs ---------------------------------------------------------------------------

PER_CALL = [
    ("get_current_device_resource_ref", "`get_current_device_resource_ref()`"),
    ("mutex_map_get_current", "RMM's way: `cudaGetDevice` + mutex-guarded `std::map`"),
    ("get_per_device_resource_ref", "`get_per_device_resource_ref(device)` (no CUDA call)"),
    ("cudaGetDevice", "`cudaGetDevice`"),
    ("cuCtxGetCurrent", "`cuCtxGetCurrent` (driver)"),
    ("cudaGetDevice_no_context", "`cudaGetDevice` on a thread with no current context"),
]


def per_device_section(res: Results, target_ns: float, summary: list[str]) -> list[str]:
    out = intro(
        "Reading the current resource",
        "Cost of one call on one thread while *n* threads make the same call: each thread "
        "times its own batches of 256 calls (after making the device current and calling once, "
        "as a thread that uses the GPU has done); median over repetitions of the mean over "
        "threads, ns per call. Not Google Benchmark's iteration time, which with *n* threads "
        "is one thread's wall time over the iterations of all threads (1/*n* of a call).",
    )
    threads = res.threads_of("per_call")
    rows = []
    for what, label in PER_CALL:
        cells = []
        for t in threads:
            v = res.counter("ns_per_call", "per_call", what, threads=t)
            sd = res.counter_spread("ns_per_call", "per_call", what, threads=t)
            spread = "" if sd is None else f" ± {sd:.1f}"
            cells.append("–" if v is None else fmt(v, 1) + spread)
        if any(c != "–" for c in cells):
            rows.append([label] + cells)
    if rows:
        out += table(["call"] + [f"{t} thr ns" for t in threads], rows, text_columns=1)
        out.append("")
    current = {t: res.counter("ns_per_call", "per_call", "get_current_device_resource_ref",
                              threads=t) for t in threads}
    checked = {t: v for t, v in current.items() if v is not None and t in (1, max(threads))}
    if checked:
        over = [f"{t} thread{'s' if t > 1 else ''} ({v:.1f} ns)" for t, v in checked.items()
                if v > target_ns]
        verdict = (
            f"`get_current_device_resource_ref()`: "
            + ", ".join(f"{v:.1f} ns at {t} thread{'s' if t > 1 else ''}"
                        for t, v in checked.items())
            + f"; target ≤ {target_ns:g} ns: "
            + ("met." if not over else "not met at " + ", ".join(over) + ".")
        )
        out += [verdict, ""]
        summary.append(verdict)

    map_rows = []
    for t in res.threads_of("map_read"):
        m = res.counter("map_ns_per_read", "map_read", threads=t)
        b = res.counter("mutex_map_ns_per_read", "map_read", threads=t)
        if m is None and b is None:
            continue
        map_rows.append([str(t), fmt(m, 2), fmt(b, 2), fmt(ratio(b, m), 1)])
    if map_rows:
        out += [
            "`per_device_resource_map::get` against a mutex-guarded `std::map` (no CUDA call), "
            "ns per read of one thread, averaged over the threads:",
            "",
        ]
        out += table(["threads", "map ns", "mutex map ns", "mutex map ÷ map"], map_rows,
                     text_columns=1)
        out.append("")
    return out


def sync_section(res: Results) -> list[str]:
    out = intro(
        "allocate_sync",
        "`allocate_sync` + `deallocate_sync` of 64 KiB with the GPU idle, and with a kernel "
        "spinning on another stream (*busy*). *raw* is `cudaMallocFromPoolAsync` + "
        "`cudaStreamSynchronize` on a stream of its own, then `cudaFreeAsync`. Median µs per pair; "
        "*kernel running* is 1 when the kernel was still running when the timed loop ended.",
    )
    rows = []
    for r in RESOURCES:
        for v in ["raw", "resource"]:
            idle = res.time_ns("allocate_sync", r, v, "idle", "65536")
            busy = res.time_ns("allocate_sync", r, v, "busy", "65536")
            if idle is None and busy is None:
                continue
            running = res.counter("kernel_running", "allocate_sync", r, v, "busy", "65536")
            rows.append([
                r, v,
                fmt(None if idle is None else idle / 1e3, 2),
                fmt(None if busy is None else busy / 1e3, 2),
                fmt(ratio(busy, idle), 3),
                "–" if running is None else f"{running:g}",
            ])
    out += table(["memory", "variant", "idle µs", "busy µs", "busy / idle", "kernel running"],
                 rows)
    return out + [""]


def nvtx_section(res: Results, target: float) -> list[str]:
    out = intro(
        "NVTX annotations without a tool",
        "Stream-ordered allocate + deallocate pairs through `async_device_resource`, compiled with "
        "the NVTX ranges and memory regions (the default) and without them "
        "(`RMM_NEXT_DISABLE_NVTX`), in one program, no profiler attached. Blocks of pairs of "
        "each kind alternate inside one run; the ratio is that of the two medians over blocks.",
    )
    rows = []
    for (tokens, threads), row in sorted(res.rows.items()):
        if not tokens or tokens[0] != "nvtx" or len(tokens) < 3:
            continue
        on, off = row.get("on_ns"), row.get("off_ns")
        rows.append([
            tokens[1], size_label(int(tokens[2])), fmt(on), fmt(off),
            fmt(None if on is None or off is None else on - off),
            fmt_ratio(ratio(on, off), target), str(row.get("label", "")) or "–",
        ])
    out += table(["memory", "size", "with NVTX ns", "without ns", "NVTX ns", "ratio", "tool"],
                 rows, align=["l", "l", "r", "r", "r", "r", "l"])
    return out + [""]


# Adaptors whose overhead over their upstream has a target (adaptor_overhead_bench); the others
# report their figure. prefetch_by_hand is the prefetch adaptor against the same prefetch written
# by hand after the upstream's allocation: the adaptor's own cost.
ADAPTOR_TARGETS = {"aligned": 0.05, "limiting": 0.05, "prefetch_by_hand": 0.05}
ADAPTORS = ["statistics", "aligned", "limiting", "tracking", "tracking_stacks", "logging",
            "failure_callback", "prefetch", "prefetch_by_hand"]


def adaptor_section(res: Results, summary: list[str]) -> list[str]:
    out = intro(
        "Adaptor overhead",
        "One stream-ordered allocate + deallocate pair through each adaptor against the same pair "
        "on its upstream (`async_device_resource` on the current pool; `async_managed_resource` "
        "for prefetch), in blocks of 128 pairs that alternate inside one run; medians over blocks, "
        "ns per pair, and the ratio of the two (median over repetitions). *aligned*: 4 KiB alignment from 64 KiB on; *limiting*: a "
        "limit far above use; *tracking_stacks*: with stack traces; *logging*: to a file; "
        "*failure_callback*: never called. *prefetch* includes its `cudaMemPrefetchAsync`; "
        "*prefetch_by_hand* compares it with the upstream pair plus the same prefetch written by "
        "hand. Targets: at most 5 % for aligned, limiting and prefetch (by hand); bold: above it.",
    )
    rows, misses = [], []
    for name in ADAPTORS:
        for bytes_ in sizes_of(res, "adaptor_overhead", 2):
            tokens = ("adaptor_overhead", name, str(bytes_))
            up = res.counter("upstream_ns", *tokens)
            ad = res.counter("adaptor_ns", *tokens)
            if up is None and ad is None:
                continue
            target = ADAPTOR_TARGETS.get(name)
            q = res.counter("ratio", *tokens)  # the paired ratio: median over repetitions
            q = ratio(ad, up) if q is None else q
            cell = fmt_ratio(q, target if target is not None else float("inf"))
            if target is not None and q is not None and q > 1 + target:
                misses.append(f"{name} at {size_label(bytes_)} ({(q - 1) * 100:+.1f} %)")
            rows.append([name, size_label(bytes_), fmt(up), fmt(ad), cell,
                         "≤ 5 %" if target is not None else "–"])
    out += table(["adaptor", "size", "upstream ns", "adaptor ns", "ratio", "target"], rows,
                 align=["l", "l", "r", "r", "r", "l"])
    if rows:
        summary.append("Adaptor overhead, target ≤ 5 % for aligned, limiting and prefetch: " +
                       ("met" if not misses else "not met for " + ", ".join(misses)) + ".")
    return out + [""]


def nccl_section(path: Path) -> list[str]:
    """nccl_allreduce_bench's nccl_allreduce.json: one row per buffer kind and size."""
    data = json.loads(path.read_text())
    ranks = int(data.get("ranks", 1))
    v = int(data.get("nccl_version", 0))  # NCCL_VERSION_CODE: 22809 for 2.28.9
    version = f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else "?"
    out = intro(
        "NCCL all-reduce bus bandwidth",
        f"`benchmarks/nccl_allreduce_bench`, {ranks} {'rank' if ranks == 1 else 'ranks'} (one "
        f"process per GPU), NCCL {version}, on {data.get('device', '?')}: `ncclAllReduce` (float "
        "sum) over `cudaMalloc` buffers, `ncclMemAlloc` buffers registered with "
        "`ncclCommRegister`, and `vmm_resource` buffers registered through `nccl_registered` "
        "(`rmm_next/nccl.hpp`), in one run. Time: the slowest rank's mean over the timed "
        "iterations; algbw = bytes / time; busbw = algbw × 2 (n − 1) / n, as nccl-tests reports "
        "it, which is 0 for one rank (a one-rank all-reduce is a device copy). *wrong*: elements "
        "that differ from the expected sum, counted on the device.",
    )
    rows = [[r["kind"], size_label(int(r["bytes"])), fmt(float(r["time_us"]), 1),
             fmt(float(r["algbw_GBps"]), 1), fmt(float(r["busbw_GBps"]), 1),
             "yes" if r.get("registered") else "no", str(int(r.get("wrong", 0)))]
            for r in data.get("rows", [])]
    out += table(["buffers", "size", "time µs", "algbw GB/s", "busbw GB/s", "registered",
                  "wrong"], rows, align=["l", "r", "r", "r", "r", "l", "r"])
    return out + [""]


def load_replays(replay_dir: Path) -> dict[str, list[tuple[str, dict]]]:
    """run_replay.sh's replay_<trace>_<resource>.json files: trace -> [(resource, run)]."""
    traces: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for path in sorted(replay_dir.glob("replay_*.json")):
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        for b in data.get("benchmarks", []):
            if b.get("error_occurred") or b.get("run_type") == "aggregate":
                continue
            resource = b["name"].split("/")[1]
            trace = path.stem[len("replay_"):-(len(resource) + 1)]
            traces[trace].append((resource, b))
    return traces


def replay_ms(run: dict) -> float:
    return float(run["real_time"]) * UNIT_NS[run.get("time_unit", "ns")] / 1e6


def replay_section(traces: dict[str, list[tuple[str, dict]]], has_chart: bool) -> list[str]:
    out = intro(
        "Replay of recorded traces",
        "Allocation logs recorded through the plugin (`rmm_next.configure(log=...)`, "
        "`benchmarks/replay/record_traces.sh`; the traces are in `benchmarks/replay/traces/`) "
        "and replayed by `benchmarks/replay/run_replay.sh` in log order: every event waits for "
        "the one before it, so each resource goes through the states of the logged program. "
        "Time: the wall time of the replay. Peak reserved: what the resource held from the "
        "system (driver pools: `ReservedMemHigh`; RMM's pool and arena: bytes they took from "
        "`cuda_memory_resource`); its ratio to the peak in use is the fragmentation. RMM's arena "
        "takes its whole arena up front, so its peak reserved is the arena's size.",
    )
    if has_chart:
        out += ["![replay time and peak reserved per resource](replay.png)", ""]
    for trace, rows_in in traces.items():
        rows = [[resource, fmt(replay_ms(b), 1), fmt(b.get("peak_in_use_bytes", 0) / MIB, 1),
                 fmt(b.get("peak_reserved_bytes", 0) / MIB, 1), fmt(b.get("fragmentation"), 3)]
                for resource, b in rows_in]
        events = int(rows_in[0][1].get("events", 0)) if rows_in else 0
        out += [f"### {trace} ({events:,} events)", ""]
        out += table(["resource", "time ms", "peak in use MiB", "peak reserved MiB",
                      "reserved / in use"], rows, text_columns=1)
        out.append("")
    return out


def replay_chart(traces: dict[str, list[tuple[str, dict]]], path: Path) -> bool:
    """Two panels per trace: replay time, and peak reserved (log scale) against peak in use."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not traces:
        return False
    fig, axes = plt.subplots(len(traces), 2, figsize=(14, 3.8 * len(traces)), squeeze=False)
    for row, (trace, runs) in enumerate(traces.items()):
        names = [r for r, _ in runs]
        x = range(len(names))
        ax = axes[row][0]
        ax.bar(x, [replay_ms(b) for _, b in runs], color="tab:blue")
        ax.set_title(f"{trace}: replay time (lower is better)", fontsize=10)
        ax.set_ylabel("ms")
        ax = axes[row][1]
        ax.bar(x, [b.get("peak_reserved_bytes", 0) / MIB for _, b in runs], color="tab:orange",
               label="peak reserved")
        in_use = runs[0][1].get("peak_in_use_bytes", 0) / MIB
        ax.axhline(in_use, color="black", linestyle="--", linewidth=1, label="peak in use")
        ax.set_yscale("log")
        ax.set_title(f"{trace}: peak reserved", fontsize=10)
        ax.set_ylabel("MiB (log)")
        ax.legend(fontsize=8)
        for a in axes[row]:
            a.set_xticks(list(x))
            a.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


STANDARD_FIELDS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "items_per_second", "bytes_per_second", "error_occurred",
    "error_message", "label",
}


def generic_section(title: str, res: Results) -> list[str]:
    out = [f"## {title}", "",
           "Medians; time per iteration of one thread (Google Benchmark's time × threads), "
           "counters as the program set them.", ""]
    rows = []
    for (tokens, threads), row in sorted(res.rows.items()):
        ips = row.get("items_per_second")
        counters = ", ".join(
            f"{k} {v:,.3g}" for k, v in row.items()
            if k not in STANDARD_FIELDS and isinstance(v, (int, float)) and not isinstance(v, bool)
        )
        rows.append([
            "/".join(tokens), str(threads),
            fmt(float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")] * threads, 1),
            fmt(None if ips is None else ips / 1e6, 3),
            counters or "–",
        ])
    out += table(["benchmark", "threads", "ns per thread", "M items/s", "counters"], rows,
                 align=["l", "r", "r", "r", "l"])
    return out + [""]


# ---- Chart -------------------------------------------------------------------------------------


def chart(runs: dict[str, Results], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("warning: matplotlib is not installed; no chart written", file=sys.stderr)
        return False

    mixed = runs.get("mixed_pattern_rmm") or runs.get("mixed_pattern")
    # Two rows of two panels (latency, scaling, random, sync) when any of them ran, then the
    # mixed-pattern row of three.
    top = 2 if any(n in runs for n in ("alloc_free", "thread_scaling", "random_allocations",
                                         "allocate_sync")) else 0
    rows = top + (1 if mixed is not None else 0)
    if rows == 0:
        return False
    fig = plt.figure(figsize=(16, 4.6 * rows))
    grid = fig.add_gridspec(rows, 6)
    axes = [[fig.add_subplot(grid[r, 0:3]), fig.add_subplot(grid[r, 3:6])] for r in range(top)]
    fig.suptitle(title, fontsize=11)
    colors = {"device": "tab:blue", "managed": "tab:orange", "pinned": "tab:green"}

    def grouped_bars(ax, groups, series, value, ticks, title, ylabel, log=False):
        """One bar per (group, series); value(group, series) -> height or None."""
        width = 0.8 / len(series)
        for i, name in enumerate(series):
            ys = [value(g, name) or 0 for g in groups]
            ax.bar([x + i * width for x in range(len(groups))], ys, width, label=name)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))])
        ax.set_xticklabels(ticks, fontsize=8)
        if log:
            ax.set_yscale("log")
            ax.set_ylim(top=ax.get_ylim()[1] * 10)  # room for the legend
        else:
            ax.set_ylim(top=ax.get_ylim()[1] * 1.2)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8, ncol=len(series), framealpha=0.9)

    def scaled(value, factor):
        return None if value is None else value / factor

    if top:
        # Latency: medians with the spread of the repetitions, on an axis that starts near the data
        # (a zero-based axis hides the few-percent differences this panel is about).
        ax = axes[0][0]
        res = runs.get("alloc_free")
        if res is not None:
            groups = [(r, s) for r in RESOURCES for s in sizes_of(res, "alloc_free")
                      if res.time_ns("alloc_free", r, "raw", str(s)) is not None]
            variants = ["raw"] + WRAPPED
            markers = {"raw": "s", "resource": "o", "ref": "^", "current": "D"}
            width = 0.8 / len(variants)
            for i, v in enumerate(variants):
                xs, ys, errs = [], [], []
                for x, (r, s) in enumerate(groups):
                    y = res.time_ns("alloc_free", r, v, str(s))
                    if y is None:
                        continue
                    xs.append(x - 0.4 + width * (i + 0.5))
                    ys.append(y)
                    errs.append(res.time_spread_ns("alloc_free", r, v, str(s)) or 0.0)
                ax.errorbar(xs, ys, yerr=errs, fmt=markers[v], capsize=3, markersize=5,
                            label=v if v != "raw" else "raw (pool calls)",
                            mfc="none" if v == "raw" else None)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{r}\n{size_label(s)}" for r, s in groups], fontsize=8)
            for x in range(1, len(groups)):
                ax.axvline(x - 0.5, color="0.85", linewidth=0.8)
            ax.set_ylabel("ns per alloc+free (median ± sd)")
            ax.set_title("Allocate + free latency (axis not from zero)")
            ax.grid(axis="y", color="0.9")
            ax.legend(fontsize=8, ncol=4, framealpha=0.9)
        else:
            ax.set_visible(False)

        ax = axes[0][1]
        res = runs.get("thread_scaling")
        if res is not None:
            threads = res.threads_of("thread_scaling")
            styles = {"raw": ("--", "s", "none", "raw pool calls"),
                      "resource": ("-", "o", None, "rmm-next resource")}
            for r in RESOURCES:
                for v, (line, marker, face, label) in styles.items():
                    ys = []
                    for t in threads:
                        row = res.get("thread_scaling", r, v, "256", threads=t)
                        ips = None if row is None else row.get("items_per_second")
                        ys.append(float("nan") if ips is None else ips / 1e6)
                    if any(y == y for y in ys):
                        ax.plot(threads, ys, linestyle=line, marker=marker, mfc=face,
                                color=colors[r], label=f"{r}: {label}")
            ax.set_xscale("log", base=2)
            ax.set_xticks(threads)
            ax.set_xticklabels([str(t) for t in threads])
            ax.set_xlabel("threads")
            ax.set_ylabel("M pairs/s, all threads")
            ax.set_title("Thread scaling (256 B; dashed, hollow: raw)")
            ax.legend(fontsize=7, handlelength=3.5)
        else:
            ax.set_visible(False)

        res_random = runs.get("random_allocations")
        if res_random is not None:
            groups = [(r, s) for r in RESOURCES for s in sizes_of(res_random, "random_allocations")
                      if res_random.get("random_allocations", r, "resource", str(s)) is not None]
            grouped_bars(axes[1][0], groups, ["cuda", "raw_pool", "resource"],
                         lambda g, v: scaled(
                             res_random.time_ns("random_allocations", g[0], v, str(g[1])), 1e3),
                         [f"{r}\n≤{size_label(s)}" for r, s in groups],
                         "Random allocations", "µs per sequence (median, log)", log=True)
        else:
            axes[1][0].set_visible(False)

        res_sync = runs.get("allocate_sync")
        if res_sync is not None:
            groups = [(r, v) for r in RESOURCES for v in ["raw", "resource"]
                      if res_sync.get("allocate_sync", r, v, "idle", "65536") is not None]
            grouped_bars(axes[1][1], groups, ["idle", "busy"],
                         lambda g, load: scaled(
                             res_sync.time_ns("allocate_sync", g[0], g[1], load, "65536"), 1e3),
                         [f"{r}\n{v}" for r, v in groups],
                         "allocate_sync, GPU idle vs busy", "µs per pair (median)")
        else:
            axes[1][1].set_visible(False)

    if mixed is not None:
        threads = mixed.threads_of("mixed_pattern")
        styles = {"raw": ("tab:gray", "s", "--"), "async_device_resource": ("tab:blue", "o", "-"),
                  "thread_cache": ("tab:red", "*", "-"),
                  "thread_cache_no_capture": ("tab:orange", "P", "-."),
                  "thread_cache_graph_live": ("tab:pink", "X", "--"),
                  "rmm_arena": ("tab:green", "^", ":"),
                  "rmm_pool": ("tab:purple", "v", ":"), "rmm_cuda_async": ("tab:brown", "D", ":")}
        shared_ax = None
        for i, (layout, layout_title) in enumerate(MIXED_LAYOUTS):
            ax = fig.add_subplot(grid[top, 2 * i:2 * i + 2], sharey=shared_ax)
            shared_ax = shared_ax or ax
            for peer, label in MIXED_PEERS:
                ys, errs = [], []
                for t in threads:
                    ips = mixed_ips(mixed, layout, peer, t)
                    sd = mixed.counter_spread("items_per_second", "mixed_pattern", layout, peer,
                                              threads=t)
                    ys.append(float("nan") if ips is None else ips / 1e6)
                    errs.append(0.0 if sd is None else sd / 1e6)
                if all(y != y for y in ys):
                    continue
                color, marker, line = styles[peer]
                ax.errorbar(threads, ys, yerr=errs, color=color, marker=marker, linestyle=line,
                            capsize=2, label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(threads)
            ax.set_xticklabels([str(t) for t in threads])
            ax.set_xlabel("threads")
            if i == 0:
                ax.set_ylabel("M pairs/s, all threads (log)")
            ax.set_title(f"Mixed 256 B–64 KiB: {layout_title}", fontsize=10)
            ax.grid(which="both", color="0.92")
            ax.legend(fontsize=7, handlelength=3)

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# How to rerun: kept in every generated benchmarks.md.
REPRODUCING = [
    "## Reproducing",
    "",
    "On the GPU machine, from the repository root. Google Benchmark must be a Release build "
    "(Debian's `libbenchmark-dev` is built without `NDEBUG` and reports itself as *debug*; "
    "`run_all.sh` refuses its results unless `RMM_NEXT_BENCH_ALLOW_DEBUG=1`). RMM 26.10 comes "
    "from its PyPI wheels. Both scripts need the network once; without it on the GPU machine, "
    "run them on another x86_64 Linux machine and carry the two folders over (they hold no "
    "absolute path).",
    "",
    "```sh",
    "benchmarks/build_google_benchmark.sh ../gbench-release   # Release libbenchmark",
    "benchmarks/fetch_rmm.sh ../rmm-wheels                    # librmm-cu13 + rapids-logger",
    "cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DRMM_NEXT_BUILD_TESTS=OFF \\",
    "  -DRMM_NEXT_BUILD_EXAMPLES=OFF -Dbenchmark_DIR=$PWD/../gbench-release/lib/cmake/benchmark \\",
    "  -DRMM_NEXT_RMM_ROOT=$PWD/../rmm-wheels",
    "cmake --build build/bench -j",
    "benchmarks/run_all.sh build/bench/benchmarks bench-results",
    "# the replays and the fragmentation study (PyTorch and CuPy; the plugin built, e.g. by a",
    "# build with RMM_NEXT_BUILD_TESTS=ON), then one report of everything:",
    "export RMM_NEXT_ALLOCATOR_LIBRARY=$PWD/build/<dir>/src/allocator_plugin/librmm_next_allocator.so",
    "for t in benchmarks/replay/traces/*.csv.gz; do",
    "  benchmarks/replay/run_replay.sh build/bench/benchmarks $t replay-results; done",
    "python3 benchmarks/python/fragmentation.py fragmentation-results",
    "python3 benchmarks/bench_report.py --results bench-results --replay replay-results \\",
    "  --fragmentation fragmentation-results/fragmentation.md",
    "```",
    "",
    "Without `RMM_NEXT_RMM_ROOT`, `mixed_pattern_bench` runs without the RMM peers. The build "
    "copies `libbenchmark.so`, `librmm.so` and `librapids_logger.so` next to the programs, "
    "which find them through `$ORIGIN`.",
    "",
]


# ---- Main --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True,
                        help="directory with <name>.json and context.json")
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parent.parent / "docs",
                        help="where benchmarks.md and benchmarks.png go (default: docs/)")
    parser.add_argument("--overhead-target", type=float, default=3.0,
                        help="overhead over the raw call, in percent, marked in the tables")
    parser.add_argument("--current-ref-target", type=float, default=15.0,
                        help="ns per get_current_device_resource_ref() call, at 1 and 16 threads")
    parser.add_argument("--replay", type=Path, default=None,
                        help="a directory of run_replay.sh output (replay_<trace>_<resource>.json)")
    parser.add_argument("--nccl", type=Path, default=None,
                        help="the nccl_allreduce.json of benchmarks/nccl_allreduce_bench")
    parser.add_argument("--fragmentation", type=Path, default=None,
                        help="the fragmentation.md of benchmarks/python/fragmentation.py")
    args = parser.parse_args()

    context, runs = load(args.results)
    if not runs:
        print(f"error: no benchmark JSON in {args.results}", file=sys.stderr)
        return 1
    gb_context = next(iter(runs.values())).context
    target = args.overhead_target / 100.0
    debug_builds = sorted(name for name, res in runs.items()
                          if res.context.get("library_build_type") == "debug")

    gpu = context.get("gpu_name") or gb_context.get("gpu_name", "unknown GPU")
    driver = context.get("driver_version", "unknown")
    cuda = context.get("cuda_version") or gb_context.get("cuda_runtime_version", "unknown")
    date = context.get("date") or gb_context.get("date", "unknown date")
    title = f"rmm-next benchmarks — {gpu}, driver {driver}, CUDA {cuda}, {date}"

    md = [
        "# Benchmarks",
        "",
        "<!-- Generated by benchmarks/bench_report.py from the output of benchmarks/run_all.sh. "
        "Do not edit by hand: rerun the benchmarks on a GPU and regenerate. -->",
        "",
        "What rmm-next costs next to the raw CUDA calls it wraps.",
        "",
        "| | |",
        "| --- | --- |",
        f"| GPU | {gpu} (compute capability {gb_context.get('gpu_compute_capability', '?')}) |",
        f"| driver | {driver} (CUDA driver API {gb_context.get('cuda_driver_api_version', '?')}) |",
        f"| CUDA | {cuda} (runtime {gb_context.get('cuda_runtime_version', '?')}) |",
        f"| date | {date} |",
        f"| host | {gb_context.get('num_cpus', '?')} CPUs at "
        f"{gb_context.get('mhz_per_cpu', '?')} MHz; Google Benchmark "
        f"{gb_context.get('library_build_type', '?')} build |",
        f"| method | {context.get('repetitions', '?')} repetitions"
        + (f" ({context['check_repetitions']} for the latency and thread-scaling tables)"
           if context.get("check_repetitions", context.get("repetitions")) != context.get("repetitions")
           else "")
        + ", random interleaving, "
        f"min time {context.get('min_time', '?')} s per repetition; medians |",
    ]
    if context.get("git_commit"):
        md.append(f"| commit | `{context['git_commit']}` |")
    # Results put together from several recorded runs say which section came from which.
    for run in context.get("runs", []):
        md.append(f"| run | {run} |")
    md.append("")
    if debug_builds:
        md += [
            "**Warning: made with a debug build of Google Benchmark (" + ", ".join(debug_builds)
            + "): its assertions ran during the measurements. Build a Release one with "
            "`benchmarks/build_google_benchmark.sh` and rerun.**",
            "",
        ]

    summary: list[str] = []
    body: list[str] = []
    if "alloc_free" in runs:
        body += alloc_free_section(runs["alloc_free"], target, summary)
    if "random_allocations" in runs:
        body += random_section(runs["random_allocations"])
    if "thread_scaling" in runs:
        body += thread_section(runs["thread_scaling"], runs.get("alloc_free"),
                               load_check_rounds(args.results))
    # mixed_pattern_rmm_bench runs every peer of mixed_pattern_bench too, in the same program.
    mixed_name = "mixed_pattern_rmm" if "mixed_pattern_rmm" in runs else "mixed_pattern"
    if mixed_name in runs:
        body += mixed_section(runs[mixed_name])
    if "allocate_sync" in runs:
        body += sync_section(runs["allocate_sync"])
    if "nvtx" in runs:
        body += nvtx_section(runs["nvtx"], target)
    if "per_device_resource_map" in runs:
        body += per_device_section(runs["per_device_resource_map"], args.current_ref_target,
                                   summary)
    if "adaptor_overhead" in runs:
        body += adaptor_section(runs["adaptor_overhead"], summary)
    known = {"adaptor_overhead", "alloc_free", "random_allocations", "thread_scaling", "allocate_sync", "nvtx",
             "mixed_pattern", "mixed_pattern_rmm", "per_device_resource_map"}
    for name, res in runs.items():
        if name not in known:
            body += generic_section(name.replace("_", " ").capitalize(), res)

    if args.replay is not None:
        traces = load_replays(args.replay)
        args.docs.mkdir(parents=True, exist_ok=True)
        body += replay_section(traces, replay_chart(traces, args.docs / "replay.png"))
    if args.nccl is not None:
        body += nccl_section(args.nccl)
    if args.fragmentation is not None:
        body += intro(
            "Fragmentation under PyTorch training",
            "`benchmarks/python/fragmentation.py`: the same training steps (batches and sequence "
            "lengths that vary from step to step) under each allocator, each in its own process; "
            "peak bytes reserved (PyTorch: `max_memory_reserved`; rmm-next: the pool's "
            "`ReservedMemHigh`) against each way's own peak in use and against the native "
            "allocator's.",
        )
        body += [line for line in args.fragmentation.read_text().splitlines()
                 if line.startswith("|")] + [""]
    errors = [e for res in runs.values() for e in res.errors]
    args.docs.mkdir(parents=True, exist_ok=True)
    has_chart = chart(runs, args.docs / "benchmarks.png", title)
    if summary:
        for line in summary:
            md += ["**" + line + "**", ""]
    if has_chart:
        md += ["![rmm-next benchmark results](benchmarks.png)", ""]
    md += body
    if errors:
        md += ["## Benchmarks that reported errors", ""] + [f"- {e}" for e in errors] + [""]
    md += REPRODUCING
    (args.docs / "benchmarks.md").write_text("\n".join(md))
    print(f"wrote {args.docs / 'benchmarks.md'}" + (" and benchmarks.png" if has_chart else ""))
    return 0 if has_chart else 2


if __name__ == "__main__":
    sys.exit(main())
