# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Records a CuPy trace through rmm-next: array math with temporaries of varied sizes, FFTs,
sorts, matrix products and a window of longer-lived results, on the default stream and a second
stream.

    record_cupy_trace.py OUT_DIR [--iterations N]     (default 400)

Writes OUT_DIR/cupy_workload.csv.gz (RMM's log format) and cupy_workload.json.
"""

import collections
import random
import time

from trace_files import arguments, finish

args = arguments(__doc__, "iterations", 400)
out = args.out

import cupy as cp  # noqa: E402  (first: the process then uses CuPy's CUDA runtime)

import rmm_next  # noqa: E402

log = out / "cupy_workload.csv"
rmm_next.configure(log=log)
rmm_next.cupy.use()
choose = random.Random(7)
rs = cp.random.RandomState(seed=42)
side = cp.cuda.Stream(non_blocking=True)
window = collections.deque(maxlen=12)  # results kept for a while, as state is
ELEMENTS = [1 << 8, 3 << 10, 1 << 14, 5 << 14, 1 << 18, 3 << 18, 1 << 20, 3 << 20, 1 << 22]
start = time.perf_counter()
for i in range(args.iterations):
    stream = side if i % 5 == 4 else cp.cuda.Stream.null
    with stream:
        n = choose.choice(ELEMENTS)
        x = rs.standard_normal(n, dtype=cp.float32)
        spectrum = cp.fft.rfft(x)
        power = cp.abs(spectrum) ** 2
        top = cp.argsort(power)[-16:]
        ordered = cp.sort(x)
        smooth = cp.fft.irfft(spectrum * (cp.arange(spectrum.size) < spectrum.size // 4), n)
        y = cp.sin(x) * cp.exp(-x * x) + smooth - ordered[::-1]
        k = choose.choice([64, 128, 256, 512, 1024])
        a = rs.standard_normal((k, k), dtype=cp.float32)
        gram = a @ a.T
        stats = cp.stack(
            [power.sum(), y.std(), cp.linalg.norm(gram), top.astype(cp.float32).mean()]
        )
        window.append(cp.cumsum(y)[:: choose.choice([1, 2, 4, 8])].copy())
        if i % 25 == 24:
            joined = cp.concatenate(list(window))
            stats = stats + joined.mean()
            del joined
        float(stats[0])  # a host round trip, as programs make
    del x, spectrum, power, top, ordered, smooth, y, a, gram, stats
cp.cuda.Device().synchronize()
seconds = time.perf_counter() - start
window.clear()
cp.fft.config.get_plan_cache().clear()
rmm_next.configure(log=None)
finish(log, {"workload": "cupy_workload", "iterations": args.iterations, "seconds": seconds,
             "cupy": cp.__version__})
