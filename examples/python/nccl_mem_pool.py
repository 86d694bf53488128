# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The code blocks of docs/python.md and docs/multi_gpu.md on rmm_next.torch.nccl_mem_pool(): a
MemPool over memory NCCL can register, registered with the process group's communicator.

    python3 examples/python/nccl_mem_pool.py one_rank             # one GPU, world size 1
    torchrun --nproc-per-node=2 examples/python/nccl_mem_pool.py ranks
    torchrun --nproc-per-node=2 examples/python/nccl_mem_pool.py symmetric
"""

import os
import socket
import sys


def one_rank():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    # [nccl-mem-pool]
    import torch
    import torch.distributed as dist
    import rmm_next

    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    pool = rmm_next.torch.nccl_mem_pool(segment_size=256 << 20)
    with torch.cuda.use_mem_pool(pool):
        x = torch.ones(1 << 24, device="cuda")
    dist.distributed_c10d._get_default_group()._get_backend(torch.device("cuda")).register_mem_pool(pool)
    dist.all_reduce(x)
    print(rmm_next.vmm_statistics(0)["segment_count"], rmm_next.vmm_segments(0)[0])
    # [nccl-mem-pool end]
    dist.destroy_process_group()


def ranks():
    # [nccl-mem-pool-ranks]
    import os
    import torch
    import torch.distributed as dist
    import rmm_next

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", device_id=device)  # the communicator must exist first

    pool = rmm_next.torch.nccl_mem_pool(segment_size=256 << 20, peer_access=False)
    with torch.cuda.use_mem_pool(pool):
        grads = torch.empty(64 << 20, device=device)
    backend = dist.distributed_c10d._get_default_group()._get_backend(device)
    backend.register_mem_pool(pool)
    dist.all_reduce(grads)  # over registered memory
    # [nccl-mem-pool-ranks end]
    dist.destroy_process_group()


def symmetric():
    # [nccl-mem-pool-symmetric]
    import os
    import torch
    import torch.distributed as dist
    import rmm_next

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))

    pool = rmm_next.torch.nccl_mem_pool(symmetric=True)
    with torch.cuda.use_mem_pool(pool):  # the same sizes in the same order on every rank
        x = torch.ones(1 << 24, device="cuda")
    rmm_next.torch.register_mem_pool(pool)  # symmetric NCCL windows, as this PyTorch takes them
    dist.all_reduce(x)
    # [nccl-mem-pool-symmetric end]
    dist.destroy_process_group()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "one_rank"
    {"one_rank": one_rank, "ranks": ranks, "symmetric": symmetric}[mode]()
