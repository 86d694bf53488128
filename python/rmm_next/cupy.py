# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""CuPy through rmm-next: ``rmm_next.cupy.use()``.

CuPy's ``CFunctionAllocator`` calls C functions that get no stream, so this module keeps one
allocator per CuPy stream, whose ``param`` is that stream: memory is allocated on CuPy's current
stream and freed on the same stream, the contract of CuPy's own ``MemoryAsyncPool``. Using an
array on another stream needs the same synchronization as with CuPy's pools.

When a ``cupy.cuda.Stream`` is destroyed while arrays allocated on it live on, the library
synchronizes the device once and frees those arrays later on the legacy default stream.
Allocation failures raise ``cupy.cuda.memory.OutOfMemoryError`` (CuPy itself does not check the
NULL a C allocator returns).
"""

import weakref

from . import _lib, configure

_cupy = _lib.import_framework("cupy", "rmm_next.cupy", "CuPy", "pip install cupy-cuda13x")
from cupy.cuda.memory import CFunctionAllocator, OutOfMemoryError  # noqa: E402

# CuPy's stream handle -> (weakref to the stream object, its CFunctionAllocator)
_allocators = {}
_in_use = False
# The null, legacy and per-thread default streams are never destroyed.
_PERMANENT_STREAMS = (0, 1, 2)


def _forget(handle, ref):
    entry = _allocators.get(handle)
    if entry is not None and entry[0] is ref:
        del _allocators[handle]
    lib = _lib.load()
    lib.rmm_next_cupy_forget_stream(handle or None)


def _allocator_for(stream):
    handle = stream.ptr
    entry = _allocators.get(handle)
    if entry is not None and entry[0]() is stream:
        return entry[1]
    lib = _lib.load()
    allocator = CFunctionAllocator(
        handle,
        _lib.function_address("rmm_next_cupy_malloc"),
        _lib.function_address("rmm_next_cupy_free"),
        lib,
    )
    ref = weakref.ref(stream)
    # CuPy destroys a Stream it created when the object dies; an ExternalStream's handle is
    # someone else's and outlives the wrapper.
    if handle not in _PERMANENT_STREAMS and not isinstance(stream, _cupy.cuda.ExternalStream):
        weakref.finalize(stream, _forget, handle, ref)
    _allocators[handle] = (ref, allocator)
    return allocator


def malloc(size):
    """The allocator function ``use()`` installs (``cupy.cuda.set_allocator``)."""
    memory = _allocator_for(_cupy.cuda.get_current_stream()).malloc(size)
    if size and not memory.ptr:
        error = _lib.allocation_error(_lib.load(), size)
        if isinstance(error, _lib.OutOfMemoryError):
            raise OutOfMemoryError(size, -1) from error
        raise error
    return memory


def use(pool=None, thread_cache=None, device=None):
    """Makes rmm-next CuPy's device memory allocator (``cupy.cuda.set_allocator``).

    ``pool`` and ``thread_cache`` are as for ``rmm_next.configure``. Arrays allocated before
    keep the memory they have.
    """
    global _in_use
    configure(pool=pool, thread_cache=thread_cache, device=device)
    _lib.load()
    _cupy.cuda.set_allocator(malloc)
    _in_use = True


def in_use():
    """True when ``use()`` made rmm-next CuPy's allocator."""
    return _in_use


__all__ = ["in_use", "malloc", "use"]
