# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The traces kept in benchmarks/replay/traces are whole logs that the replay can take, and their
summaries say what the logs hold.

    replay_traces_test.py TRACES_DIR

For each <name>.csv.gz: RMM's header; every line in RMM's columns (a thread id, a time, one of
the three actions, a hexadecimal pointer or "(nil)" for a failure, a decimal size, a stream);
every free names a pointer that is live at that line, with the size it was allocated with, as the
replay needs; and the counts, threads, streams, sizes and the peak of the bytes live, computed here,
equal those of <name>.json. Exits 1 naming the first trace and line that break a rule.
"""

import gzip
import json
import pathlib
import re
import sys

HEADER = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]
TIME = re.compile(r"^\d\d:\d\d:\d\d\.\d{6}$")
HEX = re.compile(r"^0x[0-9a-f]+$")


def check(trace: pathlib.Path) -> list[str]:
    problems = []
    live, in_use, peak = {}, 0, 0
    counts = {"allocate": 0, "free": 0, "allocate failure": 0}
    threads, streams, sizes = set(), set(), []
    with gzip.open(trace, "rt", newline="") as lines:
        header = next(lines).rstrip("\n").split(",")
        if header != HEADER:
            problems.append(f"{trace.name}: header {header}, not {HEADER}")
        for number, line in enumerate(lines, start=2):
            fields = line.rstrip("\n").split(",")
            if len(fields) != 6:
                problems.append(f"{trace.name}:{number}: {len(fields)} columns")
                continue
            thread, time, action, pointer, size, stream = fields
            ok = (thread.isdigit() and TIME.match(time) and action in counts and size.isdigit()
                  and (stream == "0" or HEX.match(stream))
                  and (HEX.match(pointer) or (action == "allocate failure" and pointer == "(nil)")))
            if not ok:
                problems.append(f"{trace.name}:{number}: not in RMM's columns: {line.strip()}")
                continue
            counts[action] += 1
            threads.add(thread)
            streams.add(stream)
            if action == "allocate":
                if pointer in live:
                    problems.append(f"{trace.name}:{number}: {pointer} allocated while live")
                live[pointer] = int(size)
                in_use += int(size)
                peak = max(peak, in_use)
                sizes.append(int(size))
            elif action == "free":
                if live.get(pointer) != int(size):
                    problems.append(f"{trace.name}:{number}: free of {pointer} ({size} B), live "
                                    f"with {live.get(pointer)} B")
                    continue
                in_use -= live.pop(pointer)
            if len(problems) > 5:
                return problems
    sizes = sorted(sizes) or [0]
    found = [("lines", sum(counts.values())), ("allocations", counts["allocate"]),
             ("frees", counts["free"]), ("failures", counts["allocate failure"]),
             ("threads", len(threads)), ("streams", sorted(streams)), ("peak_live_bytes", peak),
             ("live_at_end_bytes", in_use), ("size_min", sizes[0]),
             ("size_median", sizes[len(sizes) // 2]), ("size_max", sizes[-1])]
    said = json.loads(trace.with_name(trace.name[: -len(".csv.gz")] + ".json").read_text())
    for key, value in found:
        if said.get(key) != value:
            problems.append(f"{trace.name}: {key} is {value}, its summary says {said.get(key)}")
    return problems


def main() -> int:
    traces = sorted(pathlib.Path(sys.argv[1]).glob("*.csv.gz"))
    if not traces:
        print(f"FAIL: no *.csv.gz in {sys.argv[1]}")
        return 1
    problems = [p for t in traces for p in check(t)]
    for p in problems:
        print("FAIL", p)
    print(f"{len(traces)} traces checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
