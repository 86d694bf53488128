# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""A CuPy workload of mixed sizes (FFTs, reductions, elementwise) under one allocator.

    cupy_workload.py MODE [ITERATIONS]

MODE: native (CuPy's default memory pool) or rmm (rmm_next.cupy.use()). Under rmm-next it also
runs the workload on a non-blocking stream, lets a stream die while an array made on it lives on,
and runs out of memory on purpose.
"""

import sys
import time

import cupy as cp

from _common import emit

mode = sys.argv[1]
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 300
if mode == "rmm":
    import rmm_next

    rmm_next.cupy.use()

SIZES = [1 << 10, 3 << 12, 1 << 16, 5 << 16, 1 << 20, 3 << 20, 1 << 22]


def workload(n_iterations):
    rs = cp.random.RandomState(seed=42)
    values = []
    for i in range(n_iterations):
        n = SIZES[i % len(SIZES)]
        x = rs.standard_normal(n, dtype=cp.float32)
        spectrum = cp.fft.fft(x)
        power = cp.abs(spectrum).sum()
        y = cp.sin(x) * cp.exp(-x * x) + x[::-1]
        z = cp.fft.irfft(cp.fft.rfft(y), n)
        values.append(cp.stack([power, y.max(), z.mean(), cp.linalg.norm(y - z)]))
    return cp.stack(values)


workload(len(SIZES))  # plans, kernels, pool warm-up
cp.cuda.Device().synchronize()
start = time.perf_counter()
reference = workload(iterations)
cp.cuda.Device().synchronize()
elapsed = time.perf_counter() - start
result = {
    "mode": mode,
    "iterations": iterations,
    "seconds": elapsed,
    "values": reference.get().ravel().tolist(),
}

if mode == "rmm":
    # The same work on a non-blocking stream: allocated and freed on it.
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        on_stream = workload(20)
    stream.synchronize()
    result["non_blocking_stream_matches"] = bool(
        cp.allclose(on_stream, reference[:20], rtol=1e-5, atol=1e-5)
    )
    # A stream that dies while an array made on it lives on.
    dying = cp.cuda.Stream()
    with dying:
        survivor = cp.arange(1 << 20, dtype=cp.float64)
    del dying
    result["survivor_sum_ok"] = float(survivor.sum()) == float((1 << 20) * ((1 << 20) - 1) / 2)
    before = rmm_next.statistics()["deallocations"]
    del survivor
    result["survivor_freed"] = rmm_next.statistics()["deallocations"] == before + 1
    # Out of memory: CuPy's own error, and CuPy keeps working.
    try:
        cp.empty(1 << 50, dtype=cp.uint8)
        result["oom"] = "no exception"
    except cp.cuda.memory.OutOfMemoryError:
        result["oom"] = "OutOfMemoryError"
    result["works_after_oom"] = float(cp.ones(10).sum()) == 10.0
    del reference, on_stream
    cp.cuda.Device().synchronize()
    result["statistics"] = rmm_next.statistics()
emit(result)
