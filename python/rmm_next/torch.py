# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch through rmm-next, by one of two routes.

``rmm_next.torch.use()``, before the first CUDA tensor, replaces PyTorch's allocator for the whole
process: PyTorch's ``CUDAPluggableAllocator`` calls ``rmm_next_torch_alloc`` /
``rmm_next_torch_free`` of ``librmm_next_allocator.so`` with the tensor's device and current
stream, so every allocation is ordered on the stream PyTorch uses and freed on it.
``Tensor.record_stream`` is honoured: the free waits for the work queued on the recorded streams
(as PyTorch's ``cudaMallocAsync`` backend does). ``torch.cuda.empty_cache()`` returns the thread
caches' blocks and trims the pool. PyTorch's own statistics, snapshots, memory history and CUDA
graph trees (``torch.compile(mode="reduce-overhead")``) are unavailable on this route;
``memory_stats()`` and its companions here answer from rmm-next's counts.

``rmm_next.torch.mem_pool()`` keeps PyTorch's caching allocator and all of its tools: it returns a
``torch.cuda.MemPool`` whose segments come from rmm-next, for
``with torch.cuda.use_mem_pool(pool):`` (which routes the calling thread's allocations only).
"""

from . import _lib, _memory_stats, configure, reset_peak_statistics, statistics

# Imported first so that the process uses PyTorch's CUDA runtime, not one found by rmm-next.
_torch = _lib.import_framework("torch", "rmm_next.torch", "PyTorch", "pip install torch")

# PyTorch's own functions, kept before a shim replaces the ones in torch.cuda (docs/python.md).
_native = {
    name: getattr(_torch.cuda.memory, name)
    for name in (
        "memory_stats",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "reset_peak_memory_stats",
    )
}

_allocator = None
_segment_allocator = None

#: True once ``use()`` has installed the record-stream hook.
record_stream_hooked = False


def use(pool=None, thread_cache=None, device=None):
    """Makes rmm-next PyTorch's CUDA allocator for the rest of the process.

    Must run before PyTorch allocates CUDA memory (PyTorch cannot swap an allocator in use).
    ``pool`` and ``thread_cache`` are as for ``rmm_next.configure`` (default: each device's
    current pool, no thread cache). Calling it again only applies ``pool`` / ``thread_cache``.
    Returns the ``torch.cuda.memory.CUDAPluggableAllocator``.

    PyTorch's pluggable-allocator interface has no statistics, snapshots or memory history, and
    no answer to ``checkPoolLiveAllocations``, which CUDA graph trees call:
    ``torch.compile(mode="reduce-overhead")`` raises ``RuntimeError: pluggable does not yet
    support checkPoolLiveAllocations`` on this route. Graph trees, snapshots and history need the
    ``mem_pool()`` route; ``rmm_next.torch.memory_stats()`` answers "how much memory" on both.
    ``torch.cuda.graph`` captures work on this route.
    """
    global _allocator, record_stream_hooked
    if _allocator is None and _segment_allocator is not None:
        raise _lib.RmmNextError(
            "rmm_next.torch.use: this process already made a rmm_next.torch.mem_pool(), so "
            "PyTorch's caching allocator is in use; choose one route per process"
        )
    configure(pool=pool, thread_cache=thread_cache, device=device)
    if _allocator is not None:
        return _allocator
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator

    path = _lib.library_path()
    allocator = CUDAPluggableAllocator(path, "rmm_next_torch_alloc", "rmm_next_torch_free")
    inner = allocator.allocator()
    if hasattr(inner, "set_record_stream_fn"):
        inner.set_record_stream_fn(_lib.function_address("rmm_next_torch_record_stream"))
        record_stream_hooked = True
    if hasattr(inner, "set_reset_fn"):
        inner.set_reset_fn(_lib.function_address("rmm_next_torch_empty_cache"))
    try:
        change_current_allocator(allocator)
    except RuntimeError as e:
        raise _lib.RmmNextError(
            "rmm_next.torch.use: PyTorch already allocated CUDA memory with another allocator "
            f"({e}); call rmm_next.torch.use() before the first CUDA tensor"
        ) from e
    _allocator = allocator
    return allocator


def in_use():
    """True when ``use()`` made rmm-next PyTorch's allocator."""
    return _allocator is not None


def mem_pool(pool=None, thread_cache=None, device=None):
    """A ``torch.cuda.MemPool`` whose segments come from rmm-next, for
    ``with torch.cuda.use_mem_pool(p):``.

    PyTorch's caching allocator stays on top: it asks rmm-next for segments (at least 2 MiB, so
    a thread cache never holds them), splits and caches them, and keeps its statistics, snapshots
    (``p.snapshot()``), memory history and CUDA graph trees. It gives segments back to rmm-next
    only when the pool is destroyed (``torch.cuda.empty_cache()`` keeps a live pool's segments),
    and ``use_mem_pool`` routes only the calling thread (autograd's backward thread is another).
    Each segment is allocated on a stream of rmm-next's own and complete before PyTorch gets it,
    so it is ready for every stream and never part of a graph capture.

    For ``torch.compile(mode="reduce-overhead")``, make the model and its inputs inside
    ``use_mem_pool`` and call the compiled model beside it: graph trees keep a pool of their own,
    and inside ``use_mem_pool`` the calling thread's allocations go to the pool entered first.
    ``torch.cuda.graph(g, pool=p.id)`` captures into this pool.

    ``pool`` and ``thread_cache`` are as for ``rmm_next.configure``; ``device`` (default: the
    current device) is the pool's device. Not in a process that called ``use()``.
    """
    global _segment_allocator
    if _allocator is not None:
        raise _lib.RmmNextError(
            "rmm_next.torch.mem_pool: rmm_next.torch.use() replaced PyTorch's caching allocator, "
            "which keeps the pools; use mem_pool() in a process that does not call use()"
        )
    configure(pool=pool, thread_cache=thread_cache, device=device)
    if _segment_allocator is None:
        from torch.cuda.memory import CUDAPluggableAllocator

        # One for the process: a MemPool keeps a raw pointer to it.
        _segment_allocator = CUDAPluggableAllocator(
            _lib.library_path(), "rmm_next_torch_segment_alloc", "rmm_next_torch_free"
        )
    with _torch.cuda.device(_torch.cuda.current_device() if device is None else device):
        return _torch.cuda.MemPool(_segment_allocator.allocator())


def _index(device):
    return _torch.cuda._get_device_index(device, optional=True)


def memory_stats(device=None):
    """``torch.cuda.memory_stats(device)`` on either route.

    After ``use()``: from rmm-next's counts for the device (``rmm_next.statistics``), with the
    keys ``allocated_bytes.all.{current,peak,allocated,freed}`` (likewise ``active_bytes`` and
    ``requested_bytes``: rmm-next counts the bytes asked for, unrounded),
    ``allocation.all.{current,allocated,freed}``, ``reserved_bytes.all.{current,peak}`` (the
    pool serving the device: every user of a shared pool counts), ``num_alloc_retries`` (0:
    not counted) and ``num_ooms`` (allocations that returned NULL). The bytes are those of every
    framework allocating through rmm-next on the device. Otherwise: PyTorch's own.
    """
    if _allocator is None:
        return _native["memory_stats"](device)
    return _memory_stats.pytorch_style(statistics(_index(device)))


def memory_allocated(device=None):
    """``torch.cuda.memory_allocated`` on either route (see ``memory_stats``)."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    """``torch.cuda.max_memory_allocated`` on either route (see ``memory_stats``)."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    """``torch.cuda.memory_reserved`` on either route (see ``memory_stats``)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    """``torch.cuda.max_memory_reserved`` on either route (see ``memory_stats``)."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    """``torch.cuda.reset_peak_memory_stats`` on either route: after ``use()``,
    ``rmm_next.reset_peak_statistics`` (which restarts the pool's own watermarks too)."""
    if _allocator is None:
        return _native["reset_peak_memory_stats"](device)
    return reset_peak_statistics(_index(device))


__all__ = [
    "in_use",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_pool",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "record_stream_hooked",
    "reset_peak_memory_stats",
    "use",
]
