# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The code blocks of docs/python.md: each framework on rmm-next, and the statistics.

Run with a GPU, PyTorch, CuPy and Numba installed: python3 examples/python/frameworks.py
"""


def pytorch():
    # [torch]
    import rmm_next
    import torch

    rmm_next.torch.use()  # before the first CUDA tensor
    x = torch.randn(1024, 1024, device="cuda")
    # [torch end]
    return x


def pytorch_with_options():
    # [torch-options]
    import rmm_next

    rmm_next.torch.use(
        pool=rmm_next.OwnedPool(initial_pool_size=8 << 30),  # apart from other pools
        thread_cache=True,  # per-thread, per-stream cache in front of the pool
    )
    # [torch-options end]


def cupy():
    # [cupy]
    import cupy as cp
    import rmm_next

    rmm_next.cupy.use()
    y = cp.fft.fft(cp.random.standard_normal(1 << 20))
    # [cupy end]
    return y


def numba():
    # [numba]
    import numpy as np
    import rmm_next.numba
    from numba import cuda

    cuda.set_memory_manager(rmm_next.numba.RmmNextNumbaManager)  # before Numba's first context
    d = cuda.to_device(np.arange(1 << 20, dtype=np.float32))
    # [numba end]
    return d


def statistics():
    # [statistics]
    import rmm_next

    stats = rmm_next.statistics()  # the current device
    print(stats["torch_allocations"], stats["cupy_allocations"], stats["numba_allocations"])
    print(stats["allocated_bytes"], stats["pool_reserved_bytes"], stats["resource"])
    # [statistics end]


if __name__ == "__main__":
    keep = [pytorch(), cupy(), numba()]
    statistics()
