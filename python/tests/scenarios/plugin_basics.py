# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""No framework: allocation, statistics, resource choices, thread cache and OOM through the
library's own Python functions."""

import ctypes

import rmm_next
from _common import emit

out = {}
s0 = rmm_next.statistics(0)
out["initial_resource"] = s0["resource"]

# Stream-ordered allocate / deallocate on the legacy default stream.
sizes = [1, 255, 4096, 1 << 20, 3 << 20]
ptrs = [rmm_next.allocate(n, 0) for n in sizes]
out["aligned"] = all(p % 256 == 0 for p in ptrs)
s1 = rmm_next.statistics(0)
out["live_after_allocate"] = s1["allocated_bytes"]
out["expected_live"] = sum(sizes)
for p, n in zip(ptrs, sizes):
    rmm_next.deallocate(p, n, 0)
s2 = rmm_next.statistics(0)
out["live_after_free"] = s2["allocated_bytes"]
out["other_allocations"] = s2["other_allocations"]

# Out of memory: an exception in Python, NULL in C, and the library keeps working.
try:
    rmm_next.allocate(1 << 50, 0)
    out["oom"] = "no exception"
except rmm_next.OutOfMemoryError as e:
    out["oom"] = "OutOfMemoryError"
    out["oom_message"] = str(e)
out["failed_allocations"] = rmm_next.statistics(0)["failed_allocations"]
p = rmm_next.allocate(1 << 20, 0)
rmm_next.deallocate(p, 1 << 20, 0)
out["works_after_oom"] = True

# Changing the resource with memory still allocated is refused.
p = rmm_next.allocate(1 << 20, 0)
try:
    rmm_next.use_owned_pool(0)
    out["refused_with_live_memory"] = False
except rmm_next.RmmNextError as e:
    out["refused_with_live_memory"] = "still has" in str(e)
rmm_next.deallocate(p, 1 << 20, 0)

# An owned pool, primed, then a thread cache in front of it.
rmm_next.use_owned_pool(0, rmm_next.OwnedPool(initial_pool_size=64 << 20))
s3 = rmm_next.statistics(0)
out["owned_resource"] = s3["resource"]
out["owned_reserved"] = s3["pool_reserved_bytes"]
rmm_next.enable_thread_cache(0)
for _ in range(100):
    q = rmm_next.allocate(1000, 0)
    rmm_next.deallocate(q, 1000, 0)
s4 = rmm_next.statistics(0)
out["cache_enabled"] = s4["thread_cache_enabled"]
out["cache_hits"] = s4["cache_hits"]
out["resource_under_cache"] = s4["resource"]
rmm_next.release_unused(0)
out["cached_after_release"] = rmm_next.statistics(0)["cached_bytes"]
rmm_next.disable_thread_cache(0)
rmm_next.use_current_pool(0)
out["final_resource"] = rmm_next.statistics(0)["resource"]
out["final_live"] = rmm_next.statistics(0)["allocated_bytes"]

# The C functions exist with the names the frameworks are given.
lib = ctypes.CDLL(rmm_next.library_path())
out["symbols"] = all(
    hasattr(lib, name)
    for name in (
        "rmm_next_torch_alloc",
        "rmm_next_torch_free",
        "rmm_next_torch_record_stream",
        "rmm_next_cupy_malloc",
        "rmm_next_cupy_free",
        "rmm_next_numba_alloc",
        "rmm_next_numba_free",
    )
)
emit(out)
