# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(mode="reduce-overhead"), which replays CUDA graph trees, under one route.

    torch_compile.py ROUTE      (use: rmm_next.torch.use(); mem_pool: the model, its inputs and
                                 the compiled calls inside torch.cuda.use_mem_pool(mem_pool()))

Prints whether the compiled model ran, its largest difference from eager execution, the error it
raised if any, and inductor's count of skipped CUDA graphs.
"""

import contextlib
import sys

import torch
from torch import nn

import rmm_next
from _common import emit

route = sys.argv[1]
if route == "use":
    rmm_next.torch.use()
routed = contextlib.ExitStack()
if route == "mem_pool":
    routed.enter_context(torch.cuda.use_mem_pool(rmm_next.torch.mem_pool()))

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
result = {"route": route}
with routed:
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).cuda().eval()
    inputs = [torch.randn(64, 256, device="cuda") for _ in range(6)]
    with torch.no_grad():
        eager = [model(x) for x in inputs]
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

from torch._dynamo.utils import counters  # noqa: E402

result["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
result["statistics"] = rmm_next.statistics(0)
emit(result)
