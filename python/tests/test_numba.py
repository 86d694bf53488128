# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Numba through rmm-next's EMM plugin."""

import subprocess
import sys

import pytest

from conftest import framework, required, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


@pytest.fixture(autouse=True)
def numba_installed(gpu):
    framework("numba")
    # Numba must compile a kernel on its own first: a numba-cuda that does not work with the
    # installed NumPy is the environment's problem, not the plugin's.
    probe = subprocess.run(
        [sys.executable, "-c",
         "from numba import cuda\n@cuda.jit\ndef k(x):\n    x[0] = 1\n"
         "a = cuda.device_array(1)\nk[1, 1](a)\ncuda.synchronize()"],
        capture_output=True, text=True, timeout=300, check=False)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        reason = f"numba cannot compile a kernel here without rmm-next: {last}"
        if required("RMM_NEXT_REQUIRE_FRAMEWORKS"):
            pytest.fail(f"RMM_NEXT_REQUIRE_FRAMEWORKS=1 but {reason}")
        pytest.skip(reason)


def test_kernel_over_arrays_from_the_plugin(record):
    r = run_scenario("numba_kernel.py")
    record("numba.statistics", r["during"])
    assert r["manager"] == "RmmNextNumbaManager"
    assert r["correct"] and r["view_ok"] and r["stream_correct"]
    # x, y and out (1 Mi float32 each) came from rmm-next, through the Numba entry points only.
    during = r["during"]
    assert during["numba_allocations"] >= 3
    assert during["allocations"] == during["numba_allocations"]
    assert during["allocated_bytes"] >= 3 * 4 * (1 << 20)
    assert during["pool_used_bytes"] >= during["allocated_bytes"]
    assert r["freed_inside_defer_cleanup"]
    assert r["after"]["allocated_bytes"] == 0
    assert r["after"]["deallocations"] == r["after"]["allocations"]
    free, total = r["memory_info"]
    assert 0 < free <= total
