# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""HuggingFace transformers' Trainer with its memory metrics (skip_memory_metrics=False) under
rmm_next.torch.use(): a 2-layer GPT-2 made from a config, trained for a few steps on random tokens.

First under use() alone, where PyTorch's own torch.cuda.reset_peak_memory_stats raises and with it
Trainer(...); then, in the same process, after use(install_stats=True). Reports the Trainer's
metrics and rmm-next's counts around them.
"""

import gc
import importlib.util
import tempfile

import torch

import rmm_next
import rmm_next.torch as rt
from _common import emit

STEPS = 8


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=2)
    return GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, count=64, length=32, vocabulary=256):
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocabulary, (count, length), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def trainer(model, directory):
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(
        output_dir=directory, max_steps=STEPS, per_device_train_batch_size=4, learning_rate=1e-3,
        logging_steps=STEPS, save_strategy="no", report_to="none", skip_memory_metrics=False,
        disable_tqdm=True, dataloader_pin_memory=False, remove_unused_columns=False, seed=0)
    return Trainer(model=model, args=args, train_dataset=Tokens())


def tensor_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def main():
    if importlib.util.find_spec("psutil") is None:
        emit({"skipped": "transformers' TrainerMemoryTracker needs psutil, which is not installed"})
        return
    import transformers

    result = {"transformers": transformers.__version__, "torch": torch.__version__}
    rt.use()
    with tempfile.TemporaryDirectory() as directory:
        try:
            trainer(gpt2(), directory)
            result["without_install"] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - reported to the test
            result["without_install"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:600]}

        rt.use(install_stats=True)
        result["installed"] = {
            "torch.cuda": torch.cuda.memory_allocated is rt.memory_allocated,
            "torch.cuda.memory": torch.cuda.memory.max_memory_allocated is rt.max_memory_allocated,
        }
        model = gpt2()
        gc.collect()
        result["rmm_before_init"] = rmm_next.statistics(0)["allocated_bytes"]
        t = trainer(model, directory)
        result["model_bytes"] = tensor_bytes(list(model.parameters()) + list(model.buffers()))
        result["parameter_bytes"] = tensor_bytes(model.parameters())
        result["model_on_gpu"] = next(model.parameters()).is_cuda
        gc.collect()
        result["rmm_before_train"] = rmm_next.statistics(0)["allocated_bytes"]
        output = t.train()
        torch.cuda.synchronize()
        after = rmm_next.statistics(0)
        result["rmm_after_train"] = {k: after[k] for k in ("allocated_bytes",
                                                           "allocated_bytes_high")}
        result["metrics"] = {k: v for k, v in output.metrics.items() if "_mem_" in k}
        result["train_loss"] = output.training_loss
        result["torch_allocations"] = after["torch_allocations"]
    emit(result)


if __name__ == "__main__":
    main()
