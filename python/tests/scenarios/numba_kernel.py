# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""A Numba kernel over device arrays allocated through rmm-next's EMM plugin: on the default
stream and on a stream of Numba's, with views, and a free inside ``defer_cleanup``."""

import gc

import numpy as np
from numba import cuda

import rmm_next
import rmm_next.numba
from _common import emit

cuda.set_memory_manager(rmm_next.numba.RmmNextNumbaManager)


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


n = 1 << 20
x = np.arange(n, dtype=np.float32)
y = np.ones(n, dtype=np.float32)
d_x, d_y = cuda.to_device(x), cuda.to_device(y)
d_out = cuda.device_array_like(x)
axpy[(n + 255) // 256, 256](2.0, d_x, d_y, d_out)
result = {
    "correct": bool(np.allclose(d_out.copy_to_host(), 2.0 * x + y)),
    "manager": type(cuda.current_context().memory_manager).__name__,
    "during": rmm_next.statistics(0),
}
# Views and slices keep their base alive; the base's finalizer frees it.
view = d_out[: n // 2]
del d_x, d_y, d_out
gc.collect()
result["view_ok"] = bool(np.allclose(view.copy_to_host(), 2.0 * x[: n // 2] + 1.0))
del view
gc.collect()

# On a stream of Numba's (blocking: ordered after the legacy default stream the plugin uses).
stream = cuda.stream()
s_x = cuda.to_device(x, stream=stream)
s_out = cuda.device_array_like(x, stream=stream)
axpy[(n + 255) // 256, 256, stream](3.0, s_x, s_x, s_out)
host_out = s_out.copy_to_host(stream=stream)
stream.synchronize()
result["stream_correct"] = bool(np.allclose(host_out, 4.0 * x))  # 3 x + x
del s_x, s_out
gc.collect()

# The plugin frees at once, also while Numba defers its own cleanup.
with cuda.defer_cleanup():
    scratch = cuda.device_array(1024, dtype=np.float32)
    before = rmm_next.statistics(0)["deallocations"]
    del scratch
    gc.collect()
    result["freed_inside_defer_cleanup"] = rmm_next.statistics(0)["deallocations"] == before + 1
result["after"] = rmm_next.statistics(0)
result["memory_info"] = list(cuda.current_context().get_memory_info())
emit(result)
