#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Runs the same benchmark programs of two builds in turn and prints their time ratios.

Usage: benchmarks/compare_builds.py BASE_DIR NEW_DIR OUT_DIR [--rounds N] [--program NAME[=REGEX]]...

BASE_DIR and NEW_DIR hold the *_bench programs of two builds (say, of two commits). Each round
runs every program of BASE, then of NEW (the order swapped every other round, so that a slow
period of the machine falls on both), each with --benchmark_filter=REGEX and three repetitions;
JSON results go to OUT_DIR. For every benchmark the report gives the fastest repetition of each
build over all rounds, their ratio NEW / BASE, and the median of the per-round ratios of fastest
repetitions: below 1.00 NEW is faster. The default programs are alloc_free and mixed_pattern.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys


def run(exe, regex, out):
    cmd = [exe, f"--benchmark_filter={regex}", "--benchmark_repetitions=3",
           "--benchmark_min_time=0.05", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    times = {}
    with open(out) as f:
        for b in json.load(f)["benchmarks"]:
            if b.get("run_type") != "iteration":
                continue
            name = b["run_name"]
            times[name] = min(times.get(name, float("inf")), b["real_time"])
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--program", action="append", default=[])
    args = parser.parse_args()
    programs = [p.partition("=") for p in args.program] or [("alloc_free", "", ""),
                                                            ("mixed_pattern", "", "")]
    os.makedirs(args.out, exist_ok=True)
    fastest = {"base": {}, "new": {}}
    per_round = {}
    for r in range(args.rounds):
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        seen = {}
        for build in order:
            folder = args.base if build == "base" else args.new
            for name, _, regex in programs:
                exe = os.path.join(folder, f"{name}_bench")
                out = os.path.join(args.out, f"{build}.{name}.{r}.json")
                for bench, t in run(exe, regex or ".", out).items():
                    seen[(build, bench)] = t
                    best = fastest[build]
                    best[bench] = min(best.get(bench, float("inf")), t)
        for (build, bench), t in seen.items():
            if build == "new" and ("base", bench) in seen:
                per_round.setdefault(bench, []).append(t / seen[("base", bench)])
    print(f"{'benchmark':<60} {'base ns':>10} {'new ns':>10} {'new/base':>9} {'median':>7}")
    worst = 0.0
    for bench in sorted(per_round):
        b, n = fastest["base"][bench], fastest["new"][bench]
        ratio = n / b
        worst = max(worst, ratio)
        median = statistics.median(per_round[bench])
        print(f"{bench:<60} {b:>10.1f} {n:>10.1f} {ratio:>9.3f} {median:>7.3f}")
    print(f"rounds: {args.rounds}; largest new/base of fastest repetitions: {worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
