# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm_next.torch.nccl_mem_pool() on a device.

  torch_nccl_pool.py pool
      tensors made in the pool: kernels write and read them; where their memory comes from
      (rmm-next's vmm segments, POSIX FD handles, no driver pool), against a tensor outside it.
  torch_nccl_pool.py distributed WORLD [LOG_DIR]
      torch.distributed with the NCCL backend over WORLD processes (1: this one; more:
      torch.multiprocessing.spawn, one per GPU), register_mem_pool(pool) on each rank, then
      all-reduces of tensors from the pool. LOG_DIR gets each rank's JSON.
  torch_nccl_pool.py distributed_symmetric WORLD [LOG_DIR]
      the same over nccl_mem_pool(symmetric=True), registered by rmm_next.torch.register_mem_pool
      (symmetric NCCL windows, in the way this PyTorch takes them).

Prints one JSON object as its last line (rank 0's, with every rank's under "ranks").
"""

import ctypes
import gc
import inspect
import json
import os
import pathlib
import socket
import sys
import tempfile

from _common import emit, pool_segment_bytes

import torch

import rmm_next
import rmm_next.torch as rt

MiB = 1 << 20
# CUpointer_attribute values (cuda.h).
CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11
CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES = 14
CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE = 15
CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17
CU_POINTER_ATTRIBUTE_MAPPING_SIZE = 18
CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR = 19


def pointer_attributes(address):
    """What the driver says of `address` (cuPointerGetAttribute through libcuda.so.1)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    get = cuda.cuPointerGetAttribute
    get.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    get.restype = ctypes.c_int

    def read(attribute, kind):
        value = kind()
        status = get(ctypes.byref(value), attribute, address)
        return value.value if status == 0 else f"CUresult {status}"

    return {
        "range_start": read(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ctypes.c_uint64),
        "range_size": read(CU_POINTER_ATTRIBUTE_RANGE_SIZE, ctypes.c_size_t),
        "handle_types": read(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, ctypes.c_uint64),
        "rdma": read(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, ctypes.c_int),
        "mempool": read(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ctypes.c_void_p) or 0,
        "mapping_base": read(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, ctypes.c_uint64),
        "mapping_size": read(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, ctypes.c_uint64),
    }


def in_segment(address, segments):
    return any(base <= address < base + size for base, size in segments)


def pool_scenario():
    torch.cuda.set_device(0)
    outside = torch.empty(1 << 20, device="cuda")  # PyTorch's own caching allocator (cudaMalloc)
    pool = rt.nccl_mem_pool(segment_size=32 * MiB)
    sizes = [1, 1000, 1 << 18, (3 << 20) + 7, 20 << 20, 48 << 20]  # floats; the last > a segment
    with torch.cuda.use_mem_pool(pool):
        tensors = [torch.empty(n, device="cuda") for n in sizes]
    for i, t in enumerate(tensors):
        t.copy_(torch.arange(t.numel(), device="cuda", dtype=torch.float32) * (i + 1))
    wrong = 0
    for i, t in enumerate(tensors):
        expected = torch.arange(t.numel(), device="cuda", dtype=torch.float32) * (i + 1)
        wrong += int((t != expected).sum().item())
    torch.cuda.synchronize()
    segments = rmm_next.vmm_segments(0)
    result = {
        "wrong": wrong,
        "segments": segments,
        "vmm": rmm_next.vmm_statistics(0),
        "map": rmm_next.statistics(0),
        "tensor_bytes": sum(t.numel() * 4 for t in tensors),
        "in_vmm_segments": [in_segment(t.data_ptr(), segments) for t in tensors],
        "tensor_attributes": [pointer_attributes(t.data_ptr()) for t in tensors],
        "outside_in_vmm_segments": in_segment(outside.data_ptr(), segments),
        "outside_attributes": pointer_attributes(outside.data_ptr()),
        "pool_segment_bytes": pool_segment_bytes(pool),
    }
    del t, expected, tensors, pool
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    result["vmm_after_pool_destroyed"] = rmm_next.vmm_statistics(0)
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, world, init_method, log_dir, symmetric=False):
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=init_method, rank=rank, world_size=world,
                            device_id=device)
    pool = rt.nccl_mem_pool(rank, symmetric=symmetric)
    n = 4 * MiB  # floats: 16 MiB a tensor
    with torch.cuda.use_mem_pool(pool):
        tensors = [torch.full((n,), float(rank + 1), device=device) for _ in range(2)]
        ramp = torch.arange(n, device=device, dtype=torch.float32) * (rank + 1)
    if symmetric:
        backend = rt.register_mem_pool(pool)
    else:
        backend = dist.distributed_c10d._get_default_group()._get_backend(device)
        backend.register_mem_pool(pool)
    for t in tensors:
        dist.all_reduce(t)
    dist.all_reduce(ramp)
    # A tensor made after the registration: its segment is registered through PyTorch's hook.
    with torch.cuda.use_mem_pool(pool):
        late = torch.full((n,), float(rank + 1), device=device)
    dist.all_reduce(late)
    torch.cuda.synchronize()
    total = world * (world + 1) / 2
    expected_ramp = torch.arange(n, device=device, dtype=torch.float32) * total
    segments = rmm_next.vmm_segments(rank)
    result = {
        "rank": rank,
        "world": world,
        "symmetric_route": pool._rmm_next_nccl.route,
        "mem_pool_takes_symmetric": "symmetric" in inspect.signature(torch.cuda.MemPool).parameters,
        "backend": type(backend).__name__,
        "wrong": int(sum((t != total).sum().item() for t in tensors + [late])
                     + (ramp != expected_ramp).sum().item()),
        "expected_value": total,
        "first_values": [t[0].item() for t in tensors + [late]],
        "in_vmm_segments": all(in_segment(t.data_ptr(), segments) for t in tensors + [ramp, late]),
        "vmm": rmm_next.vmm_statistics(rank),
        "map_allocations": rmm_next.statistics(rank)["allocations"],
    }
    if hasattr(backend, "deregister_mem_pool"):
        backend.deregister_mem_pool(pool)
    del tensors, ramp, late
    dist.destroy_process_group()
    if log_dir:
        pathlib.Path(log_dir, f"rank{rank}.json").write_text(json.dumps(result))
    return result


def spawned(rank, world, init_method, log_dir, symmetric):
    rank_main(rank, world, init_method, log_dir, symmetric)


def distributed_scenario(world, log_dir, symmetric):
    if world == 1:
        with tempfile.TemporaryDirectory() as d:
            result = rank_main(0, 1, f"file://{d}/rendezvous", log_dir, symmetric)
        return dict(result, ranks=[result])
    import torch.multiprocessing as mp

    log_dir = log_dir or tempfile.mkdtemp(prefix="rmm_next_nccl_pool_")
    mp.spawn(spawned, args=(world, f"tcp://127.0.0.1:{free_port()}", log_dir, symmetric),
             nprocs=world, join=True)
    ranks = [json.loads(pathlib.Path(log_dir, f"rank{r}.json").read_text()) for r in range(world)]
    return dict(ranks[0], ranks=ranks)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "pool":
        emit(pool_scenario())
    elif mode in ("distributed", "distributed_symmetric"):
        world = int(sys.argv[2])
        if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
            emit({"skipped": "PyTorch was built without NCCL (torch.distributed)"})
            raise SystemExit(0)
        if torch.cuda.device_count() < world:
            emit({"skipped": f"{world} ranks need {world} GPUs; {torch.cuda.device_count()} visible"})
            raise SystemExit(0)
        log_dir = sys.argv[3] if len(sys.argv) > 3 else None
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
        result = distributed_scenario(world, log_dir, mode == "distributed_symmetric")
        emit(result)
        # Nonzero when a rank summed wrong or used memory outside the vmm segments (for scripts).
        raise SystemExit(0 if all(r["wrong"] == 0 and r["in_vmm_segments"]
                                  for r in result["ranks"]) else 1)
    else:
        raise SystemExit(f"unknown mode {mode!r}: pool, distributed or distributed_symmetric")
