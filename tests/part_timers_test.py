#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/python/part_timers.py still finds every line it times: it makes its timed copy of the
source, the copy's allocator plugin builds, and the built plugin carries the names of the parts
it prints (run on a GPU, it prints them at exit).

    part_timers_test.py CMAKE
"""

import pathlib
import subprocess
import sys
import tempfile

cmake = sys.argv[1]
root = pathlib.Path(__file__).resolve().parents[1]
with tempfile.TemporaryDirectory() as tmp:
    dest = pathlib.Path(tmp) / "timed"
    subprocess.run([sys.executable, str(root / "benchmarks/python/part_timers.py"), str(dest)],
                   check=True)
    build = dest / "build"
    subprocess.run([cmake, "-S", str(dest), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                    "-DRMM_NEXT_BUILD_TESTS=OFF", "-DRMM_NEXT_BUILD_BENCHMARKS=OFF",
                    "-DRMM_NEXT_BUILD_EXAMPLES=OFF", "-DRMM_NEXT_INSTALL=OFF"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([cmake, "--build", str(build), "--target", "rmm_next_allocator_plugin"],
                   check=True, stdout=subprocess.DEVNULL)
    plugin = next(build.rglob("librmm_next_allocator.so")).read_bytes()
    missing = [name for name in (b"alloc: the resource", b"free: deferred, registry take", b"hit: take a cached block",
                                 b"miss: the upstream's allocate",
                                 b"free: a free that gives segments back") if name not in plugin]
    if missing:
        sys.exit(f"the timed plugin lacks the parts {missing}")
print("part_timers.py: the timed copy builds, with every part")
