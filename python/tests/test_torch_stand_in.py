# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm_next.torch over a stand-in torch package (fake_torch.py), no GPU and no PyTorch:
nccl_mem_pool() and register_mem_pool() on each generation of PyTorch's symmetric registration."""

import pytest

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
