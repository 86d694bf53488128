# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The module and the library without a GPU: loading, signatures, argument checks, errors."""

import ctypes
import importlib.util
import os
import pathlib
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
    assert len(names) == len(set(names)) == 21
    # 18 uint64 counters, two int32, then allocated_bytes_high: the C struct's layout.
    assert ctypes.sizeof(_lib.Statistics) == 18 * 8 + 2 * 4 + 8
    assert _lib.Statistics.allocated_bytes_high.offset == 18 * 8 + 2 * 4


def test_segment_cache_statistics_structure_matches_the_c_struct():
    names = [name for name, _ in _lib.SegmentCacheStatistics._fields_]
    assert names == list(_lib.SEGMENT_CACHE_STATISTICS) and len(set(names)) == 12
    assert ctypes.sizeof(_lib.SegmentCacheStatistics) == 12 * 8
    assert ctypes.sizeof(_lib.SegmentCacheOptions) == 2 * ctypes.sizeof(ctypes.c_size_t) + 8


def test_segment_cache_options_reach_the_c_struct_as_its_comment_says():
    def c(**kw):
        o = rmm_next._segment_cache_options(rmm_next.SegmentCache(**kw))
        return o.max_idle_bytes, o.fence_interval, o.max_idle_fraction

    assert c() == ((1 << 64) - 1, 0, 0.0)  # the defaults: 16 MiB with a quarter of the peak
    assert c(max_idle_bytes=32 << 20) == (32 << 20, 0, 0.0)  # that bound, no fraction
    assert c(max_idle_bytes=32 << 20, max_idle_fraction=0.5) == (32 << 20, 0, 0.5)
    assert c(max_idle_fraction=1.0, fence_interval=8) == ((1 << 64) - 1, 8, 1.0)
    assert c(max_idle_fraction=0) == ((1 << 64) - 1, 0, -1.0)  # 16 MiB, no fraction
    assert c(max_idle_fraction=float("inf"))[2] == float("inf")


def test_configure_rejects_unknown_choices_before_calling_the_library():
    with pytest.raises(ValueError, match="pool="):
        rmm_next.configure(pool="bogus")
    with pytest.raises(ValueError, match="thread_cache="):
        rmm_next.configure(thread_cache="yes")
    with pytest.raises(ValueError, match="segment_cache="):
        rmm_next.configure(segment_cache="yes")
    with pytest.raises(ValueError, match="cannot be negative"):
        rmm_next.enable_segment_cache(cache=rmm_next.SegmentCache(max_idle_bytes=-1))
    for fraction in (-0.5, float("nan")):
        with pytest.raises(ValueError, match="max_idle_fraction"):
            rmm_next.enable_segment_cache(cache=rmm_next.SegmentCache(max_idle_fraction=fraction))


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


def test_errors_are_public_names():
    assert rmm_next.RmmNextError.__module__ == "rmm_next"
    assert rmm_next.OutOfMemoryError.__module__ == "rmm_next"
    assert issubclass(rmm_next.OutOfMemoryError, rmm_next.RmmNextError)


def test_the_library_is_found_in_every_package_directory(tmp_path):
    # An editable install imports python/rmm_next but installs the library into
    # site-packages/rmm_next, which its import hook adds to rmm_next.__path__.
    site = tmp_path / "site" / "rmm_next"
    site.mkdir(parents=True)
    (site / _lib.LIBRARY_NAME).symlink_to(rmm_next.library_path())
    sources = tmp_path / "src" / "rmm_next"
    sources.mkdir(parents=True)
    for module in (pathlib.Path(rmm_next.__file__).parent).glob("*.py"):
        (sources / module.name).write_text(module.read_text())
    code = (
        "import sys, rmm_next; rmm_next.__path__.append(sys.argv[1]); "
        "print(rmm_next.library_path())"
    )
    env = {k: v for k, v in os.environ.items() if k != _lib.ENV_VAR}
    env["PYTHONPATH"] = str(tmp_path / "src")
    out = subprocess.run(
        [sys.executable, "-c", code, str(site)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == os.path.realpath(rmm_next.library_path())


@pytest.mark.parametrize(
    "submodule, framework, install",
    [("torch", "torch", "pip install torch"), ("cupy", "cupy", "pip install cupy-cuda13x"),
     ("numba", "numba", "pip install numba-cuda")],
)
def test_a_missing_framework_says_what_to_install(submodule, framework, install):
    # sys.modules[name] = None makes `import name` fail as if it were not installed.
    code = (
        f"import sys; sys.modules[{framework!r}] = None; import rmm_next\n"
        f"try:\n    rmm_next.{submodule}.use\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PACKAGE_PATHS + sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"ImportError rmm_next.{submodule}: "), out.stdout
    assert f"({install})" in out.stdout, out.stdout
