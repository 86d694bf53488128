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
            else:
                plain[key].append(b)
        for key, runs in plain.items():
            if key in self.rows:
                continue
            merged = {}
            for field, value in runs[0].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    merged[field] = statistics.median(r.get(field, value) for r in runs)
                else:
                    merged[field] = value
            self.rows[key] = merged

    def get(self, *tokens: str, threads: int = 1) -> dict | None:
        return self.rows.get((tuple(tokens), threads))

    def time_ns(self, *tokens: str, threads: int = 1) -> float | None:
        row = self.get(*tokens, threads=threads)
        if row is None:
            return None
        return float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")]

    def counter(self, name: str, *tokens: str, threads: int = 1) -> float | None:
        row = self.get(*tokens, threads=threads)
        return None if row is None or name not in row else float(row[name])


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
            "Through `get_current_device_resource_ref()` (a map read and a `cudaGetDevice` per "
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


def thread_section(res: Results) -> list[str]:
    out = intro(
        "Thread scaling",
        "Alloc+free pairs of 256 B from one shared pool, each thread on its own stream. Total "
        "pairs per second over all threads (millions), median.",
    )
    threads = sorted({k[1] for k in res.rows if k[0] and k[0][0] == "thread_scaling"})
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
    return out + [""]


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


STANDARD_FIELDS = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "items_per_second", "bytes_per_second", "error_occurred",
    "error_message", "label",
}


def generic_section(title: str, res: Results) -> list[str]:
    out = [f"## {title}", "", "Medians; time per iteration, counters as the program set them.", ""]
    rows = []
    for (tokens, threads), row in sorted(res.rows.items()):
        ips = row.get("items_per_second")
        counters = ", ".join(
            f"{k} {v:,.3g}" for k, v in row.items()
            if k not in STANDARD_FIELDS and isinstance(v, (int, float)) and not isinstance(v, bool)
        )
        rows.append([
            "/".join(tokens), str(threads),
            fmt(float(row["real_time"]) * UNIT_NS[row.get("time_unit", "ns")], 1),
            fmt(None if ips is None else ips / 1e6, 3),
            counters or "–",
        ])
    out += table(["benchmark", "threads", "ns", "M items/s", "counters"], rows,
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

    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    fig.suptitle(title, fontsize=11)

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

    res = runs.get("alloc_free")
    if res is not None:
        groups = [(r, s) for r in RESOURCES for s in sizes_of(res, "alloc_free")
                  if res.time_ns("alloc_free", r, "raw", str(s)) is not None]
        grouped_bars(axes[0][0], groups, ["raw"] + WRAPPED,
                     lambda g, v: res.time_ns("alloc_free", g[0], v, str(g[1])),
                     [f"{r}\n{size_label(s)}" for r, s in groups],
                     "Allocate + free latency", "ns per alloc+free (median)")
    else:
        axes[0][0].set_visible(False)

    ax = axes[0][1]
    res = runs.get("thread_scaling")
    if res is not None:
        threads = sorted({k[1] for k in res.rows if k[0] and k[0][0] == "thread_scaling"})
        for r, color in zip(RESOURCES, ["tab:blue", "tab:orange", "tab:green"]):
            for v, style in [("raw", "--"), ("resource", "-")]:
                ys = []
                for t in threads:
                    row = res.get("thread_scaling", r, v, "256", threads=t)
                    ys.append(None if row is None else row.get("items_per_second", 0) / 1e6)
                if any(y is not None for y in ys):
                    ax.plot(threads, [y or 0 for y in ys], style, color=color, marker="o",
                            label=f"{r} {v}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.set_xlabel("threads")
        ax.set_ylabel("M pairs/s, all threads")
        ax.set_title("Thread scaling (256 B)")
        ax.legend(fontsize=7)
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

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---- Main --------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True,
                        help="directory with <name>.json and context.json")
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parent.parent / "docs",
                        help="where benchmarks.md and benchmarks.png go (default: docs/)")
    parser.add_argument("--overhead-target", type=float, default=3.0,
                        help="overhead over the raw call, in percent, marked in the tables")
    args = parser.parse_args()

    context, runs = load(args.results)
    if not runs:
        print(f"error: no benchmark JSON in {args.results}", file=sys.stderr)
        return 1
    gb_context = next(iter(runs.values())).context
    target = args.overhead_target / 100.0

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
        f"| method | {context.get('repetitions', '?')} repetitions, random interleaving, "
        f"min time {context.get('min_time', '?')} s per repetition; medians |",
    ]
    if context.get("git_commit"):
        md.append(f"| commit | `{context['git_commit']}` |")
    md.append("")

    summary: list[str] = []
    body: list[str] = []
    if "alloc_free" in runs:
        body += alloc_free_section(runs["alloc_free"], target, summary)
    if "random_allocations" in runs:
        body += random_section(runs["random_allocations"])
    if "thread_scaling" in runs:
        body += thread_section(runs["thread_scaling"])
    if "allocate_sync" in runs:
        body += sync_section(runs["allocate_sync"])
    if "nvtx" in runs:
        body += nvtx_section(runs["nvtx"], target)
    known = {"alloc_free", "random_allocations", "thread_scaling", "allocate_sync", "nvtx"}
    for name, res in runs.items():
        if name not in known:
            body += generic_section(name.replace("_", " ").capitalize(), res)

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
    md += [
        "## Reproducing",
        "",
        "```sh",
        "cmake --preset default && cmake --build build/default",
        "benchmarks/run_all.sh build/default/benchmarks bench-results",
        "```",
        "",
    ]
    (args.docs / "benchmarks.md").write_text("\n".join(md))
    print(f"wrote {args.docs / 'benchmarks.md'}" + (" and benchmarks.png" if has_chart else ""))
    return 0 if has_chart else 2


if __name__ == "__main__":
    sys.exit(main())
