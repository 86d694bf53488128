# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Captures a whole training step with torch.cuda.graph and replays it; eager training of the
same model on the same data must give the same parameters.

    torch_graph.py CACHE      (0 or 1: rmm_next.torch.use() without or with rmm-next's thread
                               cache; pool: the capture in a rmm_next.torch.mem_pool())
"""

import copy
import sys

import torch
from torch import nn

import rmm_next
from _common import emit

pool = rmm_next.torch.mem_pool() if sys.argv[1] == "pool" else None
if pool is None:
    rmm_next.torch.use(thread_cache=sys.argv[1] == "1")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False

N, D_in, H, D_out, replays = 64, 128, 256, 32, 10
eager = nn.Sequential(nn.Linear(D_in, H), nn.ReLU(), nn.Linear(H, D_out)).cuda()
graphed = copy.deepcopy(eager)
data = [
    (torch.randn(N, D_in, device="cuda"), torch.randn(N, D_out, device="cuda"))
    for _ in range(3 + replays)
]
loss_fn = nn.MSELoss()


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


# Eager reference.
eager_opt = make_optimizer(eager)
for x, y in data:
    eager_opt.zero_grad(set_to_none=True)
    loss_fn(eager(x), y).backward()
    eager_opt.step()

# Warm-up on a side stream (PyTorch's recipe), then capture one step and replay it.
opt = make_optimizer(graphed)
static_x, static_y = torch.empty_like(data[0][0]), torch.empty_like(data[0][1])
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for x, y in data[:3]:
        static_x.copy_(x)
        static_y.copy_(y)
        opt.zero_grad(set_to_none=True)
        loss_fn(graphed(static_x), static_y).backward()
        opt.step()
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
opt.zero_grad(set_to_none=True)
with torch.cuda.graph(graph, pool=None if pool is None else pool.id):
    static_loss = loss_fn(graphed(static_x), static_y)
    static_loss.backward()
    opt.step()

for x, y in data[3:]:
    static_x.copy_(x)
    static_y.copy_(y)
    graph.replay()
torch.cuda.synchronize()

difference = max(
    (a - b).abs().max().item() for a, b in zip(eager.parameters(), graphed.parameters())
)
stats = rmm_next.statistics(0)
del graph
torch.cuda.synchronize()
emit(
    {
        "max_parameter_difference": difference,
        "replays": replays,
        "statistics": stats,
        "deferred_after_graph": rmm_next.statistics(0)["deferred_frees"],
    }
)
