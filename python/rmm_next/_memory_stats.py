# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""``torch.cuda.memory_stats()``'s keys answered from rmm-next's own counts (no PyTorch here)."""


def pytorch_style(stats):
    """The ``torch.cuda.memory_stats()`` keys that a dict of ``rmm_next.statistics()`` answers.

    rmm-next counts the bytes asked for, unrounded, so allocated, active and requested bytes are
    equal; reserved bytes are those of the pool serving the device (every user of a shared pool
    counts). rmm-next does not count retries: ``num_alloc_retries`` is 0. ``num_ooms`` counts the
    allocations that returned NULL.
    """
    current = stats["allocated_bytes"]
    total = stats["total_allocated_bytes"]
    out = {}
    for name in ("allocated_bytes", "active_bytes", "requested_bytes"):
        out[f"{name}.all.current"] = current
        out[f"{name}.all.peak"] = max(stats["allocated_bytes_high"], current)
        out[f"{name}.all.allocated"] = total
        out[f"{name}.all.freed"] = total - current
    out["allocation.all.current"] = stats["allocations"] - stats["deallocations"]
    out["allocation.all.allocated"] = stats["allocations"]
    out["allocation.all.freed"] = stats["deallocations"]
    out["reserved_bytes.all.current"] = stats["pool_reserved_bytes"]
    out["reserved_bytes.all.peak"] = max(
        stats["pool_reserved_bytes_high"], stats["pool_reserved_bytes"]
    )
    out["num_alloc_retries"] = 0
    out["num_ooms"] = stats["failed_allocations"]
    return dict(sorted(out.items()))
