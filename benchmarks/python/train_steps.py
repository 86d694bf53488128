# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Steps per second, losses and peak reserved of one PyTorch training run under one allocator.

    train_steps.py MODEL WAY [--steps N] [--library PATH]

MODEL: suite (the Python suite's 4-layer nn.TransformerEncoder, d 256, of
python/tests/scenarios/torch_train.py), small (4 layers, d 512, the shapes (8, 64), (16, 128),
(4, 256), (32, 32) and (12, 96) in turn) or gpt2 (HuggingFace transformers GPT2LMHeadModel built
from a config: 6 layers, d 512, six shapes in turn). WAY: native (PyTorch's caching allocator),
segments (rmm_next.torch.use(segment_cache=True)) or pool (rmm_next.torch.use(): the driver pool
alone, what the segment cache's memory comes from), stacked (rmm_next.torch.use(thread_cache=True,
segment_cache=True): the thread cache in front of the segment cache), floor (PyTorch's CUDAPluggableAllocator over
floor_allocator.cpp, --library its build: a per-size free list that ignores streams, so the cost of
PyTorch's pluggable route itself in training) or timed (segments, with PyTorch calling the plugin
through timed_plugin.cpp, --library its build: adds "plugin_host", the host time per timed step
spent inside rmm-next's entry points, on the Python thread and on the others). Deterministic kernels, so that every way
computes the same losses. Prints one JSON object: steps_per_second over the steps after the
warm-up, the losses, and the peak reserved: torch.cuda.max_memory_reserved for native, the
pool's ReservedMemHigh for rmm-next (everything the driver pool mapped, cached segments
included). benchmarks/python/paired_rounds.py runs the ways in interleaved rounds.

--breakdown K adds, after the timed steps (which it does not change), a "breakdown": the host's
time per step when the host waits for the GPU after each of K steps (nothing overlaps), and the
GPU's busy time per step (the device time of every kernel, copy and set of K steps under
torch.profiler). A way whose steps/s is near 1000 / gpu_ms_per_step is GPU-bound; below it the
host is the limit, and what each allocation costs on the host counts (torch_pairs.py).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", choices=["suite", "small", "gpt2"])
parser.add_argument("way", choices=["native", "segments", "stacked", "pool", "floor", "timed"])
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--max-idle-mib", type=int, default=None,
                    help="segments: the cache's max_idle_bytes in MiB (default: the cache's)")
parser.add_argument("--max-idle-fraction", type=float, default=None,
                    help="segments: the cache's max_idle_fraction (default: the cache's)")
parser.add_argument("--library", help="floor and timed: the built floor_allocator.cpp or "
                    "timed_plugin.cpp")
parser.add_argument("--breakdown", type=int, default=0, metavar="K",
                    help="after the timed steps, K more steps with a wait after each, then K "
                         "under torch.profiler (see the module)")
args = parser.parse_args()

import torch  # noqa: E402
from torch import nn  # noqa: E402

timed = None
if args.way in ("segments", "stacked", "pool", "timed"):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    import rmm_next

    cache = rmm_next.SegmentCache(
        max_idle_bytes=None if args.max_idle_mib is None else args.max_idle_mib << 20,
        max_idle_fraction=args.max_idle_fraction)
    if args.way == "pool":
        rmm_next.torch.use()
    elif args.way == "segments":
        rmm_next.torch.use(segment_cache=cache)
    elif args.way == "stacked":
        rmm_next.torch.use(thread_cache=True, segment_cache=cache)
    else:
        import ctypes

        rmm_next.configure(segment_cache=cache)
        timed = ctypes.CDLL(os.path.abspath(args.library))
        timed.timed_clock_ns.restype = ctypes.c_double
        if not timed.timed_bind(rmm_next.library_path().encode()):
            sys.exit(f"train_steps.py: {args.library} found no plugin entry points")
        totals = (ctypes.c_uint64 * 8)()
        torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
            os.path.abspath(args.library), "timed_alloc", "timed_free"))
elif args.way == "floor":
    torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
        os.path.abspath(args.library), "floor_alloc", "floor_free"))


def timed_totals():
    """The timed plugin's totals: alloc ns, calls, free ns, calls; Python thread, then others."""
    timed.timed_totals(totals)
    return list(totals)


torch.manual_seed(0)
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.enable_flash_sdp(False)
torch.backends.cuda.enable_mem_efficient_sdp(False)
generator = torch.Generator(device="cuda").manual_seed(1234)

if args.model == "gpt2":
    import transformers

    config = transformers.GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=512)
    model = transformers.GPT2LMHeadModel(config).cuda()
    shapes = [(8, 128), (4, 256), (16, 64), (12, 192), (2, 512), (6, 320)]

    def step_loss(batch, length):
        tokens = torch.randint(0, config.vocab_size, (batch, length), device="cuda",
                               generator=generator)
        return model(input_ids=tokens, labels=tokens).loss
else:
    features, width, heads = (64, 256, 8) if args.model == "suite" else (64, 512, 8)
    model = nn.Sequential(
        nn.Linear(features, width),
        nn.TransformerEncoder(
            nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, batch_first=True),
            num_layers=4, enable_nested_tensor=False),
        nn.Linear(width, features),
    ).cuda()
    if args.model == "suite":
        import random

        pick = random.Random(99)
        shapes = [(pick.choice([8, 16, 24, 32]), pick.choice([32, 48, 64, 96, 128]))
                  for _ in range(args.steps)]
    else:
        shapes = [(8, 64), (16, 128), (4, 256), (32, 32), (12, 96)]

    def step_loss(batch, length):
        x = torch.randn(batch, length, features, device="cuda", generator=generator)
        target = torch.roll(x, shifts=1, dims=1) * 0.5 + x.mean(dim=1, keepdim=True)
        return nn.functional.mse_loss(model(x), target)

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)


def one_step(step):
    """One training step on the step's shape; its loss."""
    batch, length = shapes[step % len(shapes)]
    optimizer.zero_grad(set_to_none=True)
    loss = step_loss(batch, length)
    loss.backward()
    optimizer.step()
    return loss


warmup = min(20, args.steps // 5)
losses = []
start = None
for step in range(args.steps):
    if step == warmup:
        torch.cuda.synchronize()
        start = time.perf_counter()
        if timed is not None:
            begin_totals = timed_totals()
    losses.append(one_step(step).detach())
torch.cuda.synchronize()
elapsed = time.perf_counter() - start
result = {"model": args.model, "way": args.way, "steps": args.steps,
          "steps_per_second": (args.steps - warmup) / elapsed,
          "losses": torch.stack(losses).tolist()}
if timed is not None:
    spent = [e - b for e, b in zip(timed_totals(), begin_totals)]
    n = args.steps - warmup
    result["plugin_host"] = {
        "clock_read_ns": timed.timed_clock_ns(100000),
        **{f"{who}_{what}_per_step": spent[4 * k + i] / n / (1e6 if what.endswith("ms") else 1)
           for k, who in enumerate(("python", "other"))
           for i, what in enumerate(("alloc_ms", "allocs", "free_ms", "frees"))}}
if args.way == "native":
    result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
    result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
elif args.way != "floor":  # the pluggable route has no device statistics (nor has the floor)
    result["peak_allocated_bytes"] = rmm_next.statistics(0)["allocated_bytes_high"]
    pool = rmm_next.pool_attributes(0)
    result["peak_reserved_bytes"] = pool["reserved_mem_high"]
    result["pool_used_high_bytes"] = pool["used_mem_high"]  # under the cache: what it held
    if args.way in ("segments", "stacked", "timed"):
        result["segment_cache"] = rmm_next.segment_cache_statistics(0)
if args.breakdown > 0:
    k = args.breakdown
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for step in range(k):
        one_step(step)
        torch.cuda.synchronize()
    synced_ms = (time.perf_counter() - begin) * 1e3 / k
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for step in range(k):
            one_step(step)
        torch.cuda.synchronize()
    device_us = sum(getattr(e, "self_device_time_total", 0) or 0 for e in prof.key_averages()
                    if str(e.device_type).endswith("CUDA"))  # kernels, copies and sets
    result["breakdown"] = {"steps": k, "synced_ms_per_step": synced_ms,
                           "gpu_ms_per_step": device_us / 1e3 / k}
print(json.dumps(result))
