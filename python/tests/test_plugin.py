# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The library on a GPU, without any framework."""

import pytest

from conftest import run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


def test_allocation_statistics_resources_and_out_of_memory():
    r = run_scenario("plugin_basics.py")
    assert r["initial_resource"] == "current_pool"
    assert r["aligned"]
    assert r["live_after_allocate"] == r["expected_live"]
    assert r["live_after_free"] == 0
    assert r["other_allocations"] == 5
    assert r["oom"] == "OutOfMemoryError" and "out_of_memory" in r["oom_message"]
    assert r["failed_allocations"] == 1
    assert r["works_after_oom"]
    assert r["refused_with_live_memory"]
    assert r["owned_resource"] == "owned_pool"
    assert r["owned_reserved"] >= 64 << 20
    assert r["cache_enabled"] and r["cache_hits"] >= 90
    assert r["resource_under_cache"] == "owned_pool"
    assert r["cached_after_release"] == 0
    assert r["final_resource"] == "current_pool"
    assert r["final_live"] == 0
    assert r["symbols"]
