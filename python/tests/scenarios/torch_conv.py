# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""A small convolutional network trained under rmm_next.torch.use(): cuDNN's convolutions, their
workspaces, and cuDNN's engine libraries, which load at the first convolution, after the plugin.

    torch_conv.py CACHE      (none, thread or segment: the cache use() is given)

Prints the losses of every step, the largest difference of the first step's output from the same
network on the CPU, and the plugin's statistics.
"""

import copy
import sys

import torch
from torch import nn

import rmm_next
from _common import emit

cache = sys.argv[1]
rmm_next.torch.use(thread_cache=cache == "thread", segment_cache=cache == "segment")
torch.manual_seed(0)
cpu_model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
)
model = copy.deepcopy(cpu_model).cuda()
images = torch.randn(8, 3, 32, 32)
labels = torch.randint(0, 10, (8,))
model.eval()
cpu_model.eval()
with torch.no_grad():
    difference = float((model(images.cuda()).cpu() - cpu_model(images)).abs().max())
model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses = []
for side in (32, 48, 64, 40):  # new shapes: new cuDNN plans and workspaces
    x = torch.randn(8, 3, side, side, device="cuda")
    y = labels.cuda()
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(float(loss))
torch.cuda.synchronize()
emit({
    "losses": losses,
    "cpu_difference": difference,
    "backend": torch.cuda.get_allocator_backend(),
    "statistics": rmm_next.statistics(0),
})
