# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm_next.torch.nccl_mem_pool() on a GPU: tensors in vmm_resource segments, and a one-rank
torch.distributed all-reduce over a pool registered with register_mem_pool.
benchmarks/multi_gpu/run_two_gpus.sh runs the same scenario on two ranks."""

import pytest

from conftest import framework, run_scenario, skip_if_skipped

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]
MiB = 1 << 20
POSIX_FD = 0x1


@pytest.fixture(autouse=True)
def torch_installed(gpu):
    framework("torch")


@pytest.fixture(scope="module")
def pool(gpu):
    framework("torch")
    return run_scenario("torch_nccl_pool.py", "pool")


def test_kernels_write_and_read_tensors_of_the_pool(pool):
    assert pool["wrong"] == 0


def test_the_pools_memory_is_in_vmm_segments_not_a_driver_pool(pool, record):
    record("torch.nccl_mem_pool.vmm", pool["vmm"])
    assert all(pool["in_vmm_segments"]), pool["in_vmm_segments"]
    assert not pool["outside_in_vmm_segments"]
    bases = {base: size for base, size in pool["segments"]}
    for a in pool["tensor_attributes"]:
        # The address range (cuMemAddressReserve) holding each tensor is one of the
        # vmm_resource's segments, exportable as a POSIX file descriptor, and no cudaMallocAsync
        # pool owns it.
        assert bases.get(a["range_start"]) == a["range_size"], (a, bases)
        assert a["handle_types"] & POSIX_FD, a
        assert a["mempool"] == 0, a
    outside = pool["outside_attributes"]["handle_types"]  # cudaMalloc memory has none (or no answer)
    assert isinstance(outside, str) or outside & POSIX_FD == 0, outside


def test_the_vmm_resource_counts_the_pools_segments(pool):
    v = pool["vmm"]
    assert v["made"] and v["failed_allocations"] == 0
    assert v["allocations"] >= 1
    assert "posix_fd" in v["handle_types"]
    assert v["segment_size"] == 32 * MiB  # nccl_mem_pool(segment_size=32 MiB), at the granularity
    assert v["segment_size"] % v["granularity"] == 0
    assert v["segment_bytes"] == sum(size for _, size in pool["segments"])
    # What PyTorch reserved for the pool is what rmm-next handed out, at least the tensors' bytes.
    assert v["allocated_bytes"] >= pool["pool_segment_bytes"] >= pool["tensor_bytes"]
    assert v["access_devices"] >= 1
    assert pool["map"]["allocations"] == 0  # nothing went through the per-device resource


def test_destroying_the_pool_gives_its_blocks_back_and_keeps_the_segments(pool):
    before, after = pool["vmm"], pool["vmm_after_pool_destroyed"]
    assert after["allocated_bytes"] == 0
    assert after["deallocations"] == after["allocations"] == before["allocations"]
    assert after["segment_bytes"] == before["segment_bytes"]


def test_a_one_rank_all_reduce_over_a_registered_pool(record):
    r = run_scenario("torch_nccl_pool.py", "distributed", 1)
    skip_if_skipped(r)
    record("torch.nccl_mem_pool.distributed.1", {k: r[k] for k in ("wrong", "vmm")})
    assert r["wrong"] == 0 and r["first_values"] == [1.0, 1.0, 1.0]
    assert r["in_vmm_segments"]
    assert r["vmm"]["allocations"] >= 1 and r["map_allocations"] == 0


def test_a_one_rank_all_reduce_over_a_symmetrically_registered_pool(record):
    # nccl_mem_pool(symmetric=True) registered by rmm_next.torch.register_mem_pool: on PyTorch
    # 2.9 and newer (MemPool has no symmetric), register_mem_pool(pool, symm=True) of the
    # process group's ProcessGroupNCCL; on 2.8, MemPool(symmetric=True) and a plain registration.
    r = run_scenario("torch_nccl_pool.py", "distributed_symmetric", 1)
    skip_if_skipped(r)
    record("torch.nccl_mem_pool.distributed_symmetric.1",
           {k: r[k] for k in ("wrong", "symmetric_route", "backend")})
    assert r["symmetric_route"] == ("MemPool(symmetric=True)" if r["mem_pool_takes_symmetric"]
                                    else "register_mem_pool(pool, symm=True)")
    assert r["backend"] == "ProcessGroupNCCL"
    assert r["wrong"] == 0 and r["first_values"] == [1.0, 1.0, 1.0]
    assert r["in_vmm_segments"]
    assert r["vmm"]["allocations"] >= 1 and r["map_allocations"] == 0
