# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Records a trace of a model library's training run through rmm-next, the batch shapes varying
from step to step, models built without downloaded weights:
  hf_gpt2             HuggingFace transformers GPT2LMHeadModel from a config (6 layers, width
                      512), AdamW on random tokens;
  torchvision_resnet  torchvision ResNet-18 (100 classes), SGD with momentum on random images,
                      an evaluation pass every tenth step.

    record_model_trace.py OUT_DIR [--steps N]     (default 60 steps)

MODEL comes from RMM_NEXT_TRACE_MODEL (hf_gpt2 by default). Writes OUT_DIR/<MODEL>.csv.gz (RMM's
log format) and <MODEL>.json.
"""

import os
import random
import time

from trace_files import arguments, finish, start

args = arguments(__doc__, "steps", 60)
model_name = os.environ.get("RMM_NEXT_TRACE_MODEL", "hf_gpt2")
if model_name not in ("hf_gpt2", "torchvision_resnet"):
    raise SystemExit(f"record_model_trace.py: unknown model {model_name!r}")

import torch  # noqa: E402  (first: the process then uses PyTorch's CUDA runtime)
from torch import nn  # noqa: E402

log = start(args.out, model_name, "torch")
torch.manual_seed(0)
generator = torch.Generator(device="cuda").manual_seed(1234)
shapes = random.Random(17)
versions = {"torch": torch.__version__}
if model_name == "hf_gpt2":
    import transformers

    config = transformers.GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=512)
    model = transformers.GPT2LMHeadModel(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    versions["transformers"] = transformers.__version__

    def train_step(step):
        batch, length = shapes.choice([4, 8, 12, 16]), shapes.choice([64, 128, 192, 256])
        tokens = torch.randint(0, config.vocab_size, (batch, length), device="cuda",
                               generator=generator)
        return model(input_ids=tokens, labels=tokens).loss
else:
    import torchvision

    model = torchvision.models.resnet18(weights=None, num_classes=100).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    versions["torchvision"] = torchvision.__version__

    def train_step(step):
        batch, side = shapes.choice([16, 32, 48, 64]), shapes.choice([64, 96, 128, 160])
        images = torch.randn(batch, 3, side, side, device="cuda", generator=generator)
        labels = torch.randint(0, 100, (batch,), device="cuda", generator=generator)
        if step % 10 == 9:  # an evaluation pass, with its host round trip
            model.eval()
            with torch.no_grad():
                float((model(images).argmax(dim=1) == labels).float().mean())
        model.train()
        return nn.functional.cross_entropy(model(images), labels)

started = time.perf_counter()
for step in range(args.steps):
    optimizer.zero_grad(set_to_none=True)
    loss = train_step(step)
    loss.backward()
    optimizer.step()
torch.cuda.synchronize()
seconds = time.perf_counter() - started
del model, optimizer, loss
import rmm_next  # noqa: E402

rmm_next.configure(log=None)
finish(log, {"workload": model_name, "steps": args.steps, "seconds": seconds, **versions})
