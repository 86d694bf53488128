# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Records a PyTorch training trace through rmm-next: the 4-layer nn.TransformerEncoder of
python/tests/scenarios/torch_train.py, with its varying batch shapes.

    record_torch_trace.py OUT_DIR [--steps N]     (default 100 steps)

Writes OUT_DIR/torch_transformer.csv.gz (RMM's log format) and torch_transformer.json.
"""

import random
import time

from trace_files import arguments, finish

args = arguments(__doc__, "steps", 100)
out = args.out

import torch  # noqa: E402  (first: the process then uses PyTorch's CUDA runtime)
from torch import nn  # noqa: E402

import rmm_next  # noqa: E402

log = out / "torch_transformer.csv"
rmm_next.configure(log=log)
rmm_next.torch.use()
torch.manual_seed(0)
features, width, heads, layers = 64, 256, 8, 4
model = nn.Sequential(
    nn.Linear(features, width),
    nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, batch_first=True),
        num_layers=layers,
        enable_nested_tensor=False,
    ),
    nn.Linear(width, features),
).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
generator = torch.Generator(device="cuda").manual_seed(1234)
shapes = random.Random(99)
start = time.perf_counter()
for _ in range(args.steps):
    batch, length = shapes.choice([8, 16, 24, 32]), shapes.choice([32, 48, 64, 96, 128])
    x = torch.randn(batch, length, features, device="cuda", generator=generator)
    target = torch.roll(x, shifts=1, dims=1) * 0.5 + x.mean(dim=1, keepdim=True)
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
torch.cuda.synchronize()
seconds = time.perf_counter() - start
del model, optimizer, x, target, loss
rmm_next.configure(log=None)
finish(log, {"workload": "torch_transformer", "steps": args.steps, "seconds": seconds,
             "torch": torch.__version__})
