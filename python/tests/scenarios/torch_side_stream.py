# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""A tensor made on the main stream is read late on a side stream and dropped on the main stream
at once; the next allocation on the main stream is likely to get its memory and overwrite it.

    torch_side_stream.py RECORD CACHE      (each 0 or 1; CACHE=pool: the tensors in a
                                           rmm_next.torch.mem_pool(), PyTorch's record_stream)

With RECORD=1 the tensor is recorded on the side stream (Tensor.record_stream): its free must wait
for the side stream's read. RECORD=0 is the control that shows what the test would catch.
"""

import contextlib
import sys

import torch

import rmm_next
from _common import emit

record, cache = (sys.argv[1] == "1"), (sys.argv[2] == "1")
routed = contextlib.ExitStack()
if sys.argv[2] == "pool":
    routed.enter_context(torch.cuda.use_mem_pool(rmm_next.torch.mem_pool()))
else:
    rmm_next.torch.use(thread_cache=cache)

main = torch.cuda.current_stream()
side = torch.cuda.Stream()
n = 1 << 20
iterations = 12
wrong = 0
for i in range(iterations):
    x = torch.full((n,), float(i), device="cuda")
    side.wait_stream(main)
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # the side stream reads x late
        y = x * 2
    if record:
        x.record_stream(side)
    del x
    z = torch.full((n,), -1.0, device="cuda")  # on the main stream, at once
    main.wait_stream(side)
    wrong += int(not bool((y == 2 * i).all()))
    del y, z
torch.cuda.synchronize()
routed.close()
emit(
    {
        "record": record,
        "cache": cache,
        "hooked": rmm_next.torch.record_stream_hooked,
        "iterations": iterations,
        "wrong": wrong,
        "statistics": rmm_next.statistics(0),
    }
)
