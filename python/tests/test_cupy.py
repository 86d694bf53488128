# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""CuPy through rmm-next: a mixed workload, streams, out of memory."""

import math

import pytest

from conftest import framework, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


@pytest.fixture(autouse=True)
def cupy_installed(gpu):
    framework("cupy")


def test_mixed_workload_matches_cupys_pool(record):
    native = run_scenario("cupy_workload.py", "native")
    rmm = run_scenario("cupy_workload.py", "rmm")
    assert len(native["values"]) == len(rmm["values"])
    for a, b in zip(native["values"], rmm["values"]):
        assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6), (a, b)
    record("cupy.native.seconds", round(native["seconds"], 4))
    record("cupy.rmm.seconds", round(rmm["seconds"], 4))
    record("cupy.rmm.ratio_to_cupy_pool", round(native["seconds"] / rmm["seconds"], 3))
    assert rmm["non_blocking_stream_matches"]
    assert rmm["survivor_sum_ok"] and rmm["survivor_freed"]
    assert rmm["oom"] == "OutOfMemoryError" and rmm["works_after_oom"]
    stats = rmm["statistics"]
    record("cupy.rmm.statistics", stats)
    assert stats["cupy_allocations"] > 1000
    assert stats["failed_allocations"] == 1  # the deliberate one
