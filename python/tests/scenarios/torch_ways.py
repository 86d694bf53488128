# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Trains the transformer of torch_train.py four ways, each in a process of its own, and compares.

    torch_ways.py [STEPS] [OUT_DIR]      (OUT_DIR, else $OUT, else nowhere: torch_ways.json)

Ways: native (PyTorch's caching allocator), use (rmm_next.torch.use()), use_cache
(use(thread_cache=True)), mem_pool (torch.cuda.use_mem_pool(rmm_next.torch.mem_pool())). use()
replaces PyTorch's allocator for the whole process, hence one process per way. Prints, per way,
steps per second, its ratio to native, the largest loss difference from native and the losses.
"""

import json
import os
import pathlib
import subprocess
import sys

from _common import emit

HERE = pathlib.Path(__file__).resolve().parent
WAYS = {"native": "native", "use": "rmm", "use_cache": "rmm_cache", "mem_pool": "mem_pool"}

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
out_dir = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("OUT")

runs = {}
for way, mode in WAYS.items():
    done = subprocess.run(
        [sys.executable, str(HERE / "torch_train.py"), mode, str(steps)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.stderr.write(f"{way} ({mode}) exited {done.returncode}:\n{done.stdout}\n{done.stderr}\n")
        sys.exit(1)
    runs[way] = json.loads(lines[-1])

native = runs["native"]
result = {"steps": steps, "ways": {}}
for way, run in runs.items():
    difference = max(abs(a - b) for a, b in zip(native["losses"], run["losses"]))
    entry = {
        "steps_per_second": run["steps_per_second"],
        "ratio_to_native": run["steps_per_second"] / native["steps_per_second"],
        "max_loss_difference_vs_native": difference,
        "losses_identical_to_native": run["losses"] == native["losses"],
        "first_loss": run["losses"][0],
        "last_loss": run["losses"][-1],
        "losses": run["losses"],
    }
    for key in ("statistics", "pool_segment_bytes", "torch_reserved_bytes"):
        if key in run:
            entry[key] = run[key]
    result["ways"][way] = entry
if out_dir:
    path = pathlib.Path(out_dir) / "torch_ways.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
emit(result)
