#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The segment cache's default idle bound on the committed traces (benchmarks/replay/traces), on
the CPU through benchmarks' segment_cache_sim: against max_idle_bytes alone (max_idle_fraction 0)
it takes no more segments from the upstream on any trace, and a quarter fewer over all of them,
and holds at most 7 % more at its peak (the CuPy trace comes closest, 6 %). With either, the idle
bytes are within the idle bound after every event of every trace (the simulated upstream has no
fences to wait for: every idle segment can go back).

    segment_cache_sim_test.py SIM TRACES_DIR
"""

import gzip
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

sim, traces = sys.argv[1], pathlib.Path(sys.argv[2])
pattern = re.compile(r"misses (\d+), segments given back (\d+); peak held ([\d.]+) MiB")
past_bound = re.compile(r"idle bytes past the idle bound after (\d+) of (\d+) events")
failures = []
checked = 0
total = {"default": 0, "bytes only": 0}
with tempfile.TemporaryDirectory() as tmp:
    for trace in sorted(traces.glob("*.csv.gz")):
        log = pathlib.Path(tmp) / trace.name[: -len(".gz")]
        with gzip.open(trace, "rb") as source, open(log, "wb") as target:
            shutil.copyfileobj(source, target)
        runs = {}
        for label, args in (("default", []), ("bytes only", ["16", "0"])):
            out = subprocess.run([sim, str(log), *args], capture_output=True, text=True, check=True)
            m = pattern.search(out.stdout)
            if m is None:
                failures.append(f"{trace.name}: unreadable output {out.stdout!r}")
                break
            runs[label] = (int(m.group(1)), float(m.group(3)))
            past = past_bound.search(out.stdout)
            if past is None or int(past.group(1)) != 0:
                failures.append(f"{trace.name} {label}: the idle bound did not hold: "
                                f"{past.group(0) if past else 'no count printed'}")
            print(f"{trace.name} {label}: {out.stdout.strip()}")
        else:
            (misses, held), (misses0, held0) = runs["default"], runs["bytes only"]
            total["default"] += misses
            total["bytes only"] += misses0
            if misses > misses0:
                failures.append(f"{trace.name}: {misses} misses by default, {misses0} without "
                                "the fraction")
            if held > 1.07 * held0:
                failures.append(f"{trace.name}: {held} MiB held at the peak by default, {held0} "
                                "without the fraction")
            checked += 1
        log.unlink()
if checked and total["default"] > 0.75 * total["bytes only"]:
    failures.append(f"{total['default']} misses over every trace by default, "
                    f"{total['bytes only']} without the fraction: not a quarter fewer")
for f in failures:
    print("FAIL", f)
print(f"{checked} traces checked, {len(failures)} failures")
sys.exit(1 if failures or checked == 0 else 0)
