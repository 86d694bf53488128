# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Finds and loads librmm_next_allocator.so with ctypes and declares its C functions."""

import ctypes
import importlib
import os
import pathlib
import sys
import threading

ENV_VAR = "RMM_NEXT_ALLOCATOR_LIBRARY"
LIBRARY_NAME = "librmm_next_allocator.so"
ABI_VERSION = 5


class RmmNextError(RuntimeError):
    """A call into librmm_next_allocator.so failed; the message is the library's."""

    # Public as rmm_next.RmmNextError: tracebacks and pickles name that, not this private module.
    __module__ = "rmm_next"


class OutOfMemoryError(RmmNextError, MemoryError):
    """An allocation failed because the device's memory (or its pool's limit) is exhausted."""

    __module__ = "rmm_next"


class PoolOptions(ctypes.Structure):
    _fields_ = [
        ("initial_pool_size", ctypes.c_size_t),
        ("release_threshold", ctypes.c_size_t),
        ("maximum_pool_size", ctypes.c_size_t),
    ]


class ThreadCacheOptions(ctypes.Structure):
    _fields_ = [
        ("max_cached_bytes_per_thread", ctypes.c_size_t),
        ("max_block_size", ctypes.c_size_t),
        ("max_streams_per_thread", ctypes.c_size_t),
        ("skip_capture_detection", ctypes.c_int),
    ]


def _uint64_fields(*names):
    """ctypes fields of 64-bit counters, in the order of `names`."""
    return [(name, ctypes.c_uint64) for name in names]


class SegmentCacheOptions(ctypes.Structure):
    _fields_ = [
        ("max_idle_bytes", ctypes.c_size_t),
        ("fence_interval", ctypes.c_size_t),
        ("max_idle_fraction", ctypes.c_double),
    ]


SEGMENT_CACHE_STATISTICS = (
    "enabled", "hits", "misses", "bypasses", "segments", "segment_bytes", "live_bytes",
    "idle_bytes", "released_segments", "unproven_bytes", "graph_pending_bytes", "lost_bytes",
)


class SegmentCacheStatistics(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in SEGMENT_CACHE_STATISTICS]


class Statistics(ctypes.Structure):
    _fields_ = _uint64_fields(
        "allocations",
        "deallocations",
        "failed_allocations",
        "allocated_bytes",
        "total_allocated_bytes",
        "torch_allocations",
        "cupy_allocations",
        "numba_allocations",
        "other_allocations",
        "pool_reserved_bytes",
        "pool_reserved_bytes_high",
        "pool_used_bytes",
        "pool_used_bytes_high",
        "cache_hits",
        "cache_misses",
        "cache_bypasses",
        "cached_bytes",
        "deferred_frees",
    ) + [
        ("resource_kind", ctypes.c_int32),
        ("thread_cache_enabled", ctypes.c_int32),
        ("allocated_bytes_high", ctypes.c_uint64),
    ]


class VmmOptions(ctypes.Structure):
    _fields_ = [
        ("segment_size", ctypes.c_size_t),
        ("handle_types", ctypes.c_uint32),
        ("granularity", ctypes.c_int32),
        ("peer_access", ctypes.c_int32),
        ("gpu_direct_rdma", ctypes.c_int32),
    ]


class VmmStatistics(ctypes.Structure):
    _fields_ = _uint64_fields(
        "allocations",
        "deallocations",
        "failed_allocations",
        "allocated_bytes",
        "segment_count",
        "segment_bytes",
        "segment_size",
        "granularity",
    ) + [
        ("handle_types", ctypes.c_uint32),
        ("gpu_direct_rdma", ctypes.c_int32),
        ("access_devices", ctypes.c_int32),
        ("made", ctypes.c_int32),
    ]


class Allocation(ctypes.Structure):
    _fields_ = [
        ("ptr", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("alignment", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        ("thread", ctypes.c_uint64),
        ("time_ns", ctypes.c_int64),
        ("device", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("stack_trace", ctypes.c_char_p),
    ]


_c_void_p = ctypes.c_void_p
_c_size_t = ctypes.c_size_t
_c_int = ctypes.c_int
_signatures = {
    "rmm_next_abi_version": (_c_int, []),
    "rmm_next_last_error": (ctypes.c_char_p, []),
    "rmm_next_device_count": (_c_int, []),
    "rmm_next_mem_get_info": (
        _c_int,
        [_c_int, ctypes.POINTER(_c_size_t), ctypes.POINTER(_c_size_t)],
    ),
    "rmm_next_use_current_pool": (_c_int, [_c_int]),
    "rmm_next_use_owned_pool": (_c_int, [_c_int, ctypes.POINTER(PoolOptions)]),
    "rmm_next_use_managed_memory": (_c_int, [_c_int]),
    "rmm_next_enable_thread_cache": (_c_int, [_c_int, ctypes.POINTER(ThreadCacheOptions)]),
    "rmm_next_disable_thread_cache": (_c_int, [_c_int]),
    "rmm_next_enable_segment_cache": (_c_int, [_c_int, ctypes.POINTER(SegmentCacheOptions)]),
    "rmm_next_disable_segment_cache": (_c_int, [_c_int]),
    "rmm_next_get_segment_cache_statistics": (
        _c_int, [_c_int, ctypes.POINTER(SegmentCacheStatistics)]),
    "rmm_next_release_unused": (_c_int, [_c_int]),
    "rmm_next_allocate": (_c_void_p, [_c_size_t, _c_int, _c_void_p]),
    "rmm_next_deallocate": (None, [_c_void_p, _c_size_t, _c_int, _c_void_p]),
    "rmm_next_torch_alloc": (_c_void_p, [ctypes.c_ssize_t, _c_int, _c_void_p]),
    "rmm_next_torch_free": (None, [_c_void_p, ctypes.c_ssize_t, _c_int, _c_void_p]),
    "rmm_next_torch_record_stream": (None, [_c_void_p, _c_void_p]),
    "rmm_next_torch_empty_cache": (None, []),
    "rmm_next_torch_segment_alloc": (_c_void_p, [ctypes.c_ssize_t, _c_int, _c_void_p]),
    "rmm_next_cupy_malloc": (_c_void_p, [_c_void_p, _c_size_t, _c_int]),
    "rmm_next_cupy_free": (None, [_c_void_p, _c_void_p, _c_int]),
    "rmm_next_cupy_forget_stream": (None, [_c_void_p]),
    "rmm_next_numba_alloc": (_c_void_p, [_c_size_t, _c_int]),
    "rmm_next_numba_free": (None, [_c_void_p, _c_size_t, _c_int]),
    "rmm_next_get_statistics": (_c_int, [_c_int, ctypes.POINTER(Statistics)]),
    "rmm_next_get_pool_attribute": (_c_int, [_c_int, _c_int, ctypes.POINTER(ctypes.c_uint64)]),
    "rmm_next_set_log": (_c_int, [ctypes.c_char_p]),
    "rmm_next_flush_log": (_c_int, []),
    "rmm_next_set_tracking": (_c_int, [_c_int, _c_int]),
    "rmm_next_get_tracing": (_c_int, [ctypes.POINTER(_c_int), ctypes.POINTER(_c_int)]),
    "rmm_next_outstanding": (ctypes.c_int64, [_c_int]),
    "rmm_next_outstanding_entry": (_c_int, [_c_size_t, ctypes.POINTER(Allocation)]),
    "rmm_next_reset_peak_statistics": (_c_int, [_c_int]),
    "rmm_next_vmm_configure": (_c_int, [_c_int, ctypes.POINTER(VmmOptions)]),
    "rmm_next_vmm_alloc": (_c_void_p, [ctypes.c_ssize_t, _c_int, _c_void_p]),
    "rmm_next_vmm_free": (None, [_c_void_p, ctypes.c_ssize_t, _c_int, _c_void_p]),
    "rmm_next_vmm_get_statistics": (_c_int, [_c_int, ctypes.POINTER(VmmStatistics)]),
    "rmm_next_vmm_segments": (
        ctypes.c_int64,
        [_c_int, ctypes.POINTER(_c_void_p), ctypes.POINTER(_c_size_t), _c_size_t],
    ),
}

_lock = threading.Lock()
_library = None
_path = None


def _package_dirs():
    """The package's directories: this file's, then every other entry of ``rmm_next.__path__``.

    An editable install (``pip install -e ./python``) imports the sources from python/rmm_next but
    installs the built library into site-packages/rmm_next, which scikit-build-core's editable
    finder adds to the package's ``__path__``.
    """
    dirs = [pathlib.Path(__file__).resolve().parent]
    package = sys.modules.get(__package__ or "rmm_next")
    for entry in getattr(package, "__path__", None) or []:
        path = pathlib.Path(entry).resolve()
        if path not in dirs:
            dirs.append(path)
    return dirs


def _build_trees():
    """Libraries built in this source tree (newest first), when the module runs from one: the
    CMake builds under build/ (a preset's, or ``cmake -B build/<name>``) and scikit-build-core's
    under python/build/."""
    root = pathlib.Path(__file__).resolve().parent.parent.parent
    if not (root / "include" / "rmm_next").is_dir():
        return []
    found = []
    for pattern in (f"build/*/src/allocator_plugin/{LIBRARY_NAME}",
                    f"build/src/allocator_plugin/{LIBRARY_NAME}",
                    f"python/build/*/src/allocator_plugin/{LIBRARY_NAME}"):
        found.extend(root.glob(pattern))
    return sorted(found, key=lambda path: path.stat().st_mtime, reverse=True)


def candidates():
    """Where the library is looked for, in order: $RMM_NEXT_ALLOCATOR_LIBRARY alone when set;
    else the package's directories, the build trees of the source tree the module runs from, and
    the dynamic loader's search path (LD_LIBRARY_PATH, e.g. a CMake install's lib/)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [env]
    found = [str(d / LIBRARY_NAME) for d in _package_dirs()]
    found += [str(path) for path in _build_trees() if str(path) not in found]
    return found + [LIBRARY_NAME]


def library_path():
    """The path of the loaded library (loading it if needed)."""
    load()
    return _path


def load():
    """Loads the library once, with RTLD_GLOBAL, and returns the ctypes handle.

    RTLD_GLOBAL lets C++ libraries loaded later bind to the same process-wide resource map.
    Raises RmmNextError when no library is found or its ABI version differs.
    """
    global _library, _path
    with _lock:
        if _library is not None:
            return _library
        errors = []
        for candidate in candidates():
            if os.sep in candidate and not os.path.exists(candidate):
                errors.append(f"{candidate}: no such file")
                continue
            try:
                lib = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                errors.append(f"{candidate}: {e}")
                continue
            for name, (restype, argtypes) in _signatures.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
            version = lib.rmm_next_abi_version()
            if version != ABI_VERSION:
                raise RmmNextError(
                    f"rmm_next: {candidate} has ABI version {version}, this module needs "
                    f"{ABI_VERSION}; rebuild the library or install matching versions"
                )
            _library, _path = lib, _loaded_path(lib, candidate)
            return _library
        raise RmmNextError(
            "rmm_next: cannot load librmm_next_allocator.so ("
            + "; ".join(errors)
            + f"); install the package with 'pip install ./python', build the library "
            "(cmake --build <build dir> --target rmm_next_allocator_plugin) or set "
            f"{ENV_VAR} to the library's path"
        )


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _loaded_path(lib, candidate):
    """The file the dynamic linker loaded (a bare name is searched for: ask it where)."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        address = ctypes.cast(lib.rmm_next_abi_version, ctypes.c_void_p).value
        if dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return os.path.realpath(candidate) if os.sep in candidate else candidate


_PLUGIN_PREFIX = "rmm_next::allocator_plugin: "


def last_error(lib):
    """The library's message for the calling thread's last failure. Python's message names the
    user's call (``rmm_next.<function>: ...``) instead of the C library's own prefix."""
    message = lib.rmm_next_last_error()
    text = message.decode(errors="replace") if message else "unknown error"
    return text[len(_PLUGIN_PREFIX) :] if text.startswith(_PLUGIN_PREFIX) else text


def check(lib, status, call):
    """Raises RmmNextError with the library's message when a C call returned -1."""
    if status != 0:
        raise RmmNextError(f"{call}: {last_error(lib)}")


def call(name, *args):
    """Calls the library's `rmm_next_<name>`; raises RmmNextError naming `rmm_next.<name>` on -1."""
    lib = load()
    check(lib, getattr(lib, f"rmm_next_{name}")(*args), f"rmm_next.{name}")


def allocation_error(lib, size):
    """The exception for an allocation of `size` bytes that returned NULL."""
    message = last_error(lib)
    if "out_of_memory" in message:
        return OutOfMemoryError(message)
    return RmmNextError(f"rmm_next: allocating {size} bytes failed: {message}")


def import_framework(module, submodule, framework, install):
    """Imports `module` for `submodule` (rmm_next.torch, ...); when it is missing, raises an
    ImportError saying which framework to install and how, instead of a bare ModuleNotFoundError."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise
        raise ImportError(
            f"{submodule}: {framework} is not installed (no module named {e.name!r}); install it "
            f"({install}) to use {submodule}",
            name=module,
        ) from e


def function_address(name):
    """The address of a C function of the library, for frameworks that take function pointers."""
    return ctypes.cast(getattr(load(), name), ctypes.c_void_p).value
