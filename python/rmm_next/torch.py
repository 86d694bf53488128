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
``memory_stats()`` and its companions here answer from rmm-next's counts, and
``use(install_stats=True)`` puts them in ``torch.cuda`` and ``torch.cuda.memory``.

``rmm_next.torch.mem_pool()`` keeps PyTorch's caching allocator and all of its tools: it returns a
``torch.cuda.MemPool`` whose segments come from rmm-next, for
``with torch.cuda.use_mem_pool(pool):`` (which routes the calling thread's allocations only).
``rmm_next.torch.nccl_mem_pool()`` is such a pool over memory NCCL can register (a
``vmm_resource``), for ``torch.distributed``'s ``register_mem_pool`` (or
``rmm_next.torch.register_mem_pool``, which registers a symmetric pool the way the PyTorch in use
asks for).
"""

import inspect
import re

from . import _lib, _memory_stats, _vmm, configure, reset_peak_statistics, statistics

# Imported first so that the process uses PyTorch's CUDA runtime, not one found by rmm-next.
_torch = _lib.import_framework("torch", "rmm_next.torch", "PyTorch", "pip install torch")

#: The statistics functions of ``torch.cuda`` (and ``torch.cuda.memory``) that this module answers
#: from rmm-next's counts after ``use()``; ``use(install_stats=True)`` puts them there.
STATISTICS_FUNCTIONS = (
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
)

# PyTorch's own functions, kept before use(install_stats=True) replaces them.
_native = {name: getattr(_torch.cuda.memory, name) for name in STATISTICS_FUNCTIONS}

_allocator = None
_segment_allocator = None
_vmm_allocator = None

#: True once ``use()`` has installed the record-stream hook.
record_stream_hooked = False

#: True once ``use(install_stats=True)`` put this module's statistics functions in ``torch.cuda``.
stats_installed = False


def use(pool=None, thread_cache=None, device=None, *, install_stats=False, segment_cache=None):
    """Makes rmm-next PyTorch's CUDA allocator for the rest of the process.

    Must run before PyTorch allocates CUDA memory (PyTorch cannot swap an allocator in use).
    ``pool``, ``thread_cache`` and ``segment_cache`` are as for ``rmm_next.configure`` (default:
    each device's current pool, no cache); ``torch.cuda.empty_cache()`` gives the segment cache's
    idle segments back. Calling it again only applies those three (and ``install_stats=True``). Returns the ``torch.cuda.memory.CUDAPluggableAllocator``.

    ``install_stats=True`` replaces ``memory_stats``, ``memory_allocated``,
    ``max_memory_allocated``, ``memory_reserved``, ``max_memory_reserved`` and
    ``reset_peak_memory_stats`` in both ``torch.cuda`` and ``torch.cuda.memory`` with this
    module's (``STATISTICS_FUNCTIONS``), which answer from rmm-next's counts: code that calls
    PyTorch's (HuggingFace ``Trainer``'s memory metrics, Lightning's ``DeviceStatsMonitor``)
    works on this route, where PyTorch's own raise. They stay for the process: ``use()`` has no
    undo.

    PyTorch's pluggable-allocator interface has no statistics, snapshots or memory history, and
    no answer to ``checkPoolLiveAllocations``, which CUDA graph trees call:
    ``torch.compile(mode="reduce-overhead")`` raises ``RuntimeError: pluggable does not yet
    support checkPoolLiveAllocations`` on this route. Graph trees, snapshots and history need the
    ``mem_pool()`` route; ``rmm_next.torch.memory_stats()`` answers "how much memory" on both.
    ``torch.cuda.graph`` captures work on this route.
    """
    global _allocator, record_stream_hooked
    if not isinstance(install_stats, bool):
        raise ValueError(
            f"rmm_next.torch.use: install_stats={install_stats!r}; pass True or False"
        )
    if _allocator is None and (_segment_allocator is not None or _vmm_allocator is not None):
        raise _lib.RmmNextError(
            "rmm_next.torch.use: this process already made a rmm_next.torch.mem_pool() or "
            "nccl_mem_pool(), so PyTorch's caching allocator is in use; choose one route per "
            "process"
        )
    configure(pool=pool, thread_cache=thread_cache, device=device, segment_cache=segment_cache)
    if _allocator is not None:
        if install_stats:
            _install_stats()
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
    if install_stats:
        _install_stats()
    return allocator


def _install_stats():
    """Puts this module's statistics functions in torch.cuda and torch.cuda.memory. PyTorch's
    companions that call them by name in torch.cuda.memory (``memory_cached``,
    ``reset_max_memory_allocated`` ...) then answer from rmm-next too."""
    global stats_installed
    mine = globals()
    for module in (_torch.cuda, _torch.cuda.memory):
        for name in STATISTICS_FUNCTIONS:
            setattr(module, name, mine[name])
    stats_installed = True


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


def nccl_mem_pool(
    device=None,
    *,
    segment_size=_vmm.VmmOptions.segment_size,
    peer_access=True,
    handle_types=("posix_fd", "fabric"),
    gpu_direct_rdma=True,
    granularity="recommended",
    symmetric=False,
    no_split=False,
):
    """A ``torch.cuda.MemPool`` over memory NCCL can register: the device's ``vmm_resource``,
    whose ``cuMemCreate`` segments are made as ``ncclMemAlloc`` makes them.

    Made for ``torch.distributed``::

        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
        pool = rmm_next.torch.nccl_mem_pool()
        with torch.cuda.use_mem_pool(pool):
            buffer = torch.empty(n, device="cuda")
        rmm_next.torch.register_mem_pool(pool)   # or the backend's register_mem_pool(pool)
        dist.all_reduce(buffer)                  # NCCL's registered (zero-copy) path

    ``register_mem_pool`` needs the communicator made first (``device_id`` in
    ``init_process_group``, or one collective) and the pool on the process group's device; it
    registers the pool's segments with ``ncclCommRegister`` (``symm=True``: symmetric windows,
    for which every rank must allocate the same sizes in the same order) and follows the pool's
    later segments. PyTorch's caching allocator splits and caches the segments as for
    ``mem_pool()``, and gives them back when the pool is destroyed; rmm-next keeps the
    ``vmm_resource``'s own segments mapped for the process and hands their space out again.

    The options are those of ``rmm_next.VmmOptions`` for the device's ``vmm_resource``:
    ``segment_size`` (bytes of a ``cuMemCreate`` segment; equal requests give equal segments on
    every rank), ``peer_access`` (True: every peer that can reach the device may read and write
    it, as ``ncclMemAlloc`` maps; False: the device only, as Megatron maps), ``handle_types``
    (``posix_fd``, ``fabric``; FABRIC is dropped where refused), ``gpu_direct_rdma`` and
    ``granularity`` (``recommended``, ``minimum``, ``multicast``). Pools of one device share its
    resource, so they must ask for the same options once it has made a segment.

    ``symmetric=True`` makes the pool's registration symmetric (NCCL windows), in the way the
    PyTorch in use takes it, found from its signatures: ``torch.cuda.MemPool(...,
    symmetric=True)`` where ``MemPool`` has that parameter (PyTorch 2.8), else
    ``register_mem_pool(pool, symm=True)`` (ProcessGroupNCCL's, PyTorch 2.9 and newer), which
    ``rmm_next.torch.register_mem_pool(pool)`` calls for it. Where PyTorch has neither, it
    raises ``RmmNextError`` before anything is made. ``no_split=True`` is passed on to
    ``MemPool`` (PyTorch 2.10 and newer: each tensor gets segments of its own, as in PyTorch's
    SymmetricMemory pools, whose segments each carry one signal pad); NCCL windows need no
    such thing.

    ``device`` (default: the current device) is the pool's device. Not in a process that
    called ``use()``. ``rmm_next.vmm_statistics(device)`` and ``rmm_next.vmm_segments(device)``
    show what the resource holds.
    """
    global _vmm_allocator
    if _allocator is not None:
        raise _lib.RmmNextError(
            "rmm_next.torch.nccl_mem_pool: rmm_next.torch.use() replaced PyTorch's caching "
            "allocator, which keeps the pools; use nccl_mem_pool() in a process that does not "
            "call use()"
        )
    for name, value in (("symmetric", symmetric), ("no_split", no_split)):
        if not isinstance(value, bool):
            raise ValueError(f"rmm_next.torch.nccl_mem_pool: {name}={value!r}; pass True or False")
    route = _symmetric_route() if symmetric else None
    pool_arguments = _pool_arguments(route, no_split)
    try:
        options = _vmm.VmmOptions(
            segment_size=segment_size,
            handle_types=handle_types,
            granularity=granularity,
            peer_access=peer_access,
            gpu_direct_rdma=gpu_direct_rdma,
        )
    except ValueError as e:
        message = str(e).replace("rmm_next.VmmOptions", "rmm_next.torch.nccl_mem_pool")
        raise ValueError(message) from e
    index = _torch.cuda.current_device() if device is None else _index(device)
    _vmm.configure_vmm(options, index, _call="rmm_next.torch.nccl_mem_pool")
    if _vmm_allocator is None:
        from torch.cuda.memory import CUDAPluggableAllocator

        # One for the process: a MemPool keeps a raw pointer to it.
        _vmm_allocator = CUDAPluggableAllocator(
            _lib.library_path(), "rmm_next_vmm_alloc", "rmm_next_vmm_free"
        )
    with _torch.cuda.device(index):
        pool = _torch.cuda.MemPool(_vmm_allocator.allocator(), **pool_arguments)
    pool._rmm_next_nccl = _NcclPool(index, route)
    return pool


class _NcclPool:
    """What register_mem_pool needs to know of a pool of nccl_mem_pool()."""

    def __init__(self, device, route):
        self.device = device
        self.route = route  # None: not symmetric; else as _symmetric_route() answered


#: Where a PyTorch takes symmetric registration: the pool's constructor (2.8) or the registration.
_MEM_POOL_ROUTE = "MemPool(symmetric=True)"
_REGISTER_ROUTE = "register_mem_pool(pool, symm=True)"


def _symmetric_route():
    """How this PyTorch registers a pool symmetrically, from its signatures: _MEM_POOL_ROUTE,
    _REGISTER_ROUTE, or an RmmNextError when it has neither."""
    if "symmetric" in (_parameter_names(_torch.cuda.MemPool) or ()):
        return _MEM_POOL_ROUTE
    nccl = _process_group_nccl()
    register = getattr(nccl, "register_mem_pool", None)
    if register is not None:
        names = _parameter_names(register)
        if names is None or "symm" in names:  # unknown: let the call itself tell
            return _REGISTER_ROUTE
    where = (
        "its ProcessGroupNCCL.register_mem_pool takes no symm"
        if register is not None
        else "it has no ProcessGroupNCCL (torch.distributed with NCCL)"
    )
    raise _lib.RmmNextError(
        "rmm_next.torch.nccl_mem_pool: symmetric=True, but this PyTorch registers no symmetric "
        f"pool: its torch.cuda.MemPool takes no symmetric and {where}; use PyTorch 2.8 or "
        "newer built with NCCL, or symmetric=False"
    )


def _pool_arguments(route, no_split):
    """The keyword arguments of torch.cuda.MemPool for nccl_mem_pool's pool."""
    arguments = {"symmetric": True} if route == _MEM_POOL_ROUTE else {}
    if no_split:
        names = _parameter_names(_torch.cuda.MemPool)
        if names is not None and "no_split" not in names:
            raise _lib.RmmNextError(
                "rmm_next.torch.nccl_mem_pool: no_split=True, but this PyTorch's "
                f"torch.cuda.MemPool takes ({', '.join(names)}); use PyTorch 2.10 or newer, or "
                "no_split=False"
            )
        arguments["no_split"] = True
    return arguments


def _process_group_nccl():
    """torch.distributed.ProcessGroupNCCL, or None where PyTorch was built without it."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not dist.is_available():
        return None
    return getattr(dist, "ProcessGroupNCCL", None)


_PYBIND_SIGNATURE = re.compile(r"^\s*[A-Za-z_]\w*\((?P<parameters>.*)\)\s*(->.*)?$")


def _parameter_names(function):
    """The parameter names of `function` (a class: its constructor's, without self), or None
    when they cannot be known. pybind11's functions have no inspect.signature: the first line of
    their docstring is theirs ("name(self: T, pool: U, symm: bool = False) -> None")."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        parameters = None
    if parameters is not None:
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        if not any(p.kind in variadic for p in parameters):
            return [p.name for p in parameters]
    lines = (getattr(function, "__doc__", None) or "").strip().splitlines()
    match = _PYBIND_SIGNATURE.match(lines[0]) if lines else None
    if match is None:
        return None
    text = match.group("parameters")
    if not text.strip():
        return []
    names = []
    depth, start = 0, 0
    for i, c in enumerate(text + ","):
        if c in "[(<":
            depth += 1
        elif c in "])>":
            depth -= 1
        elif c == "," and depth == 0:
            names.append(re.split(r"[:=]", text[start:i], maxsplit=1)[0].strip())
            start = i + 1
    if any(not name.isidentifier() for name in names):
        return None  # "*args, **kwargs": overloaded, or not pybind11's format
    return [name for name in names if name != "self"]


def register_mem_pool(pool, group=None):
    """Registers a pool of ``nccl_mem_pool()`` with the NCCL communicator of ``group`` (default:
    the default process group) on the pool's device, and returns that backend
    (``ProcessGroupNCCL``).

    A pool made with ``symmetric=True`` is registered symmetrically in the way the PyTorch in
    use takes it: ``register_mem_pool(pool, symm=True)`` where the registration has ``symm``
    (PyTorch 2.9 and newer), ``register_mem_pool(pool)`` of a ``MemPool(symmetric=True)``
    (PyTorch 2.8). As for PyTorch's own, the communicator must exist first (``device_id`` in
    ``init_process_group``, or one collective), and later segments of the pool are registered
    as they are made. ``deregister_mem_pool(pool)`` of the backend undoes it.
    """
    info = getattr(pool, "_rmm_next_nccl", None)
    if not isinstance(info, _NcclPool):
        raise ValueError(
            f"rmm_next.torch.register_mem_pool: pool={pool!r}; pass a pool of "
            "rmm_next.torch.nccl_mem_pool() (register others with the backend's "
            "register_mem_pool)"
        )
    import torch.distributed as dist

    if group is None:
        group = dist.distributed_c10d._get_default_group()
    backend = group._get_backend(_torch.device("cuda", info.device))
    if info.route == _REGISTER_ROUTE:
        try:
            backend.register_mem_pool(pool, symm=True)
        except TypeError as e:
            raise _lib.RmmNextError(
                "rmm_next.torch.register_mem_pool: this PyTorch's register_mem_pool refused "
                f"symm=True ({e}); make the pool with symmetric=False"
            ) from e
    else:
        backend.register_mem_pool(pool)
    return backend


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
    "STATISTICS_FUNCTIONS",
    "in_use",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_pool",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "nccl_mem_pool",
    "record_stream_hooked",
    "register_mem_pool",
    "reset_peak_memory_stats",
    "stats_installed",
    "use",
]
