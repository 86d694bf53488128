# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The code blocks of docs/python.md on PyTorch's two routes: a MemPool over rmm-next, and the
statistics shim for use(). One route per process:

    python3 examples/python/torch_routes.py mem_pool
    python3 examples/python/torch_routes.py shim
"""

import sys


def mem_pool():
    # [torch-mem-pool]
    import rmm_next
    import torch

    pool = rmm_next.torch.mem_pool()  # pool=, thread_cache=, device= as for use()
    with torch.cuda.use_mem_pool(pool):  # this thread's allocations
        x = torch.randn(4096, 4096, device="cuda")
    print(torch.cuda.memory_allocated(), pool.snapshot()[0]["total_size"])
    # [torch-mem-pool end]
    return x


def shim():
    import rmm_next
    import torch

    rmm_next.torch.use()
    # [torch-shim-one]
    torch.cuda.memory_allocated = rmm_next.torch.memory_allocated
    # [torch-shim-one end]
    # [torch-shim-all]
    for name in ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats"):
        setattr(torch.cuda, name, getattr(rmm_next.torch, name))
    # [torch-shim-all end]
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    print(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
    return x


if __name__ == "__main__":
    keep = {"mem_pool": mem_pool, "shim": shim}[sys.argv[1]]()
