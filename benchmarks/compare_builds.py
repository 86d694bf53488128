#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Runs the same benchmark programs of two builds in turn and prints their time ratios.

Usage: benchmarks/compare_builds.py BASE_DIR NEW_DIR OUT_DIR [--rounds N] [--program NAME[=REGEX]]...
                                   [--pinned NAME[=REGEX]]... [--cpus LIST] [--seconds S]

BASE_DIR and NEW_DIR hold the *_bench programs of two builds (say, of two commits). Each round
runs each program of BASE and of NEW back to back (the order swapped every other round, so that a
slow period of the machine falls on both), each with --benchmark_filter=REGEX and three repetitions;
JSON results go to OUT_DIR. For every benchmark the report gives the fastest repetition of each
build over all rounds, their ratio NEW / BASE, and the median of the per-round ratios of fastest
repetitions: below 1.00 NEW is faster. The default programs are alloc_free and mixed_pattern.
A --pinned program runs under `taskset -c LIST` (--cpus, default 2-3), both builds on the same
cores: a one-thread benchmark then stays on one pair of cores instead of taking whichever the
scheduler gives it, which otherwise splits its times into two modes from run to run.
A benchmark that reports a `ratio` counter (alloc_free_paired: wrapped pairs over raw pairs,
timed in blocks that alternate inside one process) is compared by that ratio, the median of its
repetitions, instead of by time: the driver's own drift between two processes, tens of percent,
then falls out, and NEW / BASE is the change of the wrapper's cost over the raw call.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run(exe, regex, out, cpus=None):
    cmd = (["taskset", "-c", cpus] if cpus else []) + [
        exe, f"--benchmark_filter={regex}", "--benchmark_repetitions=3",
        "--benchmark_min_time=0.05", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    times, ratios = {}, {}
    with open(out) as f:
        for b in json.load(f)["benchmarks"]:
            if b.get("run_type") != "iteration":
                continue
            name = b["run_name"]
            if "ratio" in b:
                ratios.setdefault(name, []).append(b["ratio"])
            else:
                times[name] = min(times.get(name, float("inf")), b["real_time"])
    times.update({name: statistics.median(r) for name, r in ratios.items()})
    return times, set(ratios)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--program", action="append", default=[])
    parser.add_argument("--pinned", action="append", default=[])
    parser.add_argument("--cpus", default="2-3")
    parser.add_argument("--seconds", type=float, default=0,
                        help="start no round that would end past this many seconds (0: no limit)")
    args = parser.parse_args()
    programs = [(*p.partition("=")[::2], None) for p in args.program]
    programs += [(*p.partition("=")[::2], args.cpus) for p in args.pinned]
    programs = programs or [("alloc_free", "", None), ("mixed_pattern", "", None)]
    os.makedirs(args.out, exist_ok=True)
    fastest = {"base": {}, "new": {}}
    per_round = {}
    kinds = {}  # benchmark -> "ratio" for those compared by their ratio counter
    start = time.monotonic()
    for r in range(args.rounds):
        if args.seconds and r and (time.monotonic() - start) * (r + 1) / r > args.seconds:
            print(f"stopped after {r} rounds: another would pass --seconds {args.seconds}")
            break
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        seen = {}
        for i, (name, regex, cpus) in enumerate(programs):
            for build in order:
                folder = args.base if build == "base" else args.new
                exe = os.path.join(folder, f"{name}_bench")
                out = os.path.join(args.out, f"{build}.{name}.{i}.{r}.json")
                measured, ratio_names = run(exe, regex or ".", out, cpus)
                kinds.update(dict.fromkeys(ratio_names, "ratio"))
                for bench, t in measured.items():
                    seen[(build, bench)] = t
                    best = fastest[build]
                    best[bench] = min(best.get(bench, float("inf")), t)
        for (build, bench), t in seen.items():
            if build == "new" and ("base", bench) in seen:
                per_round.setdefault(bench, []).append(t / seen[("base", bench)])
    print(f"{'benchmark':<60} {'base':>10} {'new':>10} {'new/base':>9} {'median':>7}")
    worst = 0.0
    for bench in sorted(per_round):
        b, n = fastest["base"][bench], fastest["new"][bench]
        ratio = n / b
        worst = max(worst, ratio)
        median = statistics.median(per_round[bench])
        digits = 3 if "ratio" in kinds.get(bench, "") else 1
        print(f"{bench:<60} {b:>10.{digits}f} {n:>10.{digits}f} {ratio:>9.3f} {median:>7.3f}")
    print(f"rounds: {len(next(iter(per_round.values()), []))}; largest new/base of fastest repetitions: {worst:.3f}; "
          f"largest median of rounds: {max(statistics.median(v) for v in per_round.values()):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
