# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Runs train_steps.py for each model, native and segments in turn (the order swapped every other
round, so that a slow period of the machine falls on both), and reports per model the median of
the paired steps/s ratios (segments / native), whether the losses are identical, and the peak
reserved of each way (the largest over the rounds).

    paired_rounds.py OUT_DIR [--rounds N] [--models suite,gpt2,small] [--steps N] [--seconds S]
                     [--max-idle-mib M] [--max-idle-fraction F] [--pool] [--breakdown K]
                     [--extra-ways floor,timed,stacked]

--extra-ways runs train_steps.py's ways floor, timed and stacked in every round too (after the
pair, in the pair's order), building floor_allocator.cpp and timed_plugin.cpp with nvcc into
OUT_DIR, and
adds a table of their steps/s over native's (the median of paired ratios) and of the timed way's
host time inside rmm-next per step.

--max-idle-mib and --max-idle-fraction set the segment cache's bounds (train_steps.py's options).
--pool also trains each model once on the driver pool alone (train_steps.py's way pool), after
the rounds, and adds its peak reserved: what the memory under the segment cache reserves by itself.

Each round runs every model once each way; --seconds stops before a round that would end past
the limit (judged by the rounds so far), so that a time-boxed run still prints its table.

Writes OUT_DIR/paired_rounds.json (every run) and prints the table.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

here = pathlib.Path(__file__).resolve().parent
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out")
parser.add_argument("--rounds", type=int, default=5)
parser.add_argument("--models", default="suite,gpt2,small")
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--seconds", type=float, default=0,
                    help="start no round that would end past this many seconds (0: no limit)")
parser.add_argument("--max-idle-mib", type=int, default=None)
parser.add_argument("--max-idle-fraction", type=float, default=None)
parser.add_argument("--breakdown", type=int, default=0, metavar="K",
                    help="train_steps.py --breakdown K for every run, and a table of it")
parser.add_argument("--extra-ways", default="",
                    help="also floor, timed and/or stacked in every round (train_steps.py's ways)")
parser.add_argument("--pool", action="store_true",
                    help="also train each model once on the driver pool alone")
args = parser.parse_args()
out = pathlib.Path(args.out)
bounds = [*(["--max-idle-mib", str(args.max_idle_mib)] if args.max_idle_mib is not None else []),
          *(["--max-idle-fraction", str(args.max_idle_fraction)]
            if args.max_idle_fraction is not None else []),
          *(["--breakdown", str(args.breakdown)] if args.breakdown else [])]
out.mkdir(parents=True, exist_ok=True)
extra_ways = [w for w in args.extra_ways.split(",") if w]
libraries = {"floor": "floor_allocator", "timed": "timed_plugin"}
for way in (w for w in extra_ways if w in libraries):
    built = out / f"{libraries[way]}.so"
    if not built.exists():
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC",
                        str(here / f"{libraries[way]}.cpp"), "-o", str(built), "-ldl"], check=True)


def run(model, way):
    library = ["--library", str(out / f"{libraries[way]}.so")] if way in libraries else []
    done = subprocess.run([sys.executable, str(here / "train_steps.py"), model, way,
                           "--steps", str(args.steps), *bounds, *library],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"model": model, "way": way, "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


runs = []
start = time.monotonic()
for r in range(args.rounds):
    if args.seconds and r and (time.monotonic() - start) * (r + 1) / r > args.seconds:
        print(f"stopped after {r} rounds: another would pass --seconds {args.seconds}", flush=True)
        break
    order = ["native", "segments"] if r % 2 == 0 else ["segments", "native"]
    order += extra_ways if r % 2 == 0 else extra_ways[::-1]
    for model in args.models.split(","):
        pair = {way: run(model, way) for way in order}
        runs.append({"model": model, "round": r, **pair})
        print(json.dumps({"model": model, "round": r,
                          **{w: round(p.get("steps_per_second", 0), 2) for w, p in pair.items()}}),
              flush=True)
pool = {}
if args.pool:
    for model in args.models.split(","):
        pool[model] = run(model, "pool")
        print(json.dumps({"model": model, "pool": round(pool[model].get("steps_per_second", 0), 2)}),
              flush=True)
(out / "paired_rounds.json").write_text(json.dumps({"rounds": runs, "pool": pool}) + "\n")
MiB = 1 << 20
print("| model | native steps/s (median) | segments steps/s (median) | median paired ratio | "
      "losses identical | peak reserved native MiB | peak reserved segments MiB |"
      + (" peak reserved, driver pool alone MiB |" if args.pool else ""))
print("|---|---|---|---|---|---|---|" + ("---|" if args.pool else ""))
for model in args.models.split(","):
    rows = [r for r in runs if r["model"] == model and "error" not in r["native"]
            and "error" not in r["segments"]]
    if not rows:
        print(f"| {model} | failed: {[r for r in runs if r['model'] == model][:1]} |")
        continue
    ratio = statistics.median(r["segments"]["steps_per_second"] / r["native"]["steps_per_second"]
                              for r in rows)
    same = all(r["segments"]["losses"] == r["native"]["losses"] for r in rows)
    print(f"| {model} | {statistics.median(r['native']['steps_per_second'] for r in rows):.1f} | "
          f"{statistics.median(r['segments']['steps_per_second'] for r in rows):.1f} | "
          f"{ratio:.3f} | {'yes' if same else 'no'} | "
          f"{max(r['native']['peak_reserved_bytes'] for r in rows) / MiB:.0f} | "
          f"{max(r['segments']['peak_reserved_bytes'] for r in rows) / MiB:.0f} |"
          + (f" {pool[model]['peak_reserved_bytes'] / MiB:.0f} |"
             if "peak_reserved_bytes" in pool.get(model, {}) else " failed |" if args.pool else ""))
if extra_ways:
    print()
    print("| model | way | steps/s (median) | median paired ratio to native | losses identical "
          "| inside rmm-next ms/step, Python thread / others | allocations per step |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        for way in extra_ways:
            rows = [r for r in runs if r["model"] == model and "error" not in r["native"]
                    and "error" not in r[way]]
            if not rows:
                print(f"| {model} | {way} | failed: {[r[way] for r in runs if r['model'] == model][:1]} |")
                continue
            med = statistics.median
            ratio = med(r[way]["steps_per_second"] / r["native"]["steps_per_second"] for r in rows)
            same = all(r[way]["losses"] == r["native"]["losses"] for r in rows)
            inside = allocs = ""
            if way == "timed":
                h = [r[way]["plugin_host"] for r in rows]
                inside = (f"{med(x['python_alloc_ms_per_step'] + x['python_free_ms_per_step'] for x in h):.3f} / "
                          f"{med(x['other_alloc_ms_per_step'] + x['other_free_ms_per_step'] for x in h):.3f}")
                allocs = f"{med(x['python_allocs_per_step'] + x['other_allocs_per_step'] for x in h):.0f}"
            reserved = (f"; peak reserved {max(r[way]['peak_reserved_bytes'] for r in rows) / MiB:.0f} MiB"
                        if all("peak_reserved_bytes" in r[way] for r in rows) else "")
            print(f"| {model} | {way} | {med(r[way]['steps_per_second'] for r in rows):.1f} | "
                  f"{ratio:.3f} | {'yes' if same else 'no'}{reserved} | {inside} | {allocs} |")
if args.breakdown:
    print()
    print("| model | way | steps/s (median) | synced ms/step | GPU busy ms/step |")
    print("|---|---|---|---|---|")
    for model in args.models.split(","):
        for way in ("native", "segments", *extra_ways):
            done = [r[way] for r in runs if r["model"] == model and "breakdown" in r[way]]
            if not done:
                continue
            med = statistics.median
            b = [d["breakdown"] for d in done]
            print(f"| {model} | {way} | {med(d['steps_per_second'] for d in done):.1f} | "
                  f"{med(x['synced_ms_per_step'] for x in b):.2f} | "
                  f"{med(x['gpu_ms_per_step'] for x in b):.2f} |")
