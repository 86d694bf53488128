# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Fragmentation on a real client: PyTorch training an nn.TransformerEncoder, the same steps
under each allocator, peak bytes reserved against the peak in use.

    fragmentation.py OUT_DIR [--models small,large] [--ways native,...] [--jobs N]
                             [--small-steps N] [--large-steps N]

Ways (each in a process of its own: allocator settings are process-wide):
  native      PyTorch's caching allocator
  expandable  the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  async       PyTorch's cudaMallocAsync backend (the device's current pool)
  rmm         rmm_next.torch.use() (the device's current pool)
  rmm_cache   rmm_next.torch.use(thread_cache=True)
Models: small (4 layers, d 512), large (12 layers, d 2048); batch and sequence length vary from
step to step (one seeded sequence, the same for every way).

Peak reserved / in use: torch.cuda.max_memory_reserved / max_memory_allocated for the PyTorch
ways; for the rmm-next ways the pool's cudaMemPoolAttrReservedMemHigh / UsedMemHigh
(rmm_next.pool_attributes), with the thread cache's blocks counted as used. The async way reports
both. Each step also samples, after a synchronize, what is reserved and in use then (the pool's
attributes, rmm-next's live bytes and cached bytes), for the analysis of where the reservation
comes from.

Writes OUT_DIR/fragmentation.json (every run, its samples and pool attributes) and
OUT_DIR/fragmentation.md (the table). RMM_NEXT_ALLOCATOR_LIBRARY names the plugin.
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parents[2]
MiB = 1 << 20
WAYS = {
    "native": {},
    "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
    "rmm": {},
    "rmm_cache": {},
}
WAY_TITLES = {
    "native": "torch native",
    "expandable": "torch, expandable segments",
    "async": "torch, cudaMallocAsync backend",
    "rmm": "rmm-next use()",
    "rmm_cache": "rmm-next, thread cache",
}
# layers, d_model, heads, batch choices, sequence-length choices
MODELS = {
    "small": (4, 512, 8, [16, 32, 48, 64], [64, 96, 128, 192, 256]),
    "large": (12, 2048, 16, [4, 8, 12, 16], [128, 256, 384, 512]),
}
MODEL_TITLES = {"small": "4 layers, d 512", "large": "12 layers, d 2048"}


# ---- One run (a child process) ----------------------------------------------------------------


def child(way, model_name, steps):
    import random

    if way.startswith("rmm") or way == "async":
        try:
            import rmm_next
        except ImportError:
            sys.path.insert(0, str(ROOT / "python"))
            import rmm_next
    import torch
    from torch import nn

    if way.startswith("rmm"):
        rmm_next.torch.use(thread_cache=way == "rmm_cache")
    torch.backends.cuda.matmul.allow_tf32 = True  # speed only: the allocations are the same
    torch.backends.cudnn.allow_tf32 = True
    layers, width, heads, batches, lengths = MODELS[model_name]
    torch.manual_seed(0)
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, batch_first=True),
        num_layers=layers,
        enable_nested_tensor=False,
    ).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    shapes = random.Random(2026)
    plan = [(shapes.choice(batches), shapes.choice(lengths)) for _ in range(steps)]

    def pool():
        return rmm_next.pool_attributes(0)

    samples = []
    start = time.perf_counter()
    for step, (batch, length) in enumerate(plan):
        x = torch.randn(batch, length, width, device="cuda")
        optimizer.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        sample = {"step": step, "batch": batch, "length": length}
        if way.startswith("rmm"):
            stats = rmm_next.statistics(0)
            attributes = pool()
            sample |= {
                "reserved": attributes["reserved_mem_current"],
                "used": attributes["used_mem_current"],
                "reserved_high": attributes["reserved_mem_high"],
                "used_high": attributes["used_mem_high"],
                "live": stats["allocated_bytes"],
                "cached": stats["cached_bytes"],
            }
        else:
            sample |= {
                "reserved": torch.cuda.memory_reserved(),
                "used": torch.cuda.memory_allocated(),
                "reserved_high": torch.cuda.max_memory_reserved(),
                "used_high": torch.cuda.max_memory_allocated(),
            }
        samples.append(sample)
        del x, loss
    seconds = time.perf_counter() - start
    result = {
        "way": way,
        "model": model_name,
        "steps": steps,
        "seconds": seconds,
        "torch": torch.__version__,
        "samples": samples,
    }
    if way.startswith("rmm"):
        attributes = pool()
        stats = rmm_next.statistics(0)
        result |= {
            "peak_reserved": attributes["reserved_mem_high"],
            "peak_in_use": attributes["used_mem_high"],
            "peak_live_sampled": max(s["live"] for s in samples),
            "pool_attributes": attributes,
            "statistics": stats,
        }
    else:
        result |= {
            "peak_reserved": torch.cuda.max_memory_reserved(),
            "peak_in_use": torch.cuda.max_memory_allocated(),
            "allocator_backend": torch.cuda.get_allocator_backend(),
        }
        if way == "async":
            result["pool_attributes"] = pool()
    # Where the reservation grew: the steps after which it differed from the step before.
    result["reserved_changes"] = [
        [s["step"], s["reserved"]]
        for i, s in enumerate(samples)
        if i == 0 or s["reserved"] != samples[i - 1]["reserved"]
    ]
    free, total = torch.cuda.mem_get_info(0)
    result["device_used_at_end"] = total - free
    print(json.dumps(result))


# ---- The study (the parent) -------------------------------------------------------------------


def run(way, model, steps, timeout):
    env = dict(os.environ)
    env.update(WAYS[way])
    paths = [str(ROOT / "python")] + [p for p in [env.get("PYTHONPATH")] if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    command = [sys.executable, str(HERE), "--child", way, model, str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        error = done.stderr[-4000:] or f"exit {done.returncode}"
        return {"way": way, "model": model, "error": error}
    return json.loads(lines[-1])


def table(runs, models, ways):
    by = {(r["model"], r["way"]): r for r in runs}
    lines = [
        "| model | " + " | ".join(WAY_TITLES[w] for w in ways) + " |",
        "|---|" + "---|" * len(ways),
    ]
    for model in models:
        native = by.get((model, "native"), {})
        in_use = native.get("peak_in_use")
        label = MODEL_TITLES[model]
        if in_use:
            label += f" (native peak in use {in_use / MiB:,.0f} MiB)"
        cells = []
        for way in ways:
            r = by.get((model, way), {})
            if "peak_reserved" not in r:
                cells.append("failed" if "error" in r else "—")
                continue
            reserved = r["peak_reserved"] / MiB
            own = r["peak_reserved"] / r["peak_in_use"] if r["peak_in_use"] else float("nan")
            cell = f"{reserved:,.0f} MiB ({own:.2f}× own peak in use"
            if in_use:
                cell += f", {r['peak_reserved'] / in_use:.2f}× native's"
            cells.append(cell + ")")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=None,
                        help="output folder (else $OUT/fragmentation)")
    parser.add_argument("--models", default="small,large")
    parser.add_argument("--ways", default=",".join(WAYS))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--small-steps", type=int, default=40)
    parser.add_argument("--large-steps", type=int, default=12)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    args = parser.parse_args()
    if args.out is None:
        if not os.environ.get("OUT"):
            parser.error("give OUT_DIR or set $OUT")
        args.out = os.path.join(os.environ["OUT"], "fragmentation")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    ways = [w for w in args.ways.split(",") if w]
    for name, known in (("model", MODELS), ("way", WAYS)):
        chosen = models if name == "model" else ways
        unknown = [c for c in chosen if c not in known]
        if unknown:
            parser.error(f"unknown {name} {unknown}; choose from {', '.join(known)}")
    steps = {"small": args.small_steps, "large": args.large_steps}
    # The large model first: the longest runs start early.
    jobs = [(w, m) for m in sorted(models, key=lambda m: m != "large") for w in ways]
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(lambda job: run(job[0], job[1], steps[job[1]], args.timeout), jobs))
    report = {
        "models": {m: {"layers": MODELS[m][0], "d_model": MODELS[m][1], "heads": MODELS[m][2],
                       "batches": MODELS[m][3], "lengths": MODELS[m][4], "steps": steps[m]}
                   for m in models},
        "jobs": args.jobs,
        "wall_seconds": time.perf_counter() - started,
        "runs": runs,
    }
    (out / "fragmentation.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = table(runs, models, ways)
    (out / "fragmentation.md").write_text(markdown)
    print(markdown)
    failed = [f"{r['way']}/{r['model']}: {r['error'][-600:]}" for r in runs if "error" in r]
    for f in failed:
        print(f"fragmentation.py: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(main())
