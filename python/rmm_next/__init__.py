# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""rmm-next's memory for PyTorch, CuPy and Numba, from one small shared library.

Every framework allocates through ``librmm_next_allocator.so`` from the process-wide per-device
resources of rmm-next (by default each device's current driver pool, which every
``cudaMallocAsync`` user in the process shares)::

    import rmm_next
    rmm_next.torch.use()                               # PyTorch, before its first CUDA tensor
    rmm_next.cupy.use()                                # CuPy
    numba.cuda.set_memory_manager(rmm_next.numba.RmmNextNumbaManager)   # Numba
    rmm_next.statistics()

``rmm_next.configure(log="trace.csv")`` logs every allocation and free in RMM's CSV format, and
``configure(track=True)`` keeps the live allocations for ``rmm_next.outstanding()``; so do
``RMM_NEXT_LOG=trace.csv`` and ``RMM_NEXT_TRACK=1`` in the environment.

The submodules ``torch``, ``cupy`` and ``numba`` import their framework only when used.
"""

import ctypes
import dataclasses
import importlib
import os

from . import _lib
from ._lib import OutOfMemoryError, RmmNextError
from ._vmm import VmmOptions, configure_vmm, vmm_segments, vmm_statistics

__all__ = [
    "OutOfMemoryError",
    "OwnedPool",
    "RmmNextError",
    "SegmentCache",
    "ThreadCache",
    "Tracking",
    "VmmOptions",
    "allocate",
    "configure",
    "configure_vmm",
    "deallocate",
    "device_count",
    "disable_segment_cache",
    "disable_thread_cache",
    "enable_segment_cache",
    "enable_thread_cache",
    "flush_log",
    "library_path",
    "mem_get_info",
    "outstanding",
    "pool_attributes",
    "release_unused",
    "reset_peak_statistics",
    "segment_cache_statistics",
    "statistics",
    "tracing",
    "use_current_pool",
    "use_managed_memory",
    "use_owned_pool",
    "vmm_segments",
    "vmm_statistics",
]
__version__ = "0.1.0"

_SIZE_MAX = ctypes.c_size_t(-1).value
_RESOURCE_KINDS = {0: "current_pool", 1: "owned_pool", 2: "managed", 3: "external"}


def __getattr__(name):
    # rmm_next.torch, rmm_next.cupy, rmm_next.numba: imported on first access.
    if name in ("torch", "cupy", "numba"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'rmm_next' has no attribute {name!r}")


def _device(device):
    return -1 if device is None else int(device)


@dataclasses.dataclass(frozen=True)
class OwnedPool:
    """A pool of rmm-next's own for each device, kept apart from other pools.

    ``release_threshold=None`` keeps all freed memory reserved; ``maximum_pool_size=0`` means no
    bound.
    """

    initial_pool_size: int = 0
    release_threshold: int | None = None
    maximum_pool_size: int = 0


@dataclasses.dataclass(frozen=True)
class ThreadCache:
    """Options of the per-thread, per-stream cache (``thread_cache_adaptor``); 0 keeps a default."""

    max_cached_bytes_per_thread: int = 0
    max_block_size: int = 0
    max_streams_per_thread: int = 0
    detect_capture: bool = True


@dataclasses.dataclass(frozen=True)
class SegmentCache:
    """Options of the segment cache (``segment_cache_adaptor``, docs/segment_cache.md): a caching
    layer of every size over the pool. ``max_idle_bytes``: bytes of idle segments kept at least
    (None: the default, 16 MiB; 0: none). ``max_idle_fraction``: the fraction of the peak live
    bytes since the last trim that idle segments may also reach, while the live bytes are that far
    below the peak (None: a quarter with the default ``max_idle_bytes``, none with a number given;
    0: none). ``fence_interval``: most frees on a stream between its fences (0: the default,
    64)."""

    max_idle_bytes: int | None = None
    fence_interval: int = 0
    max_idle_fraction: float | None = None


@dataclasses.dataclass(frozen=True)
class Tracking:
    """Options of the tracking ``configure(track=...)`` turns on: ``stack_traces`` records the
    stack of each allocation (costly; ``outstanding()`` then gives it as text)."""

    stack_traces: bool = False


class _Unchanged:
    def __repr__(self):
        return "unchanged"


#: ``configure``'s default for ``log``: leave the log as it is.
_UNCHANGED = _Unchanged()


def library_path():
    """The path of the loaded ``librmm_next_allocator.so``."""
    return _lib.library_path()


def device_count():
    """The number of visible CUDA devices. Raises RmmNextError without a driver or device."""
    lib = _lib.load()
    count = lib.rmm_next_device_count()
    if count < 0:
        raise RmmNextError(f"rmm_next.device_count: {_lib.last_error(lib)}")
    return count


def mem_get_info(device=None):
    """``(free, total)`` bytes of the device (``cudaMemGetInfo``)."""
    lib = _lib.load()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    status = lib.rmm_next_mem_get_info(_device(device), ctypes.byref(free), ctypes.byref(total))
    _lib.check(lib, status, "rmm_next.mem_get_info")
    return free.value, total.value


def use_current_pool(device=None):
    """Each device's current driver pool, shared with every ``cudaMallocAsync`` user (the default).

    ``device=None``: every device. Fails for a device that still has memory allocated through
    rmm-next.
    """
    _lib.call("use_current_pool", _device(device))


def use_owned_pool(device=None, pool=None):
    """A pool of rmm-next's own (an ``OwnedPool``; None: defaults), apart from other pools."""
    pool = pool or OwnedPool()
    options = _lib.PoolOptions(
        pool.initial_pool_size,
        _SIZE_MAX if pool.release_threshold is None else pool.release_threshold,
        pool.maximum_pool_size,
    )
    _lib.call("use_owned_pool", _device(device), ctypes.byref(options))


def use_managed_memory(device=None):
    """Managed memory from each device's current managed pool (CUDA 13)."""
    _lib.call("use_managed_memory", _device(device))


def enable_thread_cache(device=None, cache=None):
    """Puts a thread cache (a ``ThreadCache``; None: defaults) in front of each device's resource.

    Choose the resource first: choosing it again keeps the cache in front of the new one.
    """
    cache = cache or ThreadCache()
    options = _lib.ThreadCacheOptions(
        cache.max_cached_bytes_per_thread,
        cache.max_block_size,
        cache.max_streams_per_thread,
        0 if cache.detect_capture else 1,
    )
    _lib.call("enable_thread_cache", _device(device), ctypes.byref(options))


def disable_thread_cache(device=None):
    """Removes rmm-next's thread cache, returning its blocks to the pool."""
    _lib.call("disable_thread_cache", _device(device))


def enable_segment_cache(device=None, cache=None):
    """Puts a segment cache (a ``SegmentCache``; None: defaults) over each device's resource, under
    the thread cache when one is in place. ``torch.cuda.empty_cache()`` under ``use()`` and
    ``release_unused()`` give its idle segments back."""
    options = _segment_cache_options(cache or SegmentCache())
    _lib.call("enable_segment_cache", _device(device), ctypes.byref(options))


def _segment_cache_options(cache):
    """The C options (``rmm_next_segment_cache_options``) of ``cache``, checked."""
    idle = (1 << 64) - 1 if cache.max_idle_bytes is None else cache.max_idle_bytes
    if idle < 0 or cache.fence_interval < 0:
        raise ValueError(f"rmm_next.enable_segment_cache: {cache!r}; sizes cannot be negative")
    fraction = cache.max_idle_fraction
    if fraction is not None and not fraction >= 0:  # negative, or NaN
        raise ValueError(
            f"rmm_next.enable_segment_cache: {cache!r}; max_idle_fraction is a fraction of the "
            "peak live bytes: 0 or more")
    # The C struct's 0 is the default, a negative value none.
    c_fraction = 0.0 if fraction is None else (-1.0 if fraction == 0 else float(fraction))
    return _lib.SegmentCacheOptions(idle, cache.fence_interval, c_fraction)


def disable_segment_cache(device=None):
    """Takes rmm-next's segment cache out; its idle segments go back to the pool."""
    _lib.call("disable_segment_cache", _device(device))


def segment_cache_statistics(device=None):
    """What the device's segment cache holds and has done, as a dict (``enabled`` False and zeros
    without one): ``hits``, ``misses``, ``bypasses``, ``segments``, ``segment_bytes``,
    ``live_bytes``, ``idle_bytes``, ``released_segments``, ``unproven_bytes``,
    ``graph_pending_bytes``, ``lost_bytes``."""
    lib = _lib.load()
    out = _lib.SegmentCacheStatistics()
    _lib.check(lib, lib.rmm_next_get_segment_cache_statistics(_device(device), ctypes.byref(out)),
               "rmm_next.segment_cache_statistics")
    found = {name: getattr(out, name) for name in _lib.SEGMENT_CACHE_STATISTICS}
    found["enabled"] = bool(found["enabled"])
    return found


def _log_path(log):
    """The path ``configure(log=...)`` opens, b"" to end the log, or None to leave it."""
    if log is _UNCHANGED:
        return None
    if log is None or log is False:
        return b""
    if isinstance(log, (str, bytes, os.PathLike)) and os.fspath(log):
        return os.fsencode(log)
    raise ValueError(
        f"rmm_next.configure: log={log!r}; pass a file path to log to, or None to end the log"
    )


def _tracking(track):
    """``(enabled, stack_traces)`` for ``configure(track=...)``, or None to leave it."""
    if track is None:
        return None
    if track is True or track is False:
        return track, False
    if isinstance(track, Tracking):
        return True, bool(track.stack_traces)
    raise ValueError(
        f"rmm_next.configure: track={track!r}; pass None, a bool or a rmm_next.Tracking"
    )


def _choose_cache(name, value, options_type, enable, disable, device):
    """``configure``'s handling of ``thread_cache=`` and ``segment_cache=``."""
    if value is True or isinstance(value, options_type):
        enable(device, None if value is True else value)
    elif value is False:
        disable(device)
    elif value is not None:
        raise ValueError(
            f"rmm_next.configure: {name}={value!r}; pass None, a bool or a "
            f"{options_type.__name__}"
        )


def configure(pool=None, thread_cache=None, device=None, *, log=_UNCHANGED, track=None,
              segment_cache=None):
    """Chooses the resource and the thread cache in one call; the frameworks' ``use`` call it.

    ``pool``: None (leave as is), ``"current"``, ``"managed"`` or an ``OwnedPool``.
    ``thread_cache``: None (leave as is), True/False, or a ``ThreadCache``.
    ``segment_cache``: None (leave as is), True/False, or a ``SegmentCache``: a caching layer of
    every size under the thread cache (docs/segment_cache.md).

    ``log``: a path starts logging every allocation and free of every device and framework there,
    in RMM's ``logging_resource_adaptor`` CSV format (the file is created or truncated; a log
    already open is closed first); None or False ends the log; left out, the log stays as it is.
    What is buffered is written at ``flush_log()``, when the log ends and at exit.
    ``track``: True (or a ``Tracking``) keeps every live allocation for ``outstanding()``; False
    stops and forgets; None leaves it. ``log`` and ``track`` cover every device (``device`` is
    for ``pool`` and ``thread_cache``).
    """
    path = _log_path(log)
    tracking = _tracking(track)
    if pool == "current":
        use_current_pool(device)
    elif pool == "managed":
        use_managed_memory(device)
    elif isinstance(pool, OwnedPool):
        use_owned_pool(device, pool)
    elif pool is not None:
        raise ValueError(
            f"rmm_next.configure: pool={pool!r}; pass None, 'current', 'managed' or an OwnedPool"
        )
    _choose_cache("segment_cache", segment_cache, SegmentCache, enable_segment_cache,
                  disable_segment_cache, device)
    _choose_cache("thread_cache", thread_cache, ThreadCache, enable_thread_cache,
                  disable_thread_cache, device)
    if tracking is not None:
        lib = _lib.load()
        _lib.check(lib, lib.rmm_next_set_tracking(int(tracking[0]), int(tracking[1])),
                   "rmm_next.configure")
    if path is not None:
        lib = _lib.load()
        _lib.check(lib, lib.rmm_next_set_log(path or None), "rmm_next.configure")


# cudaMemPoolAttr values (driver_types.h), by the names pool_attributes() gives them.
_POOL_ATTRIBUTES = {
    "reuse_follow_event_dependencies": 1,
    "reuse_allow_opportunistic": 2,
    "reuse_allow_internal_dependencies": 3,
    "release_threshold": 4,
    "reserved_mem_current": 5,
    "reserved_mem_high": 6,
    "used_mem_current": 7,
    "used_mem_high": 8,
}


def pool_attributes(device=None):
    """The attributes of the driver pool serving the device (the current one for None), as a dict
    (``cudaMemPoolGetAttribute``): ``release_threshold``, ``reserved_mem_current``,
    ``reserved_mem_high``, ``used_mem_current``, ``used_mem_high`` (bytes; a shared pool counts
    every user) and the reuse flags ``reuse_follow_event_dependencies``,
    ``reuse_allow_opportunistic``, ``reuse_allow_internal_dependencies`` (bools)."""
    lib = _lib.load()
    value = ctypes.c_uint64()
    found = {}
    for name, attribute in _POOL_ATTRIBUTES.items():
        status = lib.rmm_next_get_pool_attribute(_device(device), attribute, ctypes.byref(value))
        _lib.check(lib, status, "rmm_next.pool_attributes")
        found[name] = bool(value.value) if name.startswith("reuse_") else value.value
    return found


def flush_log():
    """Writes out what the log has buffered. Returns False when no log is open."""
    lib = _lib.load()
    status = lib.rmm_next_flush_log()
    if status < 0:
        raise RmmNextError(f"rmm_next.flush_log: {_lib.last_error(lib)}")
    return status == 1


def tracing():
    """``{"logging": bool, "tracking": bool}``: whether a log is open and tracking is on (by
    ``configure`` or the environment's ``RMM_NEXT_LOG`` / ``RMM_NEXT_TRACK``)."""
    lib = _lib.load()
    logging, tracking = ctypes.c_int(), ctypes.c_int()
    status = lib.rmm_next_get_tracing(ctypes.byref(logging), ctypes.byref(tracking))
    _lib.check(lib, status, "rmm_next.tracing")
    return {"logging": bool(logging.value), "tracking": bool(tracking.value)}


def outstanding(device=None):
    """The live allocations tracking recorded (``configure(track=True)``), oldest first, of
    ``device`` (None: every device), as dicts: ``ptr``, ``size`` (as asked for), ``alignment``,
    ``stream`` (a ``cudaStream_t`` as an int; 0: the legacy default stream), ``device``,
    ``thread`` (the allocating thread's ``threading.get_ident()``), ``time`` (seconds since the
    epoch, as ``time.time()``) and ``stack_trace`` (text; "" without
    ``Tracking(stack_traces=True)``).

    Raises RmmNextError when tracking is off.
    """
    lib = _lib.load()
    count = lib.rmm_next_outstanding(_device(device))
    if count < 0:
        raise RmmNextError(f"rmm_next.outstanding: {_lib.last_error(lib)}")
    entry = _lib.Allocation()
    found = []
    for index in range(count):
        _lib.check(lib, lib.rmm_next_outstanding_entry(index, ctypes.byref(entry)),
                   "rmm_next.outstanding")
        found.append({
            "ptr": entry.ptr or 0,
            "size": entry.size,
            "alignment": entry.alignment,
            "stream": entry.stream or 0,
            "device": entry.device,
            "thread": entry.thread,
            "time": entry.time_ns / 1e9,
            "stack_trace": (entry.stack_trace or b"").decode(errors="replace"),
        })
    return found


def release_unused(device=None):
    """Returns cached blocks, synchronizes and trims the pool (every used device for None)."""
    _lib.call("release_unused", _device(device))


def allocate(nbytes, device=None, stream=0):
    """``nbytes`` of device memory in the order of ``stream`` (a ``cudaStream_t`` as an int; 0:
    the legacy default stream). Returns the address; free it with ``deallocate``.

    Raises OutOfMemoryError when the memory is exhausted.
    """
    lib = _lib.load()
    ptr = lib.rmm_next_allocate(nbytes, _device(device), stream or None)
    if nbytes and not ptr:
        raise _lib.allocation_error(lib, nbytes)
    return ptr or 0


def deallocate(ptr, nbytes, device=None, stream=0):
    """Frees memory from ``allocate`` (same size) in the order of ``stream``."""
    lib = _lib.load()
    lib.rmm_next_deallocate(ptr or None, nbytes, _device(device), stream or None)


def statistics(device=None):
    """What went through rmm-next for the device (the current one for None), as a dict.

    ``allocations``, ``deallocations``, ``failed_allocations``, ``allocated_bytes`` (live now)
    and its high watermark ``allocated_bytes_high``, ``total_allocated_bytes``, per framework ``torch_allocations``, ``cupy_allocations``,
    ``numba_allocations``, ``other_allocations``; the pool serving the device
    (``pool_reserved_bytes``, ``pool_used_bytes`` and their ``_high`` watermarks: every user of
    the pool counts); the thread cache (``cache_hits``, ``cache_misses``, ``cache_bypasses``,
    ``cached_bytes``, ``thread_cache_enabled``); ``deferred_frees`` (waiting for a stream capture
    to end) and ``resource`` (``current_pool``, ``owned_pool``, ``managed`` or ``external``: set
    from C++).
    """
    lib = _lib.load()
    out = _lib.Statistics()
    status = lib.rmm_next_get_statistics(_device(device), ctypes.byref(out))
    _lib.check(lib, status, "rmm_next.statistics")
    stats = {name: getattr(out, name) for name, _ in _lib.Statistics._fields_}
    stats["resource"] = _RESOURCE_KINDS.get(stats.pop("resource_kind"), "unknown")
    stats["thread_cache_enabled"] = bool(stats["thread_cache_enabled"])
    return stats


def reset_peak_statistics(device=None):
    """Restarts the high watermarks of the device (the current one for None) from their current
    values: ``allocated_bytes_high`` and the pool's ``pool_reserved_bytes_high`` and
    ``pool_used_bytes_high`` (the pool's own: for every user of a shared pool)."""
    _lib.call("reset_peak_statistics", _device(device))
