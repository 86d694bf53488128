# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Shared pieces of the rmm-next Python tests.

Each framework must get its allocator before it allocates, so every GPU test runs a scenario
script (tests/scenarios/*.py) in a fresh interpreter; the script prints one JSON object as its
last line of output.

Environment:
  RMM_NEXT_REQUIRE_GPU=1         a missing CUDA device fails the gpu tests instead of skipping them
  RMM_NEXT_REQUIRE_FRAMEWORKS=1  a missing PyTorch, CuPy or Numba fails instead of skipping
  RMM_NEXT_RESULTS=<file>        also writes the measurements (ratios, timings) there as JSON
  RMM_NEXT_PYTEST_SKIP_CODE=<n>  exit status when every test was skipped (CTest: 77)
  RMM_NEXT_SKIPPED_LOG=<file>    with that exit status, the reason is appended there (CTest prints it)
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
# The package from this source tree (python/rmm_next), unless an installed one is importable.
_installed = importlib.util.find_spec("rmm_next")
PACKAGE_PATHS = [] if _installed is not None else [str(HERE.parent)]
sys.path[:0] = PACKAGE_PATHS

import rmm_next  # noqa: E402

_measurements = {}
_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def required(name):
    """True when the environment variable `name` is "1" (RMM_NEXT_REQUIRE_GPU, ...)."""
    return os.environ.get(name) == "1"


def gpu_reason():
    """Why no GPU test can run here, or None: in the words of the C++ tests' skips
    (tests/support/gpu_check.hpp), so that the summary after CTest's run counts them together."""
    try:
        count = rmm_next.device_count()
    except rmm_next.RmmNextError as e:
        # "...; no usable CUDA driver or device: <reason>; <what to do>"
        match = re.search(r"no usable CUDA driver or device: ([^;]+)", str(e))
        return f"no usable CUDA device ({match.group(1) if match else e})"
    return None if count > 0 else "no usable CUDA device (no CUDA device is visible)"


@pytest.fixture(scope="session")
def gpu():
    reason = gpu_reason()
    if reason is not None:
        if required("RMM_NEXT_REQUIRE_GPU"):
            pytest.fail(f"RMM_NEXT_REQUIRE_GPU=1 but {reason}")
        pytest.skip(reason)


def framework(name):
    """Skips (or fails, with RMM_NEXT_REQUIRE_FRAMEWORKS=1) when `name` is not importable."""
    if importlib.util.find_spec(name) is None:
        if required("RMM_NEXT_REQUIRE_FRAMEWORKS"):
            pytest.fail(f"RMM_NEXT_REQUIRE_FRAMEWORKS=1 but {name} is not installed")
        pytest.skip(f"{name} is not installed")


def skip_if_skipped(result):
    """Skips (or fails, with RMM_NEXT_REQUIRE_FRAMEWORKS=1) when a scenario's result says it
    could not run here ({"skipped": reason})."""
    if "skipped" in result:
        if required("RMM_NEXT_REQUIRE_FRAMEWORKS"):
            pytest.fail(f"RMM_NEXT_REQUIRE_FRAMEWORKS=1 but {result['skipped']}")
        pytest.skip(result["skipped"])


def run_scenario(script, *args, env=None, timeout=600):
    """Runs tests/scenarios/<script> with this interpreter; returns its last line as JSON."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        PACKAGE_PATHS + [p for p in [environment.get("PYTHONPATH")] if p]
    )
    environment.update(env or {})
    command = [sys.executable, str(HERE / "scenarios" / script), *map(str, args)]
    done = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = done.stdout.strip().splitlines()
    if done.returncode != 0 or not output:
        pytest.fail(
            f"{' '.join(command)} exited {done.returncode}\n--- stdout ---\n{done.stdout}"
            f"\n--- stderr ---\n{done.stderr}"
        )
    try:
        return json.loads(output[-1])
    except json.JSONDecodeError:
        pytest.fail(f"{script} printed no JSON last line:\n{done.stdout}\n{done.stderr}")


#: Steps of every training run of torch_train.py the tests compare.
TRAIN_STEPS = 300
_TRAIN_ENV = {"async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}}


@pytest.fixture(scope="session")
def training(gpu):
    """training(mode): torch_train.py's run of `mode` (native, async, rmm, rmm_cache, rmm_segments,
    mem_pool) for
    TRAIN_STEPS steps, each in a process of its own, made once per session for every test."""
    framework("torch")
    runs = {}

    def run(mode):
        if mode not in runs:
            runs[mode] = run_scenario("torch_train.py", mode, TRAIN_STEPS, env=_TRAIN_ENV.get(mode))
        return runs[mode]

    return run


def compare_to_native(runs):
    """Each run of `runs` (way -> torch_train.py's result; one is "native") with its steps per
    second, their ratio to native's, and its largest loss difference from native's."""
    native = runs["native"]
    ways = {}
    for way, run in runs.items():
        ways[way] = dict(
            run,
            ratio_to_native=run["steps_per_second"] / native["steps_per_second"],
            max_loss_difference_vs_native=max(
                abs(a - b) for a, b in zip(native["losses"], run["losses"])
            ),
            losses_identical_to_native=run["losses"] == native["losses"],
        )
    return ways


@pytest.fixture
def record():
    """record(key, value): a measurement shown at the end of the run (and in RMM_NEXT_RESULTS)."""

    def add(key, value):
        _measurements[key] = value

    return add


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if not _measurements:
        return
    terminalreporter.section("rmm-next measurements")
    for key, value in _measurements.items():
        terminalreporter.write_line(f"{key}: {json.dumps(value)}")
    path = os.environ.get("RMM_NEXT_RESULTS")
    if path:
        pathlib.Path(path).write_text(json.dumps(_measurements, indent=2) + "\n")


def pytest_sessionfinish(session, exitstatus):
    code = os.environ.get("RMM_NEXT_PYTEST_SKIP_CODE")
    if code and exitstatus == 0 and _outcomes["skipped"] and not _outcomes["passed"]:
        session.exitstatus = int(code)
        # CTest prints the reasons in RMM_NEXT_SKIPPED_LOG after the tests, one line per reason.
        log = os.environ.get("RMM_NEXT_SKIPPED_LOG")
        if log:
            reason = gpu_reason() or "every selected test skipped itself"
            with open(log, "a", encoding="utf-8") as file:
                file.write(reason + "\n")
