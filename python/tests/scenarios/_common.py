# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Helpers of the scenario scripts: each prints one JSON object as its last line."""

import json
import sys

GiB = 1 << 30


def emit(result):
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def used_bytes(device=0):
    """Device memory in use by every process and context (cudaMemGetInfo: total - free)."""
    import rmm_next

    free, total = rmm_next.mem_get_info(device)
    return total - free


def pool_segment_bytes(pool):
    """Bytes of a torch.cuda.MemPool's segments, from its snapshot."""
    segments = pool.snapshot()
    return sum(
        s["total_size"]
        for s in segments
        if tuple(s.get("segment_pool_id", pool.id)) == tuple(pool.id)
    )
