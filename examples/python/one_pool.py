# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch allocates 32 GiB and frees it, then rmm-next allocates 32 GiB: how much does the
device hold? Run three times:

    python3 examples/python/one_pool.py native
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 examples/python/one_pool.py async
    python3 examples/python/one_pool.py rmm
"""

# [one-pool]
import sys

import rmm_next
import torch

GiB = 1 << 30
if sys.argv[1] == "rmm":
    rmm_next.torch.use()


def used():
    free, total = torch.cuda.mem_get_info()
    return total - free


torch.zeros(1, device="cuda")
base = used()
t = torch.empty(32 * GiB, dtype=torch.uint8, device="cuda")
del t  # PyTorch is done with it
torch.cuda.synchronize()
p = rmm_next.allocate(32 * GiB)  # rmm-next: the device's current pool
torch.cuda.synchronize()
print(f"{sys.argv[1]}: the device holds {(used() - base) / GiB:.1f} GiB")
rmm_next.deallocate(p, 32 * GiB)
# [one-pool end]
