# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm_next.torch.use(install_stats=True) on a GPU, as two training frameworks read PyTorch's
statistics: HuggingFace transformers' Trainer (its memory metrics) and Lightning's
DeviceStatsMonitor. Each scenario first shows the framework failing under use() alone."""

import importlib.util

import pytest

from conftest import framework, run_scenario, skip_if_skipped

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("gpu")]


@pytest.fixture(autouse=True)
def torch_installed(gpu):
    framework("torch")


def test_hf_trainer_memory_metrics_are_rmm_nexts_counts(record):
    framework("transformers")
    r = run_scenario("torch_hf_trainer.py")
    skip_if_skipped(r)
    m = r["metrics"]
    record("torch.stats.hf_trainer", {"metrics": m, "transformers": r["transformers"]})
    # Under use() alone, Trainer(...) calls PyTorch's reset_peak_memory_stats, which raises.
    assert not r["without_install"]["ok"]
    assert "resetPeakStats" in r["without_install"]["error"], r["without_install"]
    assert r["installed"] == {"torch.cuda": True, "torch.cuda.memory": True}
    for key in ("before_init_mem_gpu", "init_mem_gpu_alloc_delta", "init_mem_gpu_peaked_delta",
                "train_mem_gpu_alloc_delta", "train_mem_gpu_peaked_delta"):
        assert isinstance(m.get(key), int), (key, m)
    # What the Trainer read is what rmm-next counted at the same moments (exact bytes).
    assert m["before_init_mem_gpu"] == r["rmm_before_init"]
    assert r["model_on_gpu"]
    assert m["init_mem_gpu_alloc_delta"] >= r["model_bytes"] > 0  # the model moved to the GPU
    train_end = r["rmm_before_train"] + m["train_mem_gpu_alloc_delta"]
    # AdamW's two moment buffers per parameter stay after training.
    assert m["train_mem_gpu_alloc_delta"] >= 2 * r["parameter_bytes"]
    # The training peak above its end state: the activations. reset_peak_memory_stats at the
    # start of train() restarted rmm-next's watermark, which the peak read at the end is.
    assert m["train_mem_gpu_peaked_delta"] > 0
    train_peak = train_end + m["train_mem_gpu_peaked_delta"]
    assert train_peak == r["rmm_after_train"]["allocated_bytes_high"]
    assert r["torch_allocations"] > 0


def test_lightning_device_stats_monitor_logs_rmm_nexts_counts(record):
    if importlib.util.find_spec("lightning") is None:
        framework("pytorch_lightning")
    r = run_scenario("torch_lightning_stats.py")
    record("torch.stats.lightning", {"starts": r["starts"][:2], "lightning": r["lightning"]})
    # Under use() alone, DeviceStatsMonitor calls PyTorch's memory_stats, which raises.
    assert not r["without_install"]["ok"]
    assert "getDeviceStats" in r["without_install"]["error"], r["without_install"]
    assert r["steps"] == 6
    assert len(r["starts"]) == len(r["seen"]) == 6
    for logged, (current, high, reserved) in zip(r["starts"], r["seen"]):
        # The monitor's numbers are rmm-next's counts right after it read them.
        assert logged["allocated_bytes.all.current"] == current > 0
        assert logged["allocated_bytes.all.peak"] == max(high, current)
        assert logged["reserved_bytes.all.current"] == reserved >= current
    assert r["end_rows"] == 6
    assert "DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.peak" in r["end_keys"]
