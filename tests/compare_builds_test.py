# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/compare_builds.py on made-up benchmark programs.

A paired benchmark is compared by its `ratio` counter, whatever its time; a timed one by its
fastest repetition; a --pinned program runs on the cores --cpus names; --seconds stops before a
round that would pass it."""

import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAKE = '''#!{python}
import json, os, sys
out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark_out=")][0]
cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
runs = []
for rep, wobble in enumerate((1.0, 1.5, 0.9)):
    runs.append({{"run_name": "paired/x", "run_type": "iteration", "real_time": {time} * wobble,
                 "ratio": {ratio} * (1.0 + 0.01 * rep)}})
    runs.append({{"run_name": "timed/cpus:" + cpus, "run_type": "iteration",
                 "real_time": {time} * wobble}})
json.dump({{"benchmarks": runs}}, open(out, "w"))
'''


def fake(folder, ratio, time):
    folder.mkdir()
    exe = folder / "alloc_free_bench"
    exe.write_text(FAKE.format(python=sys.executable, ratio=ratio, time=time))
    exe.chmod(0o755)


def compare(tmp, *extra):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compare_builds.py"),
                           str(tmp / "base"), str(tmp / "new"), str(tmp / "out"), *extra],
                          capture_output=True, text=True, check=True)
    return done.stdout


def row(report, name):
    line = next(l for l in report.splitlines() if l.startswith(name))
    return [float(v) for v in line.split()[1:]]


failures = []
with tempfile.TemporaryDirectory() as d:
    tmp = pathlib.Path(d)
    fake(tmp / "base", ratio=1.04, time=800.0)
    fake(tmp / "new", ratio=1.02, time=400.0)  # twice as fast a driver, a cheaper wrapper
    cpu = str(min(os.sched_getaffinity(0)))
    report = compare(tmp, "--rounds", "3", "--pinned", "alloc_free=.", "--cpus", cpu)
    base, new, ratio, median = row(report, "paired/x")
    # the median of each run's repetitions (1.0, 1.01, 1.02 times the counter), not the time
    if abs(base - 1.04 * 1.01) > 1e-3 or abs(new - 1.02 * 1.01) > 1e-3:
        failures.append(f"paired/x compared by {base} and {new}, not by its ratio counter")
    if abs(median - 1.02 / 1.04) > 1e-3:
        failures.append(f"paired/x median of rounds {median}, expected {1.02 / 1.04:.4f}")
    timed = f"timed/cpus:{cpu}"
    if not any(l.startswith(timed + " ") for l in report.splitlines()):
        failures.append(f"the pinned program did not run on core {cpu} alone:\n{report}")
    else:
        base, new, ratio, median = row(report, timed)
        if (base, new) != (720.0, 360.0) or abs(ratio - 0.5) > 1e-9:
            failures.append(f"{timed}: fastest repetitions {base}, {new}, ratio {ratio}")
    if not re.search(r"^rounds: 3;", report, re.M):
        failures.append(f"three rounds asked, report says otherwise:\n{report}")
    stopped = compare(tmp, "--rounds", "50", "--program", "alloc_free=.", "--seconds", "0.001")
    if "stopped after 1 rounds" not in stopped or not re.search(r"^rounds: 1;", stopped, re.M):
        failures.append(f"--seconds did not stop after the first round:\n{stopped}")

for f in failures:
    print("FAIL", f)
print(f"compare_builds: {len(failures)} failures")
sys.exit(1 if failures else 0)
