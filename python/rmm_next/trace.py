# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Runs a Python program unchanged with its frameworks allocating through rmm-next, logged.

    python -m rmm_next.trace [--log trace.csv] [--track] [--frameworks torch,cupy,numba]
                             [--thread-cache] (script.py | -m module) [args...]

Before the program starts: ``rmm_next.configure(log=..., track=...)``, then
``rmm_next.torch.use()`` and ``rmm_next.cupy.use()`` for the frameworks chosen (default: those
installed) and ``NUMBA_CUDA_MEMORY_MANAGER=rmm_next.numba`` for Numba. The program then runs as
``python script.py args`` would (``sys.argv``, ``__main__``). The log is written at exit.
"""

import argparse
import importlib
import importlib.util
import os
import runpy
import sys

from . import _lib, configure

FRAMEWORKS = ("torch", "cupy", "numba")


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m rmm_next.trace",
        description="Runs a Python program with PyTorch, CuPy and Numba allocating through "
        "rmm-next, each allocation and free logged in RMM's CSV format.",
    )
    parser.add_argument("--log", default="rmm_next_log.csv",
                        help="the log to write (default: rmm_next_log.csv)")
    parser.add_argument("--track", action="store_true",
                        help="also keep the live allocations for rmm_next.outstanding()")
    parser.add_argument("--thread-cache", action="store_true", help="put the thread cache in place")
    parser.add_argument("--frameworks", default=None,
                        help="comma-separated, from torch,cupy,numba (default: those installed)")
    parser.add_argument("-m", dest="module", default=None, help="run a module, as python -m does")
    parser.add_argument("program", nargs=argparse.REMAINDER,
                        help="the script and its arguments (or the module's arguments with -m)")
    return parser


def frameworks_of(text):
    """The frameworks named in `text` (None: those installed), checked."""
    if text is None:
        return [f for f in FRAMEWORKS if importlib.util.find_spec(f) is not None]
    chosen = [f for f in text.split(",") if f]
    unknown = [f for f in chosen if f not in FRAMEWORKS]
    if unknown:
        raise _lib.RmmNextError(
            f"rmm_next.trace: unknown framework(s) {', '.join(unknown)}; choose from "
            f"{', '.join(FRAMEWORKS)}"
        )
    return chosen


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.module is None and not args.program:
        _parser().error("give a script (or -m module) to run")
    frameworks = frameworks_of(args.frameworks)
    # The frameworks first, so that the process uses their CUDA runtime, not one the library
    # would load; then the log, then each framework's use().
    modules = [importlib.import_module(f".{f}", __package__) for f in frameworks if f != "numba"]
    configure(log=args.log, track=True if args.track else None,
              thread_cache=True if args.thread_cache else None)
    if "numba" in frameworks:
        os.environ["NUMBA_CUDA_MEMORY_MANAGER"] = "rmm_next.numba"
    for module in modules:
        module.use()
    if args.module is not None:
        sys.argv = [args.module] + args.program
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args.program)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.program[0])))
        runpy.run_path(args.program[0], run_name="__main__")


if __name__ == "__main__":
    main()
