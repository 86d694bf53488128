# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Lightning's DeviceStatsMonitor (torch.cuda.memory_stats) under rmm_next.torch.use(): a small
model trained for a few steps, the monitor's metrics caught by a logger of this script's.

First under use() alone, where PyTorch's own torch.cuda.memory_stats raises and with it the fit;
then, in the same process, after use(install_stats=True). The model's on_train_batch_start, which
Lightning calls right after the callbacks' (the monitor's), reads rmm-next's counts.
"""

import importlib
import importlib.util
import tempfile

import torch

import rmm_next
import rmm_next.torch as rt
from _common import emit

STEPS = 6
KEYS = ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current")


def lightning():
    """lightning.pytorch, or the pytorch_lightning package where only that is installed."""
    name = "lightning.pytorch" if importlib.util.find_spec("lightning") else "pytorch_lightning"
    return importlib.import_module(name)


def run(pl, directory):
    from torch.utils.data import DataLoader, TensorDataset

    Logger = importlib.import_module(pl.__name__ + ".loggers").Logger
    DeviceStatsMonitor = importlib.import_module(pl.__name__ + ".callbacks").DeviceStatsMonitor

    class Recorder(Logger):
        def __init__(self):
            super().__init__()
            self.rows = []

        @property
        def name(self):
            return "recorder"

        @property
        def version(self):
            return 0

        def log_hyperparams(self, params, *args, **kwargs):
            pass

        def log_metrics(self, metrics, step=None):
            self.rows.append(dict(metrics))

    class Small(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(256, 256)
            self.seen = []

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def on_train_batch_start(self, batch, batch_idx):
            s = rmm_next.statistics(0)
            self.seen.append([s["allocated_bytes"], s["allocated_bytes_high"],
                              s["pool_reserved_bytes"]])

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(STEPS * 32, 256)), batch_size=32)
    logger, model = Recorder(), Small()
    trainer = pl.Trainer(
        accelerator="gpu", devices=1, max_steps=STEPS, logger=logger,
        callbacks=[DeviceStatsMonitor()], enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
        num_sanity_val_steps=0, default_root_dir=directory)
    trainer.fit(model, data)
    prefix = "DeviceStatsMonitor.on_train_batch_start" + logger.group_separator
    starts = [{k: row[prefix + k] for k in KEYS} for row in logger.rows if prefix + KEYS[0] in row]
    ends = [row for row in logger.rows if any(k.startswith("DeviceStatsMonitor.on_train_batch_end")
                                              for k in row)]
    return {"starts": starts, "seen": model.seen, "end_rows": len(ends),
            "end_keys": sorted(ends[0]) if ends else [], "steps": trainer.global_step}


def main():
    pl = lightning()
    result = {"lightning": pl.__version__, "torch": torch.__version__}
    rt.use()
    with tempfile.TemporaryDirectory() as directory:
        try:
            run(pl, directory)
            result["without_install"] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - reported to the test
            result["without_install"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:600]}
        rt.use(install_stats=True)
        result.update(run(pl, directory))
    emit(result)


if __name__ == "__main__":
    main()
