# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""torch.cuda.memory_stats()'s keys from rmm-next's counts (rmm_next._memory_stats), no GPU."""

import pytest

import rmm_next
from rmm_next import _lib, _memory_stats
from conftest import gpu_reason


def counts(**changes):
    """A dict shaped like rmm_next.statistics(), every count distinct."""
    stats = {name: 0 for name, _ in _lib.Statistics._fields_}
    stats.update(
        allocations=7,
        deallocations=4,
        failed_allocations=2,
        allocated_bytes=3000,
        allocated_bytes_high=9000,
        total_allocated_bytes=12000,
        pool_reserved_bytes=1 << 21,
        pool_reserved_bytes_high=1 << 22,
        pool_used_bytes=5000,
    )
    stats.update(changes)
    return stats


def test_bytes_counts_and_peaks_come_from_rmm_next_counts():
    s = _memory_stats.pytorch_style(counts())
    assert s["allocated_bytes.all.current"] == 3000
    assert s["allocated_bytes.all.peak"] == 9000
    assert s["allocated_bytes.all.allocated"] == 12000
    assert s["allocated_bytes.all.freed"] == 9000
    assert s["allocation.all.current"] == 3
    assert s["allocation.all.allocated"] == 7
    assert s["allocation.all.freed"] == 4
    assert s["reserved_bytes.all.current"] == 1 << 21
    assert s["reserved_bytes.all.peak"] == 1 << 22
    assert s["num_ooms"] == 2
    assert s["num_alloc_retries"] == 0
    # Unrounded: what was asked for is what is counted as allocated and active.
    for name in ("active_bytes", "requested_bytes"):
        for kind in ("current", "peak", "allocated", "freed"):
            key = f"{name}.all.{kind}"
            assert s[key] == s[f"allocated_bytes.all.{kind}"], key


def test_keys_are_sorted_like_pytorchs_and_every_value_is_an_int():
    s = _memory_stats.pytorch_style(counts())
    assert list(s) == sorted(s)
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
    assert "allocated_bytes.all.current" in s and "reserved_bytes.all.peak" in s


@pytest.mark.parametrize("field", ["allocated_bytes_high", "pool_reserved_bytes_high"])
def test_a_peak_never_reads_below_the_current_value(field):
    # A watermark the driver or a reset left below the current value (a pool trimmed and grown
    # again, a reset racing an allocation) reads as the current value.
    s = _memory_stats.pytorch_style(counts(**{field: 0}))
    assert s["allocated_bytes.all.peak"] >= s["allocated_bytes.all.current"]
    assert s["reserved_bytes.all.peak"] >= s["reserved_bytes.all.current"]


def test_reset_peak_statistics_names_the_call_when_it_fails():
    # Without a driver every device fails; with one, a device past the last one does.
    device = None if gpu_reason() is not None else rmm_next.device_count() + 3
    with pytest.raises(rmm_next.RmmNextError, match=r"^rmm_next.reset_peak_statistics: "):
        rmm_next.reset_peak_statistics(device)
