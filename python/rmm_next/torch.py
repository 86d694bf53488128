# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""PyTorch through rmm-next: ``rmm_next.torch.use()`` before the first CUDA tensor.

PyTorch's ``CUDAPluggableAllocator`` calls ``rmm_next_torch_alloc`` / ``rmm_next_torch_free`` of
``librmm_next_allocator.so`` with the tensor's device and current stream, so every allocation is
ordered on the stream PyTorch uses and freed on it. ``Tensor.record_stream`` is honoured: the free
waits for the work queued on the recorded streams (as PyTorch's ``cudaMallocAsync`` backend does).
``torch.cuda.empty_cache()`` returns the thread caches' blocks and trims the pool.
"""

from . import _lib, configure

# Imported first so that the process uses PyTorch's CUDA runtime, not one found by rmm-next.
_torch = _lib.import_framework("torch", "rmm_next.torch", "PyTorch", "pip install torch")

_allocator = None

#: True once ``use()`` has installed the record-stream hook.
record_stream_hooked = False


def use(pool=None, thread_cache=None, device=None):
    """Makes rmm-next PyTorch's CUDA allocator for the rest of the process.

    Must run before PyTorch allocates CUDA memory (PyTorch cannot swap an allocator in use).
    ``pool`` and ``thread_cache`` are as for ``rmm_next.configure`` (default: each device's
    current pool, no thread cache). Calling it again only applies ``pool`` / ``thread_cache``.
    Returns the ``torch.cuda.memory.CUDAPluggableAllocator``.
    """
    global _allocator, record_stream_hooked
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


__all__ = ["in_use", "record_stream_hooked", "use"]
