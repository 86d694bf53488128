# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Allocations of known sizes and streams through a framework, logged and tracked by rmm-next.

    tracing.py MODE LOG

MODE: torch or cupy (configure(log=LOG, track=True) first), or torch-env (RMM_NEXT_LOG and
RMM_NEXT_TRACK set by the caller: no tracing call at all; the log is written at exit). Prints the
tensors (pointer, bytes, stream, whether still live), the entries outstanding() added for them,
and, for torch and cupy, outstanding() when the log was closed.
"""

import sys
import threading

import rmm_next
from _common import emit

mode, log = sys.argv[1], sys.argv[2]
# The framework first, so that the process uses its CUDA runtime; then the log, then use().
if mode.startswith("torch"):
    import torch
    from torch import nn
else:
    import cupy as cp
if mode in ("torch", "cupy"):
    rmm_next.configure(log=log, track=True)

tensors = {}


def keep(name, ptr, nbytes, stream, live=True):
    tensors[name] = {"ptr": ptr, "nbytes": nbytes, "stream": stream, "live": live}


def outstanding_pointers():
    return {e["ptr"] for e in rmm_next.outstanding()}


if mode.startswith("torch"):
    rmm_next.torch.use()
    torch.zeros(1, device="cuda")  # the context; freed at once
    torch.cuda.synchronize()
    baseline = outstanding_pointers()
    main = torch.cuda.current_stream().cuda_stream
    side = torch.cuda.Stream()
    a = torch.empty(1000, dtype=torch.uint8, device="cuda")
    b = torch.empty((256, 1024), dtype=torch.float32, device="cuda")
    c = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(side):
        d = torch.empty(5000, dtype=torch.float16, device="cuda")
    made = (("a", a, main), ("b", b, main), ("c", c, main), ("d", d, side.cuda_stream))
    for name, t, stream in made:
        keep(name, t.data_ptr(), t.untyped_storage().nbytes(), stream)
    del made, t, c  # the last reference to c: its free is logged now
    tensors["c"]["live"] = False
    torch.cuda.synchronize()
    new = [e for e in rmm_next.outstanding() if e["ptr"] not in baseline]
    # Some training, for a log of a real workload.
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(128, 4, 256, batch_first=True), num_layers=2,
        enable_nested_tensor=False).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(5):
        x = torch.randn(8, 32 + 16 * step, 128, device="cuda")
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    torch.cuda.synchronize()
else:
    rmm_next.cupy.use()
    cp.zeros(1)
    cp.cuda.Device().synchronize()
    baseline = outstanding_pointers()
    side = cp.cuda.Stream(non_blocking=True)
    a = cp.empty(1000, dtype=cp.uint8)
    b = cp.empty((256, 1024), dtype=cp.float32)
    c = cp.empty(3 << 20, dtype=cp.uint8)
    with side:
        d = cp.empty(5000, dtype=cp.float16)
    for name, t, stream in (("a", a, 0), ("b", b, 0), ("c", c, 0), ("d", d, side.ptr)):
        keep(name, t.data.ptr, t.nbytes, stream)
    del c
    tensors["c"]["live"] = False
    cp.cuda.Device().synchronize()
    new = [e for e in rmm_next.outstanding() if e["ptr"] not in baseline]
    rs = cp.random.RandomState(seed=1)
    for n in (1 << 12, 1 << 16, 1 << 20):
        x = rs.standard_normal(n, dtype=cp.float32)
        y = cp.sort(cp.abs(cp.fft.fft(x)))
        float(y[-1] + cp.sin(x).sum())
    cp.cuda.Device().synchronize()

result = {
    "mode": mode,
    "tensors": tensors,
    "outstanding_new": new,
    "thread": threading.get_ident(),
    "native_thread": threading.get_native_id(),
    "tracing": rmm_next.tracing(),
    "statistics": rmm_next.statistics(0),
}
if mode != "torch-env":
    result["outstanding_at_close"] = sorted(outstanding_pointers())
    rmm_next.configure(log=None)
emit(result)
