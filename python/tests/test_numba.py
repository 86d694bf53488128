# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Numba through rmm-next's EMM plugin."""

import subprocess
import sys

import pytest

from conftest import framework, run_scenario

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
        pytest.skip(f"numba cannot compile a kernel here without rmm-next: {last}")


def test_kernel_over_arrays_from_the_plugin(record):
    r = run_scenario("numba_kernel.py")
    record("numba.statistics", r["during"])
    assert r["manager"] == "RmmNextNumbaManager"
    assert r["correct"] and r["view_ok"]
    assert r["during"]["numba_allocations"] >= 3
    assert r["after"]["allocated_bytes"] == 0
    assert r["after"]["deallocations"] == r["after"]["allocations"]
    assert r["memory_info"][1] > 0
