# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Memory NCCL can register without a GPU: rmm_next.VmmOptions and the vmm_* C functions' argument
checks and layouts (rmm_next.torch.nccl_mem_pool() over a stand-in torch is in
test_torch_stand_in.py)."""

import ctypes
import re

import pytest

import rmm_next
from rmm_next import _lib
from conftest import gpu_reason

MiB = 1 << 20
no_gpu = pytest.mark.skipif(gpu_reason() is None, reason="a GPU is present: the failures differ")


def test_default_options_are_ncclmemallocs():
    o = rmm_next.VmmOptions()
    c = o.to_c()
    assert (c.segment_size, c.handle_types, c.granularity, c.peer_access, c.gpu_direct_rdma) == (
        64 * MiB, 0x1 | 0x8, 0, 1, 1)
    assert o.handle_types == ("posix_fd", "fabric")


def test_options_map_to_the_c_values():
    c = rmm_next.VmmOptions(segment_size=3 * MiB, handle_types="posix_fd", granularity="multicast",
                            peer_access=False, gpu_direct_rdma=False).to_c()
    assert (c.segment_size, c.handle_types, c.granularity, c.peer_access, c.gpu_direct_rdma) == (
        3 * MiB, 0x1, 2, 0, 0)
    assert rmm_next.VmmOptions(handle_types=["fabric", "fabric"]).handle_types == ("fabric",)
    assert rmm_next.VmmOptions(granularity="minimum").to_c().granularity == 1


@pytest.mark.parametrize("field,value,message", [
    ("segment_size", 0, "segment_size=0; pass a positive number of bytes"),
    ("segment_size", -1, "segment_size=-1"),
    ("segment_size", True, "segment_size=True"),
    ("segment_size", "64M", "segment_size='64M'"),
    ("handle_types", (), r"handle_types=\(\); pass 'posix_fd', 'fabric' or both"),
    ("handle_types", "nvlink", "handle_types='nvlink'"),
    ("handle_types", ("posix_fd", "win32"), "handle_types="),
    ("handle_types", 1, "handle_types=1"),
    ("granularity", "huge", "granularity='huge'; pass one of 'recommended', 'minimum', 'multicast'"),
    ("peer_access", 1, "peer_access=1; pass True or False"),
    ("gpu_direct_rdma", None, "gpu_direct_rdma=None"),
])
def test_bad_options_say_what_to_pass(field, value, message):
    with pytest.raises(ValueError, match=f"^rmm_next.VmmOptions: {message}"):
        rmm_next.VmmOptions(**{field: value})


def test_configure_vmm_rejects_anything_but_options_before_the_library():
    with pytest.raises(ValueError, match="rmm_next.configure_vmm: options=64; pass a rmm_next.VmmOptions"):
        rmm_next.configure_vmm(64)


def test_the_structures_match_the_c_layout():
    # rmm_next_vmm_options: size_t then four 32-bit fields; the statistics: 8 uint64, 4 32-bit.
    assert ctypes.sizeof(_lib.VmmOptions) == 8 + 4 * 4
    assert _lib.VmmOptions.handle_types.offset == 8
    assert ctypes.sizeof(_lib.VmmStatistics) == 8 * 8 + 4 * 4
    assert _lib.VmmStatistics.made.offset == 8 * 8 + 3 * 4


@pytest.mark.parametrize("bits,granularity,message", [
    (0, 0, "handle_types 0 is not a set of RMM_NEXT_VMM_HANDLE_POSIX_FD and RMM_NEXT_VMM_HANDLE_FABRIC"),
    (0x2, 0, "handle_types 2 is not a set"),
    (0x1, 3, r"granularity 3 is not an rmm_next_vmm_granularity \(0 recommended, 1 minimum, 2 multicast\)"),
    (0x1, -1, "granularity -1"),
])
def test_the_library_checks_the_options_before_touching_a_device(bits, granularity, message):
    lib = _lib.load()
    options = _lib.VmmOptions(0, bits, granularity, 1, 1)
    assert lib.rmm_next_vmm_configure(0, ctypes.byref(options)) == -1
    error = _lib.last_error(lib)
    assert re.match(message, error), error


def test_the_c_functions_refuse_null_outputs_and_ignore_null_frees():
    lib = _lib.load()
    assert lib.rmm_next_vmm_segments(0, None, None, 4) == -1
    assert "capacity but a null output array" in _lib.last_error(lib)
    assert lib.rmm_next_vmm_alloc(0, 0, None) is None  # 0 bytes: NULL, and nothing counted
    lib.rmm_next_vmm_free(None, 0, 0, None)


@no_gpu
def test_without_a_device_the_vmm_calls_fail_cleanly():
    with pytest.raises(rmm_next.RmmNextError, match="^rmm_next.configure_vmm: .*no usable CUDA driver or device"):
        rmm_next.configure_vmm()
    with pytest.raises(rmm_next.RmmNextError, match="^rmm_next.vmm_statistics: "):
        rmm_next.vmm_statistics(0)
    with pytest.raises(rmm_next.RmmNextError, match="^rmm_next.vmm_segments: "):
        rmm_next.vmm_segments(0)
    lib = _lib.load()
    assert lib.rmm_next_vmm_alloc(1 << 20, 0, None) is None
    assert "driver" in _lib.last_error(lib)
