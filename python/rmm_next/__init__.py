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

The submodules ``torch``, ``cupy`` and ``numba`` import their framework only when used.
"""

import ctypes
import dataclasses
import importlib

from . import _lib
from ._lib import OutOfMemoryError, RmmNextError

__all__ = [
    "OutOfMemoryError",
    "OwnedPool",
    "RmmNextError",
    "ThreadCache",
    "allocate",
    "configure",
    "deallocate",
    "device_count",
    "disable_thread_cache",
    "enable_thread_cache",
    "library_path",
    "mem_get_info",
    "release_unused",
    "reset_peak_statistics",
    "statistics",
    "use_current_pool",
    "use_managed_memory",
    "use_owned_pool",
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


def configure(pool=None, thread_cache=None, device=None):
    """Chooses the resource and the thread cache in one call; the frameworks' ``use`` call it.

    ``pool``: None (leave as is), ``"current"``, ``"managed"`` or an ``OwnedPool``.
    ``thread_cache``: None (leave as is), True/False, or a ``ThreadCache``.
    """
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
    if thread_cache is True or isinstance(thread_cache, ThreadCache):
        enable_thread_cache(device, None if thread_cache is True else thread_cache)
    elif thread_cache is False:
        disable_thread_cache(device)
    elif thread_cache is not None:
        raise ValueError(
            f"rmm_next.configure: thread_cache={thread_cache!r}; pass None, a bool or a ThreadCache"
        )


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
