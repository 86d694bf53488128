# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The code blocks of docs/python.md on PyTorch's two routes: a MemPool over rmm-next, and
PyTorch's statistics functions answered by rmm-next under use(). One route per process:

    python3 examples/python/torch_routes.py mem_pool
    python3 examples/python/torch_routes.py install_stats
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


def install_stats():
    # [torch-install-stats]
    import rmm_next
    import torch

    rmm_next.torch.use(install_stats=True)  # torch.cuda.memory_stats() and its companions
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    print(torch.cuda.memory_allocated(), torch.cuda.memory.max_memory_allocated())
    # [torch-install-stats end]
    return x


if __name__ == "__main__":
    keep = {"mem_pool": mem_pool, "install_stats": install_stats}[sys.argv[1]]()
