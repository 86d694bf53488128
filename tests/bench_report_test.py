# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""benchmarks/bench_report.py's thread-scaling 1-thread check, on made-up Google Benchmark JSON.

The check compares one thread of thread_scaling with alloc_free at 256 B on the fastest
repetition of each: medians from two programs can come from periods in which the machine ran
driver calls at different speeds, fastest repetitions of one loop cannot."""

import importlib.util
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "bench_report.py")
bench_report = importlib.util.module_from_spec(spec)
sys.modules["bench_report"] = bench_report
spec.loader.exec_module(bench_report)


def runs(name, times, threads=1):
    """Repetitions of `name` (ns per pair) and the median, stddev and min aggregates."""
    out = []
    for t in times:
        out.append({"name": name, "run_name": name, "run_type": "iteration", "threads": threads,
                    "real_time": t, "time_unit": "ns", "items_per_second": 1e9 / t})
    ordered = sorted(times)
    median = ordered[len(ordered) // 2]
    for agg, value in (("median", median), ("stddev", 1.0), ("min", ordered[0])):
        out.append({"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate",
                    "aggregate_name": agg, "threads": threads, "real_time": value,
                    "time_unit": "ns", "items_per_second": 1e9 / value})
    return out


SCALING = "thread_scaling/device/raw/256/min_time:0.050/real_time/threads:1"
LATENCY = "alloc_free/device/raw/256/min_time:0.050/real_time"


def check_lines(scaling_times, latency_times, scaling_rounds=(), latency_rounds=()):
    """The check's rows, from a main run of each program and the check rounds run_all.sh makes
    between programs (check/<program>.<round>.json, read by load_check_rounds)."""
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / "thread_scaling.json").write_text(json.dumps({"benchmarks": runs(SCALING, scaling_times)}))
        (d / "alloc_free.json").write_text(json.dumps({"benchmarks": runs(LATENCY, latency_times)}))
        for i, times in enumerate(scaling_rounds):
            (d / "check").mkdir(exist_ok=True)
            (d / "check" / f"thread_scaling.{i + 1}.json").write_text(
                json.dumps({"benchmarks": runs(SCALING, times)}))
        for i, times in enumerate(latency_rounds):
            (d / "check").mkdir(exist_ok=True)
            (d / "check" / f"alloc_free.{i + 1}.json").write_text(
                json.dumps({"benchmarks": runs(LATENCY, times)}))
        lines = bench_report.thread_section(bench_report.Results(d / "thread_scaling.json"),
                                            bench_report.Results(d / "alloc_free.json"),
                                            bench_report.load_check_rounds(d))
    return [line for line in lines if line.startswith("| device | raw |")], lines


def test_medians_at_two_speeds_agree_on_the_fastest_repetitions():
    # thread_scaling ran mostly at the slow speed, alloc_free mostly at the fast one.
    rows, _ = check_lines([1300.0, 1310.0, 660.0, 1290.0, 1320.0],
                          [650.0, 640.0, 1280.0, 655.0, 660.0])
    assert len(rows) == 2, rows  # the scaling table's row and the check's
    check = rows[1]
    assert "agree" in check and "differ" not in check, check
    assert "1,300.0" in check and "655.0" in check  # the medians are shown as measured
    assert "1.031" in check  # 660 / 640


def test_a_loop_that_is_slower_even_at_its_best_is_reported():
    rows, _ = check_lines([900.0, 910.0, 905.0], [650.0, 640.0, 660.0])
    assert "**differ: rerun or look into it**" in rows[1], rows[1]
    assert "1.406" in rows[1]  # 900 / 640


def test_a_round_that_caught_the_fast_speed_counts_and_the_medians_stay_the_main_runs():
    # Every repetition of the main thread_scaling run fell in a slow period; the second of its
    # two rounds caught a fast one.
    rows, lines = check_lines([1300.0, 1310.0, 1290.0], [650.0, 640.0, 660.0],
                              scaling_rounds=[[1280.0, 1295.0, 1300.0], [700.0, 655.0, 1250.0]],
                              latency_rounds=[[630.0, 1270.0, 1300.0]])
    check = rows[1]
    assert "agree" in check and "differ" not in check, check
    assert "1,300.0" in check and "650.0" in check  # medians of the main runs, not of rounds
    assert "| 655.0 | 630.0 |" in check, check  # the fastest over the main run and its rounds
    assert "1.040" in check  # 655 / 630
    assert any("2 of thread_scaling, 1 of alloc_free" in line for line in lines), lines


def test_rounds_cannot_hide_a_loop_that_is_slower_at_its_best():
    rows, _ = check_lines([900.0, 910.0, 905.0], [650.0, 640.0, 660.0],
                          scaling_rounds=[[890.0, 905.0, 900.0]] * 3,
                          latency_rounds=[[655.0, 660.0, 650.0]] * 3)
    assert "**differ: rerun or look into it**" in rows[1], rows[1]
    assert "1.391" in rows[1]  # 890 / 640


def test_without_rounds_the_text_does_not_mention_them():
    _, lines = check_lines([650.0, 660.0, 655.0], [650.0, 640.0, 660.0])
    assert not any("rounds" in line for line in lines), lines


def test_the_nccl_section_has_a_row_per_kind_and_size():
    rows = [{"kind": kind, "bytes": 1 << 20, "ranks": 2, "iterations": 20, "time_us": 40.0,
             "algbw_GBps": 26.2, "busbw_GBps": 26.2, "wrong": 0, "registered": kind != "cudaMalloc"}
            for kind in ("cudaMalloc", "ncclMemAlloc", "vmm_resource")]
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "nccl_allreduce.json"
        path.write_text(json.dumps({"benchmark": "nccl_allreduce", "nccl_version": 22809,
                                    "device": "GPU", "ranks": 2, "rows": rows}))
        lines = bench_report.nccl_section(path)
    assert lines[0] == "## NCCL all-reduce bus bandwidth", lines[0]
    table_rows = [line for line in lines if line.startswith("| ") and "MiB" in line]
    assert table_rows == [
        "| cudaMalloc | 1 MiB | 40.0 | 26.2 | 26.2 | no | 0 |",
        "| ncclMemAlloc | 1 MiB | 40.0 | 26.2 | 26.2 | yes | 0 |",
        "| vmm_resource | 1 MiB | 40.0 | 26.2 | 26.2 | yes | 0 |",
    ], table_rows


if __name__ == "__main__":
    failures = 0
    for name, fn in list(globals().items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"PASS {name}")
            except AssertionError as e:
                failures += 1
                print(f"FAIL {name}: {e}")
    sys.exit(1 if failures else 0)
