# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch allocates SIZE GiB and frees it; then rmm-next allocates SIZE GiB. How much does the
device hold at the peak?

    one_pool.py MODE [SIZE_GIB]

MODE: native (PyTorch's caching allocator), async (run with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync), rmm (rmm_next.torch.use()).
"""

import sys

import torch

import rmm_next
from _common import GiB, emit, used_bytes

mode = sys.argv[1]
size = int(float(sys.argv[2] if len(sys.argv) > 2 else 32) * GiB)
if mode == "rmm":
    rmm_next.torch.use()

torch.zeros(1, device="cuda")  # the context, cuBLAS-free
torch.cuda.synchronize()
base = used_bytes(0)

t = torch.empty(size, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
held_by_torch = used_bytes(0) - base
del t
torch.cuda.synchronize()
after_torch_free = used_bytes(0) - base

p = rmm_next.allocate(size, 0)  # rmm-next: the device's current pool, as always by default
torch.cuda.synchronize()
peak = used_bytes(0) - base
rmm_next.deallocate(p, size, 0)
torch.cuda.synchronize()

emit(
    {
        "mode": mode,
        "allocator_backend": torch.cuda.get_allocator_backend(),
        "size_gib": size / GiB,
        "held_by_torch_gib": held_by_torch / GiB,
        "after_torch_free_gib": after_torch_free / GiB,
        "peak_gib": peak / GiB,
    }
)
