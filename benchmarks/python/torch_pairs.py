# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""What one torch.empty + del costs on the host under each allocator, in interleaved rounds.

    torch_pairs.py OUT_DIR [--rounds N] [--pairs N] [--ways native,floor,pool,segments] [--cold]

Each way runs in a process of its own: native (PyTorch's caching allocator), floor (PyTorch's
CUDAPluggableAllocator over floor_allocator.cpp, which does next to nothing: the cost of the
pluggable route itself), pool (rmm_next.torch.use(), the driver pool alone) and segments
(rmm_next.torch.use(segment_cache=True)). A process times --pairs pairs of 4 KiB, 1 MiB and 8 MiB
on the current stream (after as many untimed ones), five times, and keeps the fastest: ns per
pair, the Python loop and PyTorch's tensor creation included, the same for every way. The order of
the ways turns every round. The floor library is built with nvcc into OUT_DIR on first use.

--cold writes one int64 in every 64-byte line of 4 MiB of host memory before each pair (as a
training step's own host work does between two allocations: the allocator's data leaves the
core's L1 and L2) and times the pair alone (time.perf_counter_ns around it, in every way alike).

Writes OUT_DIR/torch_pairs.json and prints, per size, the median over the rounds of each way and of
its difference from native.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

SIZES = (4 << 10, 1 << 20, 8 << 20)


COLD_BYTES = 4 << 20


def measure(way, pairs, floor_library, cold):
    import torch

    if way == "floor":
        allocator = torch.cuda.memory.CUDAPluggableAllocator(floor_library, "floor_alloc",
                                                             "floor_free")
        torch.cuda.memory.change_current_allocator(allocator)
    elif way in ("pool", "segments"):
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
        import rmm_next

        rmm_next.torch.use(segment_cache=True if way == "segments" else None)
    lines = torch.zeros(COLD_BYTES // 8, dtype=torch.int64)[::8]  # one int64 per 64-byte line
    clock = time.perf_counter_ns

    def seconds_of_pairs(nbytes):
        torch.cuda.synchronize()
        if not cold:
            begin = time.perf_counter()
            for _ in range(pairs):
                x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
                del x
            return time.perf_counter() - begin
        spent = 0
        for _ in range(pairs):
            lines.add_(1)
            begin = clock()
            x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            del x
            spent += clock() - begin
        return spent / 1e9

    result = {}
    for nbytes in SIZES:
        for _ in range(pairs):  # warm: the block is cached in every way
            x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            del x
        best = min(seconds_of_pairs(nbytes) for _ in range(5))
        result[str(nbytes)] = best * 1e9 / pairs
    torch.cuda.synchronize()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--ways", default="native,floor,pool,segments")
    parser.add_argument("--cold", action="store_true",
                        help="other host memory written before each pair; the pair alone timed")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # one way, in this process
    parser.add_argument("--floor-library", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.pairs, args.floor_library, args.cold)))
        return
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ways = args.ways.split(",")
    floor = out / "floor_allocator.so"
    if "floor" in ways and not floor.exists():
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC",
                        str(pathlib.Path(__file__).with_name("floor_allocator.cpp")),
                        "-o", str(floor)], check=True)
    rounds = []
    for r in range(args.rounds):
        order = ways[r % len(ways):] + ways[:r % len(ways)]
        row = {}
        for way in order:
            done = subprocess.run([sys.executable, __file__, str(out), "--measure", way,
                                   "--pairs", str(args.pairs), "--floor-library", str(floor),
                                   *(["--cold"] if args.cold else [])],
                                  capture_output=True, text=True, env=dict(os.environ))
            row[way] = (json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0
                        else {"error": done.stderr[-1500:]})
        rounds.append(row)
        print(json.dumps({"round": r, **row}), flush=True)
    (out / "torch_pairs.json").write_text(json.dumps(rounds) + "\n")
    print("| size | " + " | ".join(f"{w} ns" for w in ways) + " | "
          + " | ".join(f"{w} - native" for w in ways if w != "native") + " |")
    print("|---" * (2 * len(ways)) + "|")
    for size in map(str, SIZES):
        def med(way):
            values = [r[way][size] for r in rounds if size in r.get(way, {})]
            return statistics.median(values) if values else float("nan")

        def med_diff(way):
            values = [r[way][size] - r["native"][size] for r in rounds
                      if size in r.get(way, {}) and size in r.get("native", {})]
            return statistics.median(values) if values else float("nan")

        print(f"| {int(size) >> 10} KiB | " + " | ".join(f"{med(w):.0f}" for w in ways) + " | "
              + " | ".join(f"{med_diff(w):+.0f}" for w in ways if w != "native") + " |")


if __name__ == "__main__":
    main()
