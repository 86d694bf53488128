# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(mode="reduce-overhead"), which replays CUDA graph trees, under one route.

    torch_compile.py ROUTE      (use: rmm_next.torch.use(); mem_pool: the model and its inputs
                                 made inside torch.cuda.use_mem_pool(rmm_next.torch.mem_pool()),
                                 the compiled calls beside it; mem_pool_inside: the compiled calls
                                 inside it too, where the graph trees' own pool competes with it;
                                 native: PyTorch's own allocator, nothing of rmm-next)

Prints whether the compiled model ran, its largest difference from eager execution, the error it
raised if any (and the last lines of its traceback), and inductor's count of skipped CUDA graphs.
"""

import contextlib
import sys
import traceback

import torch
from torch import nn

import rmm_next
from _common import emit

route = sys.argv[1]
if route == "use":
    rmm_next.torch.use()
pool = rmm_next.torch.mem_pool() if route.startswith("mem_pool") else None


def routed():
    return torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext()


def calls():
    return routed() if route == "mem_pool_inside" else contextlib.nullcontext()


torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
result = {"route": route}
with routed():
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).cuda().eval()
    inputs = [torch.randn(64, 256, device="cuda") for _ in range(6)]
    with torch.no_grad():
        eager = [model(x) for x in inputs]
with torch.no_grad(), calls():
    compiled = torch.compile(model, mode="reduce-overhead")
    try:
        # clone: a graph tree's outputs are overwritten by its next replay.
        outputs = [compiled(x).clone() for x in inputs]
        torch.cuda.synchronize()
        result["ran"] = True
        result["max_difference"] = max(
            (a - b).abs().max().item() for a, b in zip(eager, outputs)
        )
    except Exception as e:  # noqa: BLE001 - reported to the test
        result["ran"] = False
        result["error"] = f"{type(e).__name__}: {e}"[:1000]
        result["traceback"] = traceback.format_exc()[-3000:]

from torch._dynamo.utils import counters  # noqa: E402

result["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
result["statistics"] = rmm_next.statistics(0)
emit(result)
