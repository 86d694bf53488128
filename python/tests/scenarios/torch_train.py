# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Trains a small nn.TransformerEncoder with varying batch shapes under one allocator.

    torch_train.py MODE [STEPS]

MODE: native (PyTorch's caching allocator), async (run with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync), rmm (rmm_next.torch.use()), rmm_cache (use()
with rmm-next's thread cache), rmm_segments (use() with rmm-next's segment cache), mem_pool (PyTorch's caching allocator over rmm-next: the model, the
optimizer and the loop inside torch.cuda.use_mem_pool(rmm_next.torch.mem_pool())). Prints losses,
steps per second and, through rmm-next, its statistics.
"""

import contextlib
import os
import random
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from _common import GiB, emit, pool_segment_bytes  # noqa: E402

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
warmup = min(30, steps // 5)

if mode in ("rmm", "rmm_cache", "rmm_segments"):
    import rmm_next

    rmm_next.torch.use(thread_cache=mode == "rmm_cache", segment_cache=mode == "rmm_segments")

routed = contextlib.ExitStack()
if mode == "mem_pool":
    import rmm_next

    pool = rmm_next.torch.mem_pool()
    # The calling thread's allocations; autograd's backward thread allocates from PyTorch's own.
    routed.enter_context(torch.cuda.use_mem_pool(pool))

torch.manual_seed(0)
# warn_only: an op without a deterministic kernel warns; the loss comparison still tells.
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
# The math attention kernels: deterministic in backward, whatever the GPU.
torch.backends.cuda.enable_flash_sdp(False)
torch.backends.cuda.enable_mem_efficient_sdp(False)

features, width, heads, layers = 64, 256, 8, 4
model = nn.Sequential(
    nn.Linear(features, width),
    nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, batch_first=True),
        num_layers=layers,
        enable_nested_tensor=False,
    ),
    nn.Linear(width, features),
).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
generator = torch.Generator(device="cuda").manual_seed(1234)
shapes = random.Random(99)
batches = [(shapes.choice([8, 16, 24, 32]), shapes.choice([32, 48, 64, 96, 128])) for _ in range(steps)]

losses = []
start = None
for step, (batch, length) in enumerate(batches):
    if step == warmup:
        torch.cuda.synchronize()
        start = time.perf_counter()
    x = torch.randn(batch, length, features, device="cuda", generator=generator)
    target = torch.roll(x, shifts=1, dims=1) * 0.5 + x.mean(dim=1, keepdim=True)
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())
torch.cuda.synchronize()
elapsed = time.perf_counter() - start
routed.close()

result = {
    "mode": mode,
    "allocator_backend": torch.cuda.get_allocator_backend(),
    "steps": steps,
    "timed_steps": steps - warmup,
    "steps_per_second": (steps - warmup) / elapsed,
    "losses": torch.stack(losses).tolist(),
}
free, total = torch.cuda.mem_get_info(0)
result["device_used_gib"] = (total - free) / GiB
if mode == "mem_pool":
    result["pool_segment_bytes"] = pool_segment_bytes(pool)
    result["torch_reserved_bytes"] = torch.cuda.memory_reserved(0)
if mode.startswith("rmm") or mode == "mem_pool":
    stats = rmm_next.statistics(0)
    result["statistics"] = stats
    # What the device holds beyond rmm-next's pool: the context and libraries only.
    result["device_used_beyond_pool_gib"] = (total - free - stats["pool_reserved_bytes"]) / GiB
if mode == "rmm_segments":
    result["segment_cache"] = rmm_next.segment_cache_statistics(0)
    del model, optimizer, x, target, loss, losses
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # the segment cache's idle segments go back
    result["segment_cache_after_empty_cache"] = rmm_next.segment_cache_statistics(0)
    result["pool_used_after_empty_cache"] = rmm_next.pool_attributes(0)["used_mem_current"]
    # What PyTorch still holds after the model is gone (its cuBLAS workspaces, for one).
    result["allocated_after_empty_cache"] = rmm_next.statistics(0)["allocated_bytes"]
emit(result)
