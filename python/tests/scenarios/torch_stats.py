# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""What PyTorch's memory tools report under one route, for tensors of known sizes.

    torch_stats.py ROUTE      (native; use: rmm_next.torch.use(); mem_pool: the tensors inside
                               torch.cuda.use_mem_pool(rmm_next.torch.mem_pool()))

Reports rmm_next.torch.memory_stats() and rmm_next.statistics() around the allocations, whether
torch.cuda.memory_allocated(), the memory history, set_per_process_memory_fraction and the CUDA
IPC export of a tensor work, what empty_cache() and destroying the pool give back, and (mem_pool)
whether expandable_segments applies to the pool's segments.
"""

import collections
import contextlib
import gc
import sys

import torch

import rmm_next
from _common import emit, pool_segment_bytes

route = sys.argv[1]
SIZES = [1, 1000, 4096, 1 << 20, (3 << 20) + 512, 64 << 20]
KEYS = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current")

if route == "use":
    rmm_next.torch.use()
pool = rmm_next.torch.mem_pool() if route == "mem_pool" else None


def routed():
    return torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext()


def attempt(fn):
    try:
        fn()
        return {"ok": True}
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:600]}


def live_bytes():
    return rmm_next.statistics(0)["allocated_bytes"]


torch.zeros(1, device="cuda")
torch.cuda.synchronize()
result = {"route": route, "sizes": SIZES}
result["torch_memory_allocated"] = attempt(torch.cuda.memory_allocated)
result["record_history"] = attempt(
    lambda: torch.cuda.memory._record_memory_history(max_entries=100000)
)

with routed():
    before, rmm_before = rmm_next.torch.memory_stats(), live_bytes()
    tensors = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in SIZES]
    torch.cuda.synchronize()
    during, rmm_during = rmm_next.torch.memory_stats(), live_bytes()
    result["convenience_functions_agree"] = (
        rmm_next.torch.memory_allocated() == during["allocated_bytes.all.current"]
        and rmm_next.torch.max_memory_allocated() == during["allocated_bytes.all.peak"]
        and rmm_next.torch.memory_reserved() == during["reserved_bytes.all.current"]
    )
    if pool is not None:
        result["pool_segment_bytes"] = pool_segment_bytes(pool)
    result["memory_snapshot"] = attempt(torch.cuda.memory_snapshot)
    del tensors
    torch.cuda.synchronize()
    after = rmm_next.torch.memory_stats()
    rmm_next.torch.reset_peak_memory_stats()
    after_reset = rmm_next.torch.memory_stats()

result["delta"] = {k: during[k] - before[k] for k in KEYS}
result["peak_above_current_before"] = during["allocated_bytes.all.peak"] - before[KEYS[0]]
result["allocated_after_free_delta"] = after[KEYS[0]] - before[KEYS[0]]
result["peak_after_free_delta"] = after["allocated_bytes.all.peak"] - before[KEYS[0]]
result["after_reset"] = {k: after_reset[k] for k in KEYS[:2]}
result["rmm_delta"] = rmm_during - rmm_before
result["num_ooms"] = during.get("num_ooms")

if result["record_history"]["ok"]:
    snapshot = torch.cuda.memory._snapshot()
    traces = [t for device in snapshot["device_traces"] for t in device]
    result["history_actions"] = dict(collections.Counter(t["action"] for t in traces))
    result["history_alloc_sizes"] = sorted(t["size"] for t in traces if t["action"] == "alloc")
    torch.cuda.memory._record_memory_history(enabled=None)

torch.cuda.empty_cache()
torch.cuda.synchronize()
result["rmm_after_empty_cache_delta"] = live_bytes() - rmm_before
if pool is not None:
    del pool
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    result["rmm_after_pool_destroyed_delta"] = live_bytes() - rmm_before
    pool = rmm_next.torch.mem_pool()  # a new one for what follows


def fraction_refuses_4_gib():
    torch.cuda.set_per_process_memory_fraction(0.01)
    try:
        with routed():
            t = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            del t
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


result["allocation_over_memory_fraction"] = attempt(fraction_refuses_4_gib)

if route == "mem_pool":
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    (setter or torch.cuda.memory._set_allocator_settings)("expandable_segments:True")
    rmm_start = live_bytes()
    outside = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    with routed():
        inside = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    def segment_of(t):
        for s in torch.cuda.memory_snapshot():
            if s["address"] <= t.data_ptr() < s["address"] + s["total_size"]:
                return {"is_expandable": s.get("is_expandable"), "total_size": s["total_size"]}
        return None

    result["expandable"] = {
        "outside_pool": segment_of(outside),
        "inside_pool": segment_of(inside),
        "rmm_delta": live_bytes() - rmm_start,
    }
    del outside, inside

# Last: a refused export may leave a CUDA error that a later allocation would report.
def export():
    with routed():
        t = torch.ones(1 << 20, device="cuda")
        t.untyped_storage()._share_cuda_()


result["ipc_export"] = attempt(export)
emit(result)
