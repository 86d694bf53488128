# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Numba through rmm-next's EMM plugin."""

import importlib.metadata
import re
import subprocess
import sys

import pytest

from conftest import framework, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


# What NumPy says for a name it no longer has: "module 'numpy' has no attribute 'row_stack'", or,
# for the names it removed on purpose, "`np.row_stack` was removed in the NumPy 2.5 release...".
_NUMPY_NAME_GONE = re.compile(
    r"AttributeError: (?:module 'numpy' has no attribute '(?P<plain>\w+)'"
    r"|`np\.(?P<removed>\w+)` was removed)")


def numpy_too_new(last_line):
    """The NumPy name numba-cuda asked for and the installed NumPy lacks, from the last line of
    the probe's error output; None when the probe failed for another reason."""
    match = _NUMPY_NAME_GONE.search(last_line)
    return (match.group("plain") or match.group("removed")) if match else None


def version_of(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


@pytest.fixture(autouse=True)
def numba_installed(gpu):
    framework("numba")
    # Numba must compile a kernel on its own first. A numba-cuda that asks for a NumPy name the
    # installed NumPy removed (numba-cuda's np.row_stack, gone in NumPy 2.5) cannot run here at all:
    # that is the environment, and the test says so as its skip. Any other failure of Numba's own
    # kernel fails the test.
    probe = subprocess.run(
        [sys.executable, "-c",
         "from numba import cuda\n@cuda.jit\ndef k(x):\n    x[0] = 1\n"
         "a = cuda.device_array(1)\nk[1, 1](a)\ncuda.synchronize()"],
        capture_output=True, text=True, timeout=300, check=False)
    if probe.returncode == 0:
        return
    last = (probe.stderr.strip().splitlines() or ["(no error output)"])[-1]
    name = numpy_too_new(last)
    if name is not None:
        pytest.skip(f"numba-cuda {version_of('numba-cuda')} uses numpy.{name}, which NumPy "
                    f"{version_of('numpy')} does not have ({last}); NumPy 2.4 has it "
                    "(docs/python.md, Tests)")
    pytest.fail(f"numba cannot compile a kernel here without rmm-next: {last}\n{probe.stderr}")


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
