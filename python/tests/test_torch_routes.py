# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's two routes through rmm-next, use() and mem_pool(): training, statistics, graph trees,
history, memory fraction, IPC export. docs/python.md's feature table names these tests."""

import pytest

from conftest import TRAIN_STEPS, compare_to_native, framework, run_scenario

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]
STEPS = TRAIN_STEPS
SIZES = [1, 1000, 4096, 1 << 20, (3 << 20) + 512, 64 << 20]  # torch_stats.py's tensors
MiB = 1 << 20


def round_512(n):
    """The size PyTorch's caching allocator counts for a request of n bytes."""
    return max(512, (n + 511) // 512 * 512)


@pytest.fixture(autouse=True)
def torch_installed(gpu):
    framework("torch")


@pytest.fixture(scope="module")
def ways(training):
    """The ways, from the session's training runs (test_torch.py shares native and use's)."""
    modes = {"native": "native", "use": "rmm", "use_cache": "rmm_cache",
             "use_segments": "rmm_segments", "mem_pool": "mem_pool"}
    return compare_to_native({way: training(mode) for way, mode in modes.items()})


@pytest.fixture(scope="module")
def stats(gpu):
    framework("torch")
    return {route: run_scenario("torch_stats.py", route) for route in ("native", "use", "mem_pool")}


def test_four_ways_train_to_the_same_losses(ways, record):
    native = ways["native"]["losses"]
    assert len(native) == STEPS and native[-1] < native[0]  # it trains
    for way in ("use", "use_cache", "use_segments", "mem_pool"):
        w = ways[way]
        record(f"torch.ways.{way}.max_loss_difference_vs_native", w["max_loss_difference_vs_native"])
        record(f"torch.ways.{way}.losses_identical_to_native", w["losses_identical_to_native"])
        assert len(w["losses"]) == STEPS, way
        assert w["max_loss_difference_vs_native"] <= 1e-5 * max(1.0, max(map(abs, native))), way


def test_four_ways_steps_per_second(ways, record):
    for way, w in ways.items():
        record(f"torch.ways.{way}.steps_per_second", round(w["steps_per_second"], 1))
        record(f"torch.ways.{way}.ratio_to_native", round(w["ratio_to_native"], 3))
        assert w["steps_per_second"] > 0.5 * ways["native"]["steps_per_second"], way  # sanity only


def test_the_segment_cache_serves_training_and_gives_idle_segments_back(ways, record):
    w = ways["use_segments"]
    during, after = w["segment_cache"], w["segment_cache_after_empty_cache"]
    record("torch.ways.use_segments.segment_cache", during)
    record("torch.ways.use_segments.segment_cache_after_empty_cache", after)
    assert during["enabled"] and during["hits"] > during["misses"] > 0
    # What PyTorch still holds (its cuBLAS workspaces) is the cache's live bytes, and nothing idle
    # stays: every free was on the legacy default stream, whose lane empty_cache() names, so
    # stream order proves them all, the autograd thread's included.
    assert after["live_bytes"] == w["allocated_after_empty_cache"]
    assert after["idle_bytes"] == after["unproven_bytes"] == 0
    # The pool hands out only the segments that hold those live blocks.
    assert w["pool_used_after_empty_cache"] == after["segment_bytes"] >= after["live_bytes"]


def test_mem_pool_training_takes_its_segments_from_rmm_next(ways, record):
    w = ways["mem_pool"]
    record("torch.ways.mem_pool.pool_segment_bytes", w["pool_segment_bytes"])
    record("torch.ways.mem_pool.statistics", w["statistics"])
    s = w["statistics"]
    assert s["torch_allocations"] >= 1 and s["failed_allocations"] == 0
    # Every byte of the pool's segments is live in rmm-next: PyTorch holds them until the pool dies.
    assert s["allocated_bytes"] >= w["pool_segment_bytes"] > 0
    assert w["torch_reserved_bytes"] >= w["pool_segment_bytes"]


def test_memory_stats_through_use_count_the_exact_bytes(stats, record):
    r = stats["use"]
    record("torch.stats.use", {k: r[k] for k in ("delta", "after_reset", "num_ooms")})
    exact = sum(SIZES)  # rmm-next counts what PyTorch asks for, unrounded
    assert r["delta"]["allocated_bytes.all.current"] == exact
    assert r["peak_above_current_before"] == exact
    assert r["rmm_delta"] == exact
    assert r["allocated_after_free_delta"] == 0
    assert r["peak_after_free_delta"] == exact  # the peak stays until reset
    assert r["after_reset"]["allocated_bytes.all.peak"] == r["after_reset"]["allocated_bytes.all.current"]
    assert r["delta"]["reserved_bytes.all.current"] >= 0
    assert r["convenience_functions_agree"]
    assert r["num_ooms"] == 0
    # What the shim is for: PyTorch's own function raises on this route.
    assert not r["torch_memory_allocated"]["ok"]
    assert "getDeviceStats" in r["torch_memory_allocated"]["error"]


def test_memory_stats_through_mem_pool_are_pytorchs_over_rmm_next_segments(stats, record):
    r = stats["mem_pool"]
    record("torch.stats.mem_pool", {k: r[k] for k in ("delta", "rmm_delta", "pool_segment_bytes")})
    rounded = sum(map(round_512, SIZES))  # PyTorch's caching allocator rounds to 512 bytes
    assert r["delta"]["allocated_bytes.all.current"] == rounded
    assert r["peak_above_current_before"] == rounded
    assert r["allocated_after_free_delta"] == 0
    assert r["after_reset"]["allocated_bytes.all.peak"] == r["after_reset"]["allocated_bytes.all.current"]
    # The segments PyTorch reserved for the pool are what rmm-next handed out, and the pool's
    # snapshot shows them.
    assert r["delta"]["reserved_bytes.all.current"] == r["rmm_delta"] == r["pool_segment_bytes"]
    assert r["rmm_delta"] >= sum(SIZES)
    assert r["convenience_functions_agree"] and r["torch_memory_allocated"]["ok"]


def test_memory_stats_natively_are_pytorchs_rounded_counts(stats):
    r = stats["native"]
    rounded = sum(map(round_512, SIZES))
    assert r["delta"]["allocated_bytes.all.current"] == rounded
    assert r["after_reset"]["allocated_bytes.all.peak"] == r["after_reset"]["allocated_bytes.all.current"]
    assert r["rmm_delta"] == 0  # nothing went through rmm-next


@pytest.mark.parametrize("route,works", [("native", True), ("mem_pool", True), ("use", False)])
def test_memory_snapshot_works_unless_use_replaced_the_allocator(stats, route, works):
    r = stats[route]["memory_snapshot"]
    assert r["ok"] is works, r


def test_empty_cache_keeps_a_live_pools_segments_and_destroying_it_returns_them(stats, record):
    r = stats["mem_pool"]
    record("torch.stats.mem_pool.rmm_after_empty_cache_delta", r["rmm_after_empty_cache_delta"])
    assert r["rmm_after_empty_cache_delta"] == r["rmm_delta"] > 0
    assert r["rmm_after_pool_destroyed_delta"] == 0
    assert stats["use"]["rmm_after_empty_cache_delta"] == 0


@pytest.mark.parametrize("route", ["native", "mem_pool"])
def test_memory_history_records_the_allocations(stats, route):
    r = stats[route]
    assert r["record_history"]["ok"], r["record_history"]
    assert r["history_actions"].get("alloc", 0) >= len(SIZES)
    # Each tensor's allocation, by the size asked for (PyTorch 2.11 records that, not the block's).
    recorded = list(r["history_alloc_sizes"])
    for size in SIZES:
        found = size if size in recorded else round_512(size)
        assert found in recorded, (size, recorded)
        recorded.remove(found)


def test_memory_history_is_unavailable_through_use(stats):
    r = stats["use"]["record_history"]
    assert not r["ok"] and "recordHistory" in r["error"], r


def test_memory_fraction_bounds_native_and_mem_pool_and_use_ignores_it(stats, record):
    for route in ("native", "mem_pool", "use"):
        record(f"torch.fraction.{route}", stats[route]["allocation_over_memory_fraction"])
    for route in ("native", "mem_pool"):
        r = stats[route]["allocation_over_memory_fraction"]
        assert not r["ok"] and "OutOfMemoryError" in r["error"], (route, r)
    # PyTorch's pluggable allocator drops the fraction: bound use() with OwnedPool(maximum_pool_size).
    assert stats["use"]["allocation_over_memory_fraction"]["ok"]


def test_expandable_segments_never_apply_to_a_mem_pools_segments(stats, record):
    e = stats["mem_pool"]["expandable"]
    record("torch.expandable", e)
    assert e["outside_pool"]["is_expandable"] is True
    assert not e["inside_pool"]["is_expandable"]
    assert e["rmm_delta"] >= 8 * MiB  # the pool's new segment came from rmm-next


def test_ipc_export_works_only_with_pytorchs_own_segments(stats, record):
    for route in ("native", "use", "mem_pool"):
        record(f"torch.ipc_export.{route}", stats[route]["ipc_export"])
    assert stats["native"]["ipc_export"]["ok"]
    assert not stats["use"]["ipc_export"]["ok"]
    assert not stats["mem_pool"]["ipc_export"]["ok"]


def skip_unless_compile_runs_natively(r, record):
    """Skips when `r`, a torch_compile.py route, failed the way PyTorch's own allocator fails too:
    then torch.compile itself cannot run on this machine, whatever the allocator."""
    if r.get("ran") or "checkPoolLiveAllocations" in (r.get("error") or ""):
        return
    native = run_scenario("torch_compile.py", "native")
    record("torch.compile.native", {k: native.get(k) for k in ("ran", "error", "traceback")})
    if not native["ran"] and native["error"].split(":")[0] == r["error"].split(":")[0]:
        pytest.skip(f"torch.compile(mode='reduce-overhead') fails with PyTorch's own allocator "
                    f"too, so not because of rmm-next: {native['error'][:300]}")


def test_reduce_overhead_through_use_names_check_pool_live_allocations(record):
    r = run_scenario("torch_compile.py", "use")
    record("torch.compile.use", {k: r.get(k) for k in ("ran", "error", "traceback")})
    skip_unless_compile_runs_natively(r, record)
    assert not r["ran"]
    assert "checkPoolLiveAllocations" in r["error"]


def test_reduce_overhead_through_mem_pool_matches_eager(record):
    r = run_scenario("torch_compile.py", "mem_pool")
    record("torch.compile.mem_pool",
           {k: r.get(k) for k in ("ran", "max_difference", "error", "traceback")})
    skip_unless_compile_runs_natively(r, record)
    assert r["ran"], r.get("error")
    assert r["max_difference"] < 1e-4
    assert r["cudagraph_skips"] == 0  # CUDA graph trees ran, not eager fallback
    assert r["statistics"]["torch_allocations"] >= 1


def test_reduce_overhead_called_inside_use_mem_pool_never_gives_wrong_output(record):
    # Inside use_mem_pool the graph trees' own pool competes with the user's pool for the calling
    # thread's allocations (PyTorch takes the first matching pool): recorded; wrong output fails.
    r = run_scenario("torch_compile.py", "mem_pool_inside")
    record("torch.compile.mem_pool_inside", {k: r.get(k) for k in ("ran", "max_difference", "error")})
    if r["ran"]:
        assert r["max_difference"] < 1e-4


def test_cuda_graph_captured_in_a_mem_pool_replays_correctly(record):
    r = run_scenario("torch_graph.py", "pool")
    record("torch.graph.mem_pool.max_parameter_difference", r["max_parameter_difference"])
    assert r["max_parameter_difference"] < 1e-4
    assert r["statistics"]["torch_allocations"] >= 1  # the capture's segments came from rmm-next
    assert r["statistics"]["failed_allocations"] == 0


def test_record_stream_in_a_mem_pool_orders_the_reuse_after_the_side_stream():
    r = run_scenario("torch_side_stream.py", 1, "pool")
    assert r["wrong"] == 0, r
    assert r["statistics"]["torch_allocations"] >= 1
