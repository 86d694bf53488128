# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Logging and tracking through the plugin: configure(log=..., track=...), outstanding(),
flush_log(), RMM_NEXT_LOG / RMM_NEXT_TRACK; without a GPU (arguments, the log file) and with one
(PyTorch and CuPy allocations read back from the log and from outstanding())."""

import csv
import ctypes
import os
import subprocess
import sys

import pytest

import rmm_next
from rmm_next import _lib
from conftest import PACKAGE_PATHS, framework, run_scenario

HEADER = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]


def read_log(path):
    """The log's rows as dicts, checked against RMM's columns: thread decimal, time of day with
    microseconds, action, pointer 0x-hex or (nil), size decimal, stream 0x-hex or 0."""
    with open(path, newline="") as file:
        rows = list(csv.reader(file))
    assert rows[0] == HEADER
    events = []
    for row in rows[1:]:
        assert len(row) == 6, row
        thread, time_of_day, action, pointer, size, stream = row
        hours, minutes, seconds = time_of_day.split(":")
        assert len(hours) == len(minutes) == 2 and len(seconds) == 9, time_of_day
        assert action in ("allocate", "free", "allocate failure"), row
        assert pointer == "(nil)" or pointer.startswith("0x"), row
        assert stream == "0" or stream.startswith("0x"), row
        events.append({
            "thread": int(thread),
            "action": action,
            "ptr": 0 if pointer == "(nil)" else int(pointer, 16),
            "size": int(size),
            "stream": int(stream, 16) if stream != "0" else 0,
        })
    return events


@pytest.fixture
def closed_log():
    """Ends any log and tracking the test started, whatever happens."""
    yield
    rmm_next.configure(log=None)
    lib = _lib.load()
    lib.rmm_next_set_tracking(0, 0)


# ---- Without a GPU -------------------------------------------------------------------------


def test_configure_rejects_bad_log_and_track_arguments_before_changing_anything(closed_log):
    for bad in (123, "", b"", True, ["trace.csv"]):
        with pytest.raises(ValueError, match=r"rmm_next.configure: log=.*; pass a file path"):
            rmm_next.configure(log=bad)
    for bad in ("yes", 1, rmm_next.ThreadCache()):
        with pytest.raises(ValueError, match=r"rmm_next.configure: track=.*; pass None, a bool"):
            rmm_next.configure(track=bad)
    # A bad `track` leaves a good `log` unapplied: arguments are checked first.
    with pytest.raises(ValueError):
        rmm_next.configure(log="never-created.csv", track="yes")
    assert not os.path.exists("never-created.csv")
    assert rmm_next.tracing() == {"logging": False, "tracking": False}


def test_a_log_is_opened_with_rmms_header_and_closed_by_log_none(tmp_path, closed_log):
    path = tmp_path / "trace.csv"
    rmm_next.configure(log=path)  # a PathLike
    assert rmm_next.tracing()["logging"]
    assert rmm_next.flush_log() is True
    assert path.read_text() == ",".join(HEADER) + "\n"
    rmm_next.configure(pool=None)  # leaving `log` out keeps the log
    assert rmm_next.tracing()["logging"]
    rmm_next.configure(log=None)
    assert rmm_next.tracing()["logging"] is False
    assert rmm_next.flush_log() is False
    assert path.read_text() == ",".join(HEADER) + "\n"


def test_a_log_that_cannot_be_opened_raises_and_keeps_the_open_one(tmp_path, closed_log):
    kept = tmp_path / "kept.csv"
    rmm_next.configure(log=str(kept))
    missing = tmp_path / "no-such-dir" / "trace.csv"
    with pytest.raises(rmm_next.RmmNextError) as error:
        rmm_next.configure(log=missing)
    message = str(error.value)
    assert message.startswith("rmm_next.configure: ")
    assert f'cannot open the log file "{missing}"' in message
    assert "check that its directory exists" in message
    assert rmm_next.tracing()["logging"]


def test_outstanding_without_tracking_says_how_to_turn_it_on():
    with pytest.raises(rmm_next.RmmNextError, match=r"rmm_next.outstanding: tracking is off.*"
                       r"configure\(track=True\)"):
        rmm_next.outstanding()


def test_the_allocation_record_matches_the_c_layout():
    names = [name for name, _ in _lib.Allocation._fields_]
    assert names == ["ptr", "size", "alignment", "stream", "thread", "time_ns", "device",
                     "reserved", "stack_trace"]
    assert ctypes.sizeof(_lib.Allocation) == 8 * 6 + 4 * 2 + 8


def run_python(code, **env):
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS + sys.path), **env)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=120)


def test_rmm_next_log_in_the_environment_opens_the_log(tmp_path):
    path = tmp_path / "from_env.csv"
    out = run_python("import rmm_next; print(rmm_next.tracing()['logging'])",
                     RMM_NEXT_LOG=str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
    assert path.read_text() == ",".join(HEADER) + "\n"  # written at exit


def test_a_forked_child_writes_none_of_the_parents_log_and_starts_untraced(tmp_path):
    # The child leaves with sys.exit, so the library's atexit flush runs in it too; the parent's
    # buffered header must still be in the log once.
    path = tmp_path / "forked.csv"
    child_log = tmp_path / "child.csv"
    code = f"""
import os, sys
import rmm_next
rmm_next.configure(log={str(path)!r})
pid = os.fork()
if pid == 0:
    untraced = rmm_next.tracing() == {{"logging": False, "tracking": False}}
    rmm_next.configure(log={str(child_log)!r})  # a log of its own
    sys.exit(0 if untraced and rmm_next.tracing()["logging"] else 3)
_, status = os.waitpid(pid, 0)
rmm_next.configure(log=None)
print(os.waitstatus_to_exitcode(status))
"""
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0", out.stderr
    assert path.read_text() == ",".join(HEADER) + "\n"
    assert child_log.read_text() == ",".join(HEADER) + "\n"


def test_bad_environment_values_are_reported_and_ignored(tmp_path):
    missing = tmp_path / "no-such-dir" / "x.csv"
    out = run_python("import rmm_next; print(rmm_next.tracing())",
                     RMM_NEXT_LOG=str(missing), RMM_NEXT_TRACK="bogus")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'logging': False, 'tracking': False}"
    assert f"rmm_next: RMM_NEXT_LOG={missing} is ignored: " in out.stderr
    assert "cannot open the log file" in out.stderr
    assert "rmm_next: RMM_NEXT_TRACK=bogus is ignored: set it to 1, or to stacks" in out.stderr


# ---- With a GPU ----------------------------------------------------------------------------


def check_scenario(result, log):
    """What every framework scenario must show, from its JSON and its log."""
    events = read_log(log)
    assert events, "the log is empty"
    assert not [e for e in events if e["action"] == "allocate failure"]
    # One allocate and (for the freed) one free line per allocation, with the same size.
    live = {}
    for e in events:
        if e["action"] == "allocate":
            assert e["ptr"] not in live, f"{e['ptr']:#x} allocated twice without a free"
            live[e["ptr"]] = e["size"]
        elif e["ptr"] in live:
            assert live.pop(e["ptr"]) == e["size"], e
    # The scenario's tensors a, b, c, d were made one after the other, then c was freed: five
    # consecutive lines, with their pointers, sizes, streams and the thread's gettid().
    t = result["tensors"]
    wanted = [("allocate", t[n]) for n in "abcd"] + [("free", t["c"])]

    def matches(at):
        return all(
            e["action"] == action and e["ptr"] == w["ptr"] and e["size"] == w["nbytes"]
            and e["stream"] == w["stream"] and e["thread"] == result["native_thread"]
            for e, (action, w) in zip(events[at:at + len(wanted)], wanted)
        )

    found = [at for at in range(len(events) - len(wanted) + 1) if matches(at)]
    assert len(found) == 1, f"the tensors' lines are not in the log once in order: {t}"
    # The test's tensors: those live are exactly the new entries of outstanding(), with their
    # size, stream, device and thread; those freed are gone from it and freed in the log.
    new = {e["ptr"]: e for e in result["outstanding_new"]}
    expected = {t["ptr"]: t for t in result["tensors"].values() if t["live"]}
    assert set(new) == set(expected)
    for ptr, t in expected.items():
        assert new[ptr]["size"] == t["nbytes"]
        assert new[ptr]["stream"] == t["stream"]
        assert new[ptr]["device"] == 0
        assert new[ptr]["thread"] == result["thread"]
    freed = [t for t in result["tensors"].values() if not t["live"]]
    assert freed
    for t in freed:
        assert any(e["action"] == "free" and e["ptr"] == t["ptr"] and e["size"] == t["nbytes"]
                   for e in events), t
    # When the log closed, what it had allocated and not freed is what tracking listed then.
    assert set(live) == set(result["outstanding_at_close"])
    assert result["statistics"]["allocations"] >= len(
        [e for e in events if e["action"] == "allocate"])


@pytest.mark.gpu
@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("frameworks", ["torch", "cupy"])
def test_a_framework_is_logged_and_tracked(frameworks, tmp_path, record):
    framework(frameworks)
    log = tmp_path / f"{frameworks}.csv"
    result = run_scenario("tracing.py", frameworks, log)
    record(f"tracing.{frameworks}.log_lines", len(read_log(log)))
    check_scenario(result, log)


@pytest.mark.gpu
@pytest.mark.usefixtures("gpu")
def test_rmm_next_log_traces_a_program_unchanged_and_is_written_at_exit(tmp_path):
    framework("torch")
    log = tmp_path / "env.csv"
    result = run_scenario("tracing.py", "torch-env", log,
                          env={"RMM_NEXT_LOG": str(log), "RMM_NEXT_TRACK": "1"})
    events = read_log(log)  # nothing flushed it but the exit
    allocated = {e["ptr"] for e in events if e["action"] == "allocate"}
    freed = {e["ptr"] for e in events if e["action"] == "free"}
    for t in result["tensors"].values():
        assert t["ptr"] in allocated
        if not t["live"]:
            assert t["ptr"] in freed, t
    assert result["tracing"] == {"logging": True, "tracking": True}
    assert {e["ptr"] for e in result["outstanding_new"]} == {
        t["ptr"] for t in result["tensors"].values() if t["live"]}


def test_the_trace_runner_runs_a_script_unchanged_with_the_log_open(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(
        "import sys, rmm_next\n"
        "print(sys.argv[1:], __name__, rmm_next.tracing()['logging'])\n"
    )
    log = tmp_path / "runner.csv"
    out = subprocess.run(
        [sys.executable, "-m", "rmm_next.trace", "--frameworks", "", "--log", str(log),
         str(script), "one", "--two"],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS + sys.path)),
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['one', '--two'] __main__ True"
    assert log.read_text() == ",".join(HEADER) + "\n"


def test_the_trace_runner_refuses_unknown_frameworks():
    from rmm_next import trace

    with pytest.raises(rmm_next.RmmNextError,
                       match=r"rmm_next.trace: unknown framework\(s\) jax; choose from torch"):
        trace.frameworks_of("torch,jax")
    assert trace.frameworks_of("") == []


def test_the_trace_recorders_summary_and_gzip_copy(tmp_path):
    import gzip
    import importlib.util
    import json
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    source = root / "benchmarks" / "replay" / "trace_files.py"
    spec = importlib.util.spec_from_file_location("trace_files", source)
    trace_files = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trace_files)
    sample = root / "tests" / "data" / "rmm_format_log.csv"
    log = tmp_path / "sample.csv"
    log.write_bytes(sample.read_bytes())
    info = trace_files.finish(log, {"workload": "sample"})
    assert not log.exists()
    with gzip.open(tmp_path / "sample.csv.gz", "rb") as file:
        assert file.read() == sample.read_bytes()
    assert json.loads((tmp_path / "sample.json").read_text()) == info
    assert info["header"] == HEADER
    assert (info["lines"], info["allocations"], info["frees"], info["failures"]) == (9, 4, 4, 1)
    assert info["threads"] == 2
    assert info["streams"] == ["0", "0x2", "0x55d0c1e2a3b0"]
    assert info["peak_live_bytes"] == 1048576 + 256 + 4096
    assert info["live_at_end_bytes"] == 0
    assert (info["size_min"], info["size_median"], info["size_max"]) == (256, 4096, 1048576)
    assert info["workload"] == "sample"
