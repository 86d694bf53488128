#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Plots the segment cache's idle, segment and live bytes over replays, from the samples that
replay_bench writes with RMM_NEXT_REPLAY_IDLE_CSV (resource segment_cache_idle16, the default
options, or another segment_cache_idle* resource).

    plot_idle.py OUT.png NAME=SAMPLES.csv [NAME=SAMPLES.csv ...] [--bound MIB]

One panel per replay: live bytes, segment bytes (what the cache holds of the pool) and idle bytes
(segments with no live block) against the frees so far, with the idle bound: the cache's own at
each sample (`idle_bound`, which follows the peak) where the samples have it, else --bound.
Prints, per replay, the largest idle bytes sampled and how many samples were above the bound, and,
where the samples have `unproven_bytes`, how many were above it by more than those (idle segments
no fence proves free yet cannot go back).
"""

import argparse
import csv
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out")
parser.add_argument("samples", nargs="+", help="NAME=FILE")
parser.add_argument("--bound", type=float, default=16.0,
                    help="the idle bound in MiB, for samples without an idle_bound column")
args = parser.parse_args()
MiB = float(1 << 20)
series = []
for item in args.samples:
    name, _, path = item.partition("=")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    columns = {k: [int(r[k]) for r in rows] for k in rows[0]}
    bounds = columns.get("idle_bound", [int(args.bound * MiB)] * len(rows))
    columns["idle_bound"] = bounds
    above = sum(1 for v, b in zip(columns["idle_bytes"], bounds) if v > b)
    line = (f"{name}: {len(rows)} samples, largest idle {max(columns['idle_bytes']) / MiB:.1f} MiB, "
            f"{above} above the idle bound (largest {max(bounds) / MiB:.1f} MiB)")
    if "unproven_bytes" in columns:
        provable = sum(1 for v, u, b in zip(columns["idle_bytes"], columns["unproven_bytes"], bounds)
                       if v - u > b)
        line += f", {provable} above it by more than their unproven bytes"
    print(line)
    series.append((name, columns))
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_idle.py: matplotlib is not installed: no plot", file=sys.stderr)
    sys.exit(2)
fig, axes = plt.subplots(len(series), 1, figsize=(10, 3.2 * len(series)), squeeze=False)
for ax, (name, c) in zip(axes[:, 0], series):
    frees = c["frees"]
    ax.plot(frees, [v / MiB for v in c["segment_bytes"]], label="segment bytes", lw=1)
    ax.plot(frees, [v / MiB for v in c["live_bytes"]], label="live bytes", lw=1)
    ax.plot(frees, [v / MiB for v in c["idle_bytes"]], label="idle bytes", lw=1)
    ax.plot(frees, [v / MiB for v in c["idle_bound"]], color="k", ls="--", lw=0.8,
            label="idle bound")
    ax.set_title(f"segment cache over the replay of {name}")
    ax.set_xlabel("frees")
    ax.set_ylabel("MiB")
    ax.legend(fontsize=7, loc="upper right")
fig.tight_layout()
fig.savefig(args.out, dpi=110)
