# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm_next.torch over a stand-in torch package (fake_torch.py), no GPU and no PyTorch:
nccl_mem_pool() and register_mem_pool() on each generation of PyTorch's symmetric registration,
and use(install_stats=True)."""

import pytest

from rmm_next import _lib, _memory_stats
from conftest import gpu_reason
from fake_torch import CALLS, RECORD_CONFIGURE, run_with_fake_torch

MiB = 1 << 20
VMM_ALLOCATOR = ["allocator", "rmm_next_vmm_alloc", "rmm_next_vmm_free"]
no_gpu = pytest.mark.skipif(gpu_reason() is None, reason="a GPU is present: the failures differ")


def test_nccl_mem_pool_is_a_mempool_over_the_vmm_functions(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    a = rt.nccl_mem_pool()
    b = rt.nccl_mem_pool(1, segment_size=32 << 20, peer_access=False, handle_types="posix_fd",
                         gpu_direct_rdma=False, granularity="minimum")
    print(json.dumps({"configured": configured, "made": calls("CUDAPluggableAllocator"),
                      "pools": calls("MemPool"), "devices": calls("device"),
                      "path": rmm_next.library_path(), "same": a.allocator == b.allocator}))
    ''')
    assert r["made"] == [[r["path"], "rmm_next_vmm_alloc", "rmm_next_vmm_free"]]
    assert r["same"]  # one allocator for the process: a MemPool keeps a raw pointer to it
    defaults = {"use_on_oom": False, "no_split": False}
    assert r["pools"] == [[VMM_ALLOCATOR, defaults], [VMM_ALLOCATOR, defaults]]
    # Each pool is made on its device, after that device's vmm_resource got the options.
    assert r["devices"] == [[0], [1]]
    assert r["configured"] == [
        [0, "rmm_next.torch.nccl_mem_pool", 64 * MiB, 0x9, 0, 1, 1],
        [1, "rmm_next.torch.nccl_mem_pool", 32 * MiB, 0x1, 1, 0, 0],
    ]


def test_nccl_mem_pool_argument_errors_name_the_call(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    errors = {}
    for name, kwargs in [("size", {"segment_size": 0}), ("types", {"handle_types": ()}),
                         ("granularity", {"granularity": "page"}), ("peer", {"peer_access": "all"}),
                         ("symmetric", {"symmetric": 1}), ("no_split", {"no_split": "yes"})]:
        try:
            rt.nccl_mem_pool(**kwargs)
        except ValueError as e:
            errors[name] = str(e)
    rt._allocator = object()  # as use() leaves it
    try:
        rt.nccl_mem_pool()
    except rmm_next.RmmNextError as e:
        errors["after_use"] = str(e)
    print(json.dumps({"errors": errors, "configured": configured, "pools": calls("MemPool")}))
    ''')
    e = r["errors"]
    assert e["size"].startswith("rmm_next.torch.nccl_mem_pool: segment_size=0; pass a positive")
    assert e["types"].startswith("rmm_next.torch.nccl_mem_pool: handle_types=()")
    assert e["granularity"].startswith("rmm_next.torch.nccl_mem_pool: granularity='page'")
    assert e["peer"].startswith("rmm_next.torch.nccl_mem_pool: peer_access='all'")
    assert e["symmetric"] == "rmm_next.torch.nccl_mem_pool: symmetric=1; pass True or False"
    assert e["no_split"] == "rmm_next.torch.nccl_mem_pool: no_split='yes'; pass True or False"
    assert "rmm_next.torch.use() replaced PyTorch's caching allocator" in e["after_use"]
    assert r["configured"] == [] and r["pools"] == []  # nothing reached the library or PyTorch


def test_use_is_refused_after_nccl_mem_pool(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    rt.nccl_mem_pool()
    print(json.dumps({"error": refusal(rt.use)}))
    ''')
    assert "already made a rmm_next.torch.mem_pool() or nccl_mem_pool()" in r["error"]


@no_gpu
def test_nccl_mem_pool_without_a_device_raises_the_librarys_reason(tmp_path):
    r = run_with_fake_torch(tmp_path, CALLS, '''
    print(json.dumps({"error": refusal(lambda: rt.nccl_mem_pool(0)), "pools": calls("MemPool")}))
    ''')
    assert r["error"].startswith("rmm_next.torch.nccl_mem_pool: ")
    assert "no usable CUDA driver or device" in r["error"]
    assert r["pools"] == []


# ---- symmetric registration: MemPool(symmetric=True) (2.8) or register_mem_pool(symm=True) (2.9+)

SYMMETRIC_POOLS = '''
plain = rt.nccl_mem_pool(1)
symmetric = rt.nccl_mem_pool(1, symmetric=True)
backends = [rt.register_mem_pool(plain), rt.register_mem_pool(symmetric)]
print(json.dumps({"pools": calls("MemPool"), "registered": calls("register_mem_pool"),
                  "backends": calls("get_backend"), "configured": len(configured),
                  "backend_device": [b.device.index for b in backends]}))
'''


def test_pytorch_2_8_takes_symmetric_in_the_mempool_and_a_plain_registration(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, SYMMETRIC_POOLS, generation="2.8")
    assert r["pools"] == [[VMM_ALLOCATOR, {"use_on_oom": False, "symmetric": False}],
                          [VMM_ALLOCATOR, {"use_on_oom": False, "symmetric": True}]]
    # register_mem_pool(pool) both times: the symmetric pool's own flag makes NCCL windows.
    assert r["registered"] == [[1, 1, {}], [1, 1, {}]]
    assert r["backends"] == [["cuda", 1], ["cuda", 1]]  # the pool's device, not the current one
    assert r["backend_device"] == [1, 1]


@pytest.mark.parametrize("generation,pool_arguments", [
    ("2.9", {"use_on_oom": False}),
    ("2.15", {"use_on_oom": False, "no_split": False}),
])
def test_pytorch_2_9_and_newer_take_symm_in_the_registration(tmp_path, generation, pool_arguments):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, SYMMETRIC_POOLS, generation=generation)
    # These MemPools have no symmetric: none is passed, and nothing else changes.
    assert r["pools"] == [[VMM_ALLOCATOR, pool_arguments], [VMM_ALLOCATOR, pool_arguments]]
    assert r["registered"] == [[1, 1, {}], [1, 1, {"symm": True}]]
    assert r["backends"] == [["cuda", 1], ["cuda", 1]]


@pytest.mark.parametrize("generation,nccl,reason", [
    ("2.7", True, "its ProcessGroupNCCL.register_mem_pool takes no symm"),
    ("2.15", False, "it has no ProcessGroupNCCL"),
])
def test_symmetric_without_either_way_is_refused_before_anything_is_made(
        tmp_path, generation, nccl, reason):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    error = refusal(lambda: rt.nccl_mem_pool(symmetric=True))
    plain = rt.nccl_mem_pool()  # a pool without symmetric still works
    print(json.dumps({"error": error, "pools": calls("MemPool"), "configured": configured}))
    ''', generation=generation, nccl=nccl)
    assert r["error"].startswith(
        "rmm_next.torch.nccl_mem_pool: symmetric=True, but this PyTorch registers no symmetric "
        "pool: its torch.cuda.MemPool takes no symmetric and " + reason)
    assert r["error"].endswith("; use PyTorch 2.8 or newer built with NCCL, or symmetric=False")
    assert len(r["pools"]) == 1 and len(r["configured"]) == 1  # the plain pool's only


def test_a_registration_whose_signature_cannot_be_read_is_tried_and_its_refusal_named(tmp_path):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    pool = rt.nccl_mem_pool(symmetric=True)  # allowed: nothing says register_mem_pool lacks symm
    print(json.dumps({"error": refusal(lambda: rt.register_mem_pool(pool)),
                      "pools": calls("MemPool"), "registered": calls("register_mem_pool")}))
    ''', generation="opaque")
    assert r["pools"] == [[VMM_ALLOCATOR, {"use_on_oom": False}]]
    assert r["error"].startswith("rmm_next.torch.register_mem_pool: this PyTorch's "
                                 "register_mem_pool refused symm=True (register_mem_pool(): "
                                 "incompatible function arguments)")
    assert r["error"].endswith("; make the pool with symmetric=False")
    assert r["registered"] == []


@pytest.mark.parametrize("generation,accepted", [("2.15", True), ("2.9", False), ("2.8", False)])
def test_no_split_is_passed_where_the_mempool_has_it(tmp_path, generation, accepted):
    r = run_with_fake_torch(tmp_path, RECORD_CONFIGURE, '''
    error = refusal(lambda: rt.nccl_mem_pool(no_split=True))
    print(json.dumps({"error": error, "pools": calls("MemPool"), "configured": configured}))
    ''', generation=generation)
    if accepted:
        assert r["error"] is None
        assert r["pools"] == [[VMM_ALLOCATOR, {"use_on_oom": False, "no_split": True}]]
    else:
        assert r["error"].startswith("rmm_next.torch.nccl_mem_pool: no_split=True, but this "
                                     "PyTorch's torch.cuda.MemPool takes (allocator, use_on_oom")
        assert r["error"].endswith("; use PyTorch 2.10 or newer, or no_split=False")
        assert r["pools"] == [] and r["configured"] == []


def test_register_mem_pool_takes_only_nccl_mem_pools(tmp_path):
    r = run_with_fake_torch(tmp_path, CALLS, '''
    try:
        rt.register_mem_pool(torch.cuda.MemPool(None))
        error = None
    except ValueError as e:
        error = str(e)
    print(json.dumps({"error": error, "registered": calls("register_mem_pool")}))
    ''')
    assert r["error"].startswith("rmm_next.torch.register_mem_pool: pool=<torch.cuda.MemPool ")
    assert "pass a pool of rmm_next.torch.nccl_mem_pool()" in r["error"]
    assert r["registered"] == []


@pytest.mark.parametrize("doc,names", [
    ("register_mem_pool(self: torch._C._distributed_c10d.ProcessGroupNCCL, pool: "
     "torch._C._MemPool, symm: bool = False) -> None\n", ["pool", "symm"]),
    ("register_mem_pool(self: X, arg0: torch._C._MemPool) -> None", ["arg0"]),
    ("f(self: X, a: Dict[str, Tuple[int, int]] = {}, b: std::pair<int, int> = (1, 2)) -> None",
     ["a", "b"]),
    ("f() -> None", []),
    ("register_mem_pool(*args, **kwargs)\nOverloaded function.\n", None),
    ("Registers a pool.", None),
    (None, None),
])
def test_parameter_names_read_pybind11_docstrings(tmp_path, doc, names):
    r = run_with_fake_torch(tmp_path, f'''
    class Pybind:
        __doc__ = {doc!r}
        def __call__(self, *args, **kwargs):
            pass
    print(json.dumps({{"names": rt._parameter_names(Pybind()),
                       "python": rt._parameter_names(lambda pool, symm=False: None)}}))
    ''')
    assert r["names"] == names
    assert r["python"] == ["pool", "symm"]  # inspect.signature where Python can read one


# ---- use(install_stats=True) -----------------------------------------------------------------

#: rmm_next.statistics() as the stand-in's use() route sees it (every other count 0).
COUNTS = dict(allocations=7, deallocations=4, failed_allocations=2, allocated_bytes=3000,
              allocated_bytes_high=9000, total_allocated_bytes=12000,
              pool_reserved_bytes=1 << 21, pool_reserved_bytes_high=1 << 22)

FAKE_COUNTS = CALLS + f'''
counts = {{name: 0 for name, _ in rmm_next._lib.Statistics._fields_}}
counts.update({COUNTS!r})
asked, resets = [], []
def fake_statistics(device=None):
    asked.append(device)
    return dict(counts)
rt.statistics = fake_statistics
rt.reset_peak_statistics = resets.append
NAMES = ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
         "max_memory_reserved", "reset_peak_memory_stats")
def installed():
    return {{name: [getattr(torch.cuda, name) is getattr(rt, name),
                    getattr(torch.cuda.memory, name) is getattr(rt, name)] for name in NAMES}}
'''

STATS_READ = '''
    values = {
        "memory_allocated": torch.cuda.memory_allocated(),
        "max_memory_allocated": torch.cuda.memory.max_memory_allocated(torch.device("cuda", 3)),
        "memory_reserved": torch.cuda.memory_reserved(1),
        "max_memory_reserved": torch.cuda.memory.max_memory_reserved(),
        "memory_stats": torch.cuda.memory_stats(torch.device("cuda", 2)),
        "memory_cached": torch.cuda.memory.memory_cached(),  # PyTorch's, calling memory_reserved
    }
    torch.cuda.reset_peak_memory_stats(1)
    torch.cuda.memory.reset_max_memory_allocated(2)  # PyTorch's, calling reset_peak_memory_stats
'''


def expected_stats_values():
    counts = {name: 0 for name, _ in _lib.Statistics._fields_}
    counts.update(COUNTS)
    return {
        "memory_allocated": 3000,
        "max_memory_allocated": 9000,
        "memory_reserved": 1 << 21,
        "max_memory_reserved": 1 << 22,
        "memory_stats": _memory_stats.pytorch_style(counts),
        "memory_cached": 1 << 21,
    }


def test_install_stats_puts_rmm_nexts_counts_in_torch_cuda_and_torch_cuda_memory(tmp_path):
    r = run_with_fake_torch(tmp_path, FAKE_COUNTS, '''
    before = installed()
    rt.use(install_stats=True)
    after, flag = installed(), rt.stats_installed
    ''' + STATS_READ + '''
    native = [c for c in torch.cuda.calls if c[0] == "native"]
    print(json.dumps({"before": before, "after": after, "flag": flag, "values": values,
                      "asked": asked, "resets": resets, "native": native}))
    ''')
    assert all(v == [False, False] for v in r["before"].values())
    assert all(v == [True, True] for v in r["after"].values()), r["after"]
    assert r["flag"]
    assert r["values"] == expected_stats_values()
    # Each call read the device it named (None: the current one, 0 here).
    assert r["asked"] == [0, 3, 1, 0, 2, 0]
    assert r["resets"] == [1, 2]
    assert r["native"] == []  # PyTorch's own (which raise on this route) were never reached


def test_use_without_install_stats_leaves_torch_cuda_alone_and_a_later_call_installs(tmp_path):
    r = run_with_fake_torch(tmp_path, FAKE_COUNTS, '''
    rt.use()
    plain = {"installed": installed(), "flag": rt.stats_installed,
             "torch_reads": torch.cuda.memory_allocated()}
    allocator = rt.use(install_stats=True)  # a second call: same allocator, functions installed
    ''' + STATS_READ + '''
    print(json.dumps({"plain": plain, "installed": installed(), "values": values,
                      "swaps": sum(c[0] == "change_current_allocator" for c in torch.cuda.calls),
                      "same": allocator is rt._allocator}))
    ''')
    assert all(v == [False, False] for v in r["plain"]["installed"].values())
    assert not r["plain"]["flag"]
    assert r["plain"]["torch_reads"] == -1  # the stand-in's own function answered
    assert all(v == [True, True] for v in r["installed"].values())
    assert r["values"] == expected_stats_values()
    assert r["swaps"] == 1 and r["same"]


def test_install_stats_errors_leave_pytorchs_functions(tmp_path):
    r = run_with_fake_torch(tmp_path, FAKE_COUNTS, '''
    errors = {}
    try:
        rt.use(install_stats="yes")
    except ValueError as e:
        errors["value"] = str(e)
    made = sum(c[0] == "CUDAPluggableAllocator" for c in torch.cuda.calls)
    torch.cuda.memory.refuse = True  # PyTorch allocated already: the swap is refused
    errors["swap"] = refusal(lambda: rt.use(install_stats=True))
    print(json.dumps({"errors": errors, "made_before_swap": made, "installed": installed(),
                      "flag": rt.stats_installed, "in_use": rt.in_use()}))
    ''')
    assert r["errors"]["value"] == "rmm_next.torch.use: install_stats='yes'; pass True or False"
    assert r["made_before_swap"] == 0  # refused before any allocator was made
    assert r["errors"]["swap"].startswith("rmm_next.torch.use: PyTorch already allocated CUDA "
                                          "memory with another allocator")
    assert all(v == [False, False] for v in r["installed"].values())
    assert not r["flag"] and not r["in_use"]
