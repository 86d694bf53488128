# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Numba through rmm-next's EMM plugin."""

import pytest

from conftest import framework, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


@pytest.fixture(autouse=True)
def numba_installed(gpu):
    framework("numba")


def test_kernel_over_arrays_from_the_plugin(record):
    r = run_scenario("numba_kernel.py")
    record("numba.statistics", r["during"])
    assert r["manager"] == "RmmNextNumbaManager"
    assert r["correct"] and r["view_ok"]
    assert r["during"]["numba_allocations"] >= 3
    assert r["after"]["allocated_bytes"] == 0
    assert r["after"]["deallocations"] == r["after"]["allocations"]
    assert r["memory_info"][1] > 0
