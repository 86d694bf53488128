# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Memory NCCL can register without a GPU: rmm_next.VmmOptions, the vmm_* C functions' argument
checks and layouts, and rmm_next.torch.nccl_mem_pool() over a stand-in torch package."""

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import rmm_next
from rmm_next import _lib
from conftest import PACKAGE_PATHS, gpu_reason

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


# ---- rmm_next.torch.nccl_mem_pool over a stand-in torch ------------------------------------------

FAKE_TORCH = '''
"""Stands in for PyTorch: records what rmm_next.torch asks of it."""
import contextlib, types
calls = []
class _Allocator:
    def __init__(self, path, alloc, free):
        calls.append(("CUDAPluggableAllocator", path, alloc, free))
        self.token = ("allocator", alloc, free)
    def allocator(self):
        return self.token
class MemPool:
    def __init__(self, allocator, **kwargs):
        calls.append(("MemPool", allocator, kwargs))
        self.allocator = allocator
@contextlib.contextmanager
def device(index):
    calls.append(("device", index))
    yield
def current_device():
    return 0
def _get_device_index(device, optional=False):
    return int(device)
from . import memory
'''


FAKE_MEMORY = '''
def CUDAPluggableAllocator(path, alloc, free):
    from . import _Allocator
    return _Allocator(path, alloc, free)
def change_current_allocator(allocator):
    pass
def _native(*args, **kwargs):
    return {}
memory_stats = memory_allocated = max_memory_allocated = _native
memory_reserved = max_memory_reserved = reset_peak_memory_stats = _native
'''


def run_with_fake_torch(tmp_path, prelude, body=None):
    """Runs `prelude` then `body` (after `import rmm_next.torch as rt`) against the stand-in torch;
    returns the JSON its last line prints."""
    if body is None:
        prelude, body = "", prelude
    package = tmp_path / "torch"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import cuda\n")
    (package / "cuda" / "__init__.py").write_text(FAKE_TORCH)
    (package / "cuda" / "memory.py").write_text(FAKE_MEMORY)
    script = "import json, sys\nimport torch\nimport rmm_next, rmm_next._vmm\n" \
             "import rmm_next.torch as rt\n" + prelude + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + PACKAGE_PATHS + sys.path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


RECORD_CONFIGURE = '''
configured = []
def record(options, device, *, _call):
    c = options.to_c()
    configured.append([device, _call, c.segment_size, c.handle_types, c.granularity,
                       c.peer_access, c.gpu_direct_rdma])
rmm_next._vmm.configure_vmm = record
'''


def test_nccl_mem_pool_is_a_mempool_over_the_vmm_functions(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    a = rt.nccl_mem_pool()
    b = rt.nccl_mem_pool(1, segment_size=32 << 20, peer_access=False, handle_types="posix_fd",
                         gpu_direct_rdma=False, granularity="minimum", symmetric=True)
    calls = [list(map(lambda v: list(v) if isinstance(v, tuple) else v, c)) for c in torch.cuda.calls]
    print(json.dumps({"configured": configured, "calls": calls, "path": rmm_next.library_path(),
                      "same": a.allocator == b.allocator}))
    ''')
    made = [c for c in r["calls"] if c[0] == "CUDAPluggableAllocator"]
    assert made == [["CUDAPluggableAllocator", r["path"], "rmm_next_vmm_alloc", "rmm_next_vmm_free"]]
    assert r["same"]  # one allocator for the process: a MemPool keeps a raw pointer to it
    pools = [c for c in r["calls"] if c[0] == "MemPool"]
    assert pools == [["MemPool", ["allocator", "rmm_next_vmm_alloc", "rmm_next_vmm_free"], {}],
                     ["MemPool", ["allocator", "rmm_next_vmm_alloc", "rmm_next_vmm_free"],
                      {"symmetric": True}]]
    # Each pool is made on its device, after that device's vmm_resource got the options.
    assert [c for c in r["calls"] if c[0] == "device"] == [["device", 0], ["device", 1]]
    assert r["configured"] == [
        [0, "rmm_next.torch.nccl_mem_pool", 64 * MiB, 0x9, 0, 1, 1],
        [1, "rmm_next.torch.nccl_mem_pool", 32 * MiB, 0x1, 1, 0, 0],
    ]


def test_nccl_mem_pool_argument_errors_name_the_call(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    errors = {}
    for name, kwargs in [("size", {"segment_size": 0}), ("types", {"handle_types": ()}),
                         ("granularity", {"granularity": "page"}), ("peer", {"peer_access": "all"}),
                         ("symmetric", {"symmetric": 1})]:
        try:
            rt.nccl_mem_pool(**kwargs)
        except ValueError as e:
            errors[name] = str(e)
    rt._allocator = object()  # as use() leaves it
    try:
        rt.nccl_mem_pool()
    except rmm_next.RmmNextError as e:
        errors["after_use"] = str(e)
    print(json.dumps({"errors": errors, "configured": configured,
                      "pools": sum(c[0] == "MemPool" for c in torch.cuda.calls)}))
    ''')
    e = r["errors"]
    assert e["size"].startswith("rmm_next.torch.nccl_mem_pool: segment_size=0; pass a positive")
    assert e["types"].startswith("rmm_next.torch.nccl_mem_pool: handle_types=()")
    assert e["granularity"].startswith("rmm_next.torch.nccl_mem_pool: granularity='page'")
    assert e["peer"].startswith("rmm_next.torch.nccl_mem_pool: peer_access='all'")
    assert e["symmetric"] == "rmm_next.torch.nccl_mem_pool: symmetric=1; pass True or False"
    assert "rmm_next.torch.use() replaced PyTorch's caching allocator" in e["after_use"]
    assert r["configured"] == [] and r["pools"] == 0  # nothing reached the library or PyTorch


def test_use_is_refused_after_nccl_mem_pool(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    rt.nccl_mem_pool()
    try:
        rt.use()
        print(json.dumps({"error": None}))
    except rmm_next.RmmNextError as e:
        print(json.dumps({"error": str(e)}))
    ''')
    assert "already made a rmm_next.torch.mem_pool() or nccl_mem_pool()" in r["error"]


@no_gpu
def test_nccl_mem_pool_without_a_device_raises_the_librarys_reason(tmp_path):
    r = run_with_fake_torch(tmp_path, '''
    try:
        rt.nccl_mem_pool(0)
        print(json.dumps({"error": None}))
    except rmm_next.RmmNextError as e:
        print(json.dumps({"error": str(e), "pools": sum(c[0] == "MemPool" for c in torch.cuda.calls)}))
    ''')
    assert r["error"].startswith("rmm_next.torch.nccl_mem_pool: ")
    assert "no usable CUDA driver or device" in r["error"]
    assert r["pools"] == 0
