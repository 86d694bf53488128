# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""One pool for everyone: PyTorch allocates 32 GiB and frees it, then rmm-next allocates 32 GiB.

PyTorch's caching allocator keeps its 32 GiB: the device holds 64 GiB. Its cudaMallocAsync
backend and rmm-next share the device's current pool: 32 GiB.
"""

import pytest

import rmm_next
from conftest import framework, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]
SIZE_GIB = 32


@pytest.fixture(autouse=True)
def torch_and_room(gpu):
    framework("torch")
    free, total = rmm_next.mem_get_info(0)
    if free < (2 * SIZE_GIB + 4) << 30:
        pytest.skip(f"needs {2 * SIZE_GIB + 4} GiB free on device 0, has {free >> 30}")


def test_pytorch_and_rmm_next_share_the_pool_unless_pytorch_caches(record):
    native = run_scenario("one_pool.py", "native", SIZE_GIB)
    shared = run_scenario(
        "one_pool.py", "async", SIZE_GIB, env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    )
    rmm = run_scenario("one_pool.py", "rmm", SIZE_GIB)
    for r in (native, shared, rmm):
        record(f"one_pool.{r['mode']}.peak_gib", round(r["peak_gib"], 2))
        assert r["held_by_torch_gib"] >= SIZE_GIB * 0.99
    assert native["peak_gib"] >= 2 * SIZE_GIB * 0.98  # two copies: PyTorch's cache and the pool
    assert shared["peak_gib"] <= SIZE_GIB * 1.05
    assert rmm["peak_gib"] <= SIZE_GIB * 1.05


def test_pytorch_cupy_and_numba_in_one_process_share_rmm_next():
    framework("cupy")
    framework("numba")
    r = run_scenario("all_frameworks.py")
    s = r["statistics"]
    assert r["total_ok"]
    assert s["torch_allocations"] > 0 and s["cupy_allocations"] > 0 and s["numba_allocations"] > 0
