# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The module and the library without a GPU: loading, signatures, argument checks, errors."""

import ctypes
import importlib.util
import os
import subprocess
import sys

import pytest

import rmm_next
from rmm_next import _lib
from conftest import PACKAGE_PATHS, gpu_reason


def test_library_loads_with_the_expected_abi():
    lib = _lib.load()
    assert lib.rmm_next_abi_version() == _lib.ABI_VERSION
    assert os.path.isfile(rmm_next.library_path())


def test_every_declared_function_is_exported():
    lib = ctypes.CDLL(rmm_next.library_path())
    for name in _lib._signatures:
        assert hasattr(lib, name), name


def test_statistics_structure_has_every_field_once():
    names = [name for name, _ in _lib.Statistics._fields_]
    assert len(names) == len(set(names)) == 20
    # 18 uint64 counters and two int32: the C struct's layout.
    assert ctypes.sizeof(_lib.Statistics) == 18 * 8 + 2 * 4


def test_configure_rejects_unknown_choices_before_calling_the_library():
    with pytest.raises(ValueError, match="pool="):
        rmm_next.configure(pool="bogus")
    with pytest.raises(ValueError, match="thread_cache="):
        rmm_next.configure(thread_cache="yes")


def test_framework_modules_are_imported_on_first_access_only():
    code = "import sys, rmm_next; print(any(m in sys.modules for m in ('torch','cupy','numba')))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS + sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_missing_library_is_reported_with_what_to_do():
    code = "import rmm_next; rmm_next.device_count()"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(PACKAGE_PATHS + sys.path),
        RMM_NEXT_ALLOCATOR_LIBRARY="/nonexistent/librmm_next_allocator.so",
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "RMM_NEXT_ALLOCATOR_LIBRARY" in out.stderr and "pip install ./python" in out.stderr


@pytest.mark.skipif(gpu_reason() is None, reason="a GPU is present: the failures are not reached")
def test_without_a_device_every_call_fails_cleanly():
    with pytest.raises(rmm_next.RmmNextError, match="no usable CUDA driver or device"):
        rmm_next.device_count()
    with pytest.raises(rmm_next.RmmNextError):
        rmm_next.allocate(1024)
    with pytest.raises(rmm_next.RmmNextError):
        rmm_next.statistics()
    with pytest.raises(rmm_next.RmmNextError):
        rmm_next.use_owned_pool()
    lib = _lib.load()
    # The frameworks' entry points return NULL or nothing, never an exception.
    assert lib.rmm_next_torch_alloc(1024, 0, None) is None
    lib.rmm_next_torch_free(None, 0, 0, None)
    assert lib.rmm_next_cupy_malloc(None, 1024, 0) is None
    lib.rmm_next_cupy_free(None, None, 0)
    assert lib.rmm_next_numba_alloc(1024, 0) is None
    lib.rmm_next_torch_record_stream(None, None)
    lib.rmm_next_torch_empty_cache()
    assert "driver" in _lib.last_error(lib)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed")
def test_rmm_next_torch_needs_pytorch():
    with pytest.raises(ImportError):
        import rmm_next.torch  # noqa: F401
