# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Numba through rmm-next: an External Memory Management (EMM) plugin.

    from numba import cuda
    import rmm_next.numba
    cuda.set_memory_manager(rmm_next.numba.RmmNextNumbaManager)   # before Numba's first context

or ``NUMBA_CUDA_MEMORY_MANAGER=rmm_next.numba``. Numba's interface passes no stream, so device
memory is allocated and freed on the legacy default stream: ready for kernels on the default
stream and on every blocking stream (``cuda.stream()``), and freed after the work queued on them.
Memory used on a non-blocking stream (for example an external PyTorch stream) must be
synchronized by the caller before its last reference goes. Host (pinned, mapped) memory stays
Numba's. Frees are never deferred, also inside ``defer_cleanup``; IPC handles are not supported.
"""

import ctypes
import weakref

from . import _lib

_lib.import_framework("numba.cuda", "rmm_next.numba", "Numba's CUDA target", "pip install numba-cuda")
from numba import cuda as _cuda  # noqa: E402
from numba.cuda import HostOnlyCUDAMemoryManager, MemoryPointer  # noqa: E402
from numba.cuda.cudadrv.driver import AutoFreePointer  # noqa: E402


def _device_pointer(address):
    # A CUdeviceptr of the NVIDIA bindings, which numba-cuda always uses since it dropped
    # USE_NV_BINDING; a c_void_p for an older one on its ctypes binding.
    driver = _cuda.cudadrv.driver
    if getattr(driver, "USE_NV_BINDING", True):
        return driver.binding.CUdeviceptr(address)
    return ctypes.c_void_p(address)


def _finalizer(lib, allocations, address, size, device):
    def free():
        allocations.pop(address, None)
        lib.rmm_next_numba_free(address, size, device)

    return free


class RmmNextNumbaManager(HostOnlyCUDAMemoryManager):
    """Numba EMM plugin: device memory from rmm-next's resource for the context's device."""

    def initialize(self):
        self._lib = _lib.load()
        self._device = self.context.device.id

    def memalloc(self, size):
        lib = _lib.load()
        device = self.context.device.id
        ctx = weakref.proxy(self.context)
        if size == 0:
            return MemoryPointer(ctx, _device_pointer(0), 0)
        address = lib.rmm_next_numba_alloc(size, device)
        if not address:
            raise _lib.allocation_error(lib, size)
        # As Numba's own manager does: the manager keeps the pointer, whose reference count
        # (views and slices included) decides when the finalizer frees the memory.
        finalizer = _finalizer(lib, self.allocations, address, size, device)
        memory = AutoFreePointer(ctx, _device_pointer(address), size, finalizer=finalizer)
        self.allocations[address] = memory
        return memory.own()

    def get_memory_info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        lib = _lib.load()
        status = lib.rmm_next_mem_get_info(
            self.context.device.id, ctypes.byref(free), ctypes.byref(total)
        )
        _lib.check(lib, status, "RmmNextNumbaManager.get_memory_info")
        return _cuda.MemoryInfo(free=free.value, total=total.value)

    def get_ipc_handle(self, memory):
        raise NotImplementedError(
            "rmm_next: IPC handles of pool memory are not supported by the Numba plugin"
        )

    @property
    def interface_version(self):
        return 1


def use():
    """``numba.cuda.set_memory_manager(RmmNextNumbaManager)``: call before Numba's first context."""
    _cuda.set_memory_manager(RmmNextNumbaManager)


# NUMBA_CUDA_MEMORY_MANAGER=rmm_next.numba
_numba_memory_manager = RmmNextNumbaManager

__all__ = ["RmmNextNumbaManager", "use"]
