# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""What the trace recorders share: where the trace goes, and its gzip copy with a summary.

A trace is a log in RMM's logging_resource_adaptor format (Thread,Time,Action,Pointer,Size,Stream),
written by rmm_next.configure(log=...). finish() compresses it to <name>.csv.gz (what
run_replay.sh replays) and writes <name>.json: line counts, threads, streams, sizes and the peak
of the bytes live, read from the log itself.
"""

import argparse
import csv
import gzip
import json
import os
import pathlib
import shutil
import sys

# The rmm_next package of this source tree, unless one is installed.
ROOT = pathlib.Path(__file__).resolve().parents[2]
try:
    import rmm_next  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))


def arguments(doc, option, default):
    """OUT_DIR (else $OUT/traces) and one integer option, parsed from the command line."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("out", nargs="?", default=None, help="output folder (else $OUT/traces)")
    parser.add_argument(f"--{option}", type=int, default=default)
    args = parser.parse_args()
    if args.out is None:
        if not os.environ.get("OUT"):
            parser.error("give OUT_DIR or set $OUT")
        args.out = os.path.join(os.environ["OUT"], "traces")
    args.out = pathlib.Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def start(out, name, framework):
    """Logs every allocation of this process to OUT/<name>.csv through rmm-next, with `framework`
    (torch or cupy) allocating through rmm-next's plugin; returns the log's path."""
    import rmm_next

    log = out / f"{name}.csv"
    rmm_next.configure(log=log)
    getattr(rmm_next, framework).use()
    return log


def summary(log):
    """Counts and the peak of the bytes live in a log (sizes as asked for)."""
    live, peak, in_use = {}, 0, 0
    counts = {"allocate": 0, "free": 0, "allocate failure": 0}
    threads, streams, sizes = set(), set(), []
    with open(log, newline="") as file:
        rows = csv.reader(file)
        header = next(rows)
        for thread, _time, action, pointer, size, stream in rows:
            counts[action] += 1
            threads.add(thread)
            streams.add(stream)
            if action == "allocate":
                live[pointer] = int(size)
                in_use += int(size)
                peak = max(peak, in_use)
                sizes.append(int(size))
            elif action == "free" and pointer in live:
                in_use -= live.pop(pointer)
    sizes.sort()
    return {
        "header": header,
        "lines": sum(counts.values()),
        "allocations": counts["allocate"],
        "frees": counts["free"],
        "failures": counts["allocate failure"],
        "threads": len(threads),
        "streams": sorted(streams),
        "peak_live_bytes": peak,
        "live_at_end_bytes": in_use,
        "size_min": sizes[0] if sizes else 0,
        "size_median": sizes[len(sizes) // 2] if sizes else 0,
        "size_max": sizes[-1] if sizes else 0,
    }


def finish(log, extra):
    """Compresses `log` next to it (.csv.gz), removes the .csv and writes the summary (.json)."""
    log = pathlib.Path(log)
    info = summary(log) | extra
    compressed = log.with_suffix(".csv.gz")
    with open(log, "rb") as source, gzip.open(compressed, "wb", compresslevel=9) as target:
        shutil.copyfileobj(source, target)
    log.unlink()
    info["gzip_bytes"] = compressed.stat().st_size
    log.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps({k: v for k, v in info.items() if k != "header"}))
    return info
