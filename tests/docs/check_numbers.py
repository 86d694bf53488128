#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Checks that measured numbers appear only in docs/benchmarks.md.

benchmarks/bench_report.py writes docs/benchmarks.md from one run of benchmarks/run_all.sh. Any other
document that quotes a time (12 ns, 3.4 µs) or a percentage would disagree with it after the next
run, so README.md and the other docs/*.md quote none: they link to the tables instead.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
generated = root / "docs" / "benchmarks.md"
measurement = re.compile(r"\d+(\.\d+)?\s?(ns|µs|us|ms|%)(?![\w])")
failures = []
for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    if doc == generated:
        continue
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        if m := measurement.search(line):
            failures.append(f"{doc.relative_to(root)}:{number}: quotes '{m.group(0)}'")

for f in failures:
    print("FAIL", f, "- measured numbers belong in docs/benchmarks.md (benchmarks/bench_report.py)")
print(f"{len(failures)} measured numbers outside {generated.relative_to(root)}")
sys.exit(1 if failures else 0)
