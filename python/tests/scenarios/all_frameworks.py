# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch, CuPy and Numba in one process, all on rmm-next's pool for the device."""

import numpy as np
import torch
import cupy as cp
from numba import cuda

import rmm_next
import rmm_next.numba
from _common import emit

rmm_next.torch.use()
rmm_next.cupy.use()
cuda.set_memory_manager(rmm_next.numba.RmmNextNumbaManager)

t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
c = cp.asarray(t) * 2  # zero-copy view of the tensor, then a CuPy allocation
d = cuda.to_device(np.ones(1 << 20, dtype=np.float32))
total = float(c.sum()) + float(d.copy_to_host().sum())
stats = rmm_next.statistics(0)
emit(
    {
        "total_ok": total == float((1 << 20) * ((1 << 20) - 1)) + float(1 << 20),
        "statistics": stats,
    }
)
