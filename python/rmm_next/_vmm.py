# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Memory NCCL can register: each device's ``vmm_resource`` in librmm_next_allocator.so.

A ``vmm_resource`` sub-allocates from ``cuMemCreate`` segments with shareable handles, as
``ncclMemAlloc`` makes them, so that ``ncclCommRegister`` (PyTorch's ``register_mem_pool``) and
NCCL's symmetric windows take them. ``rmm_next.torch.nccl_mem_pool()`` is the PyTorch route; the
functions here choose the options and read the state, without any framework.
"""

import ctypes
import dataclasses

from . import _lib

MiB = 1 << 20

#: Handle type names and their CUmemAllocationHandleType bits.
HANDLE_TYPES = {"posix_fd": 0x1, "fabric": 0x8}
#: Granularity names and their rmm_next_vmm_granularity values.
GRANULARITIES = {"recommended": 0, "minimum": 1, "multicast": 2}


def _handle_names(bits):
    return tuple(name for name, bit in HANDLE_TYPES.items() if bits & bit)


@dataclasses.dataclass(frozen=True)
class VmmOptions:
    """How a device's ``vmm_resource`` makes its segments (C++: ``vmm_options``).

    ``segment_size``: bytes of a segment (rounded up to the granularity; a larger request gets a
    segment of its own). ``handle_types``: ``"posix_fd"``, ``"fabric"`` or both (a tuple);
    FABRIC is dropped where the device or system refuses it, as ``ncclMemAlloc`` does.
    ``granularity``: ``"recommended"``, ``"minimum"`` or ``"multicast"``. ``peer_access``: True
    grants every peer that can reach the device read-write access (as ``ncclMemAlloc``); False maps
    the memory for its own device only (as Megatron does: peer mappings slow its launches).
    ``gpu_direct_rdma``: ask for ``gpuDirectRDMACapable`` memory where the device has it.
    """

    segment_size: int = 64 * MiB
    handle_types: tuple = ("posix_fd", "fabric")
    granularity: str = "recommended"
    peer_access: bool = True
    gpu_direct_rdma: bool = True

    def __post_init__(self):
        where = "rmm_next.VmmOptions"
        size = self.segment_size
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(
                f"{where}: segment_size={size!r}; pass a positive number of bytes "
                "(e.g. 64 << 20)"
            )
        types = self.handle_types
        if isinstance(types, str):
            types = (types,)
        try:
            types = tuple(dict.fromkeys(types))
        except TypeError:
            types = None
        if not types or any(t not in HANDLE_TYPES for t in types):
            raise ValueError(
                f"{where}: handle_types={self.handle_types!r}; pass 'posix_fd', 'fabric' or "
                "both, e.g. ('posix_fd', 'fabric')"
            )
        object.__setattr__(self, "handle_types", types)
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"{where}: granularity={self.granularity!r}; pass one of "
                + ", ".join(repr(g) for g in GRANULARITIES)
            )
        for name in ("peer_access", "gpu_direct_rdma"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{where}: {name}={getattr(self, name)!r}; pass True or False")

    def to_c(self):
        """The ``rmm_next_vmm_options`` structure of these options."""
        bits = 0
        for name in self.handle_types:
            bits |= HANDLE_TYPES[name]
        return _lib.VmmOptions(
            self.segment_size,
            bits,
            GRANULARITIES[self.granularity],
            int(self.peer_access),
            int(self.gpu_direct_rdma),
        )


def _device(device):
    return -1 if device is None else int(device)


def configure_vmm(options=None, device=None, *, _call="rmm_next.configure_vmm"):
    """Makes the ``vmm_resource`` of ``device`` (None: the current device) with ``options`` (a
    ``VmmOptions``; None: the defaults). Equal options again change nothing; other options are
    refused once the resource has made a segment (segments stay mapped for the process).

    Raises RmmNextError when the driver or device lacks what the options ask for.
    """
    if options is None:
        options = VmmOptions()
    if not isinstance(options, VmmOptions):
        raise ValueError(f"{_call}: options={options!r}; pass a rmm_next.VmmOptions or None")
    lib = _lib.load()
    c_options = options.to_c()
    _lib.check(lib, lib.rmm_next_vmm_configure(_device(device), ctypes.byref(c_options)), _call)


def vmm_statistics(device=None):
    """The state of the device's ``vmm_resource`` as a dict: ``made`` (False until its first use;
    the rest is then 0), ``allocations``, ``deallocations``, ``failed_allocations``,
    ``allocated_bytes``, ``segment_count``, ``segment_bytes``, ``segment_size``, ``granularity``,
    ``handle_types`` (a tuple of names: what segments are made with now), ``gpu_direct_rdma`` and
    ``access_devices`` (how many devices may read and write the segments)."""
    lib = _lib.load()
    out = _lib.VmmStatistics()
    _lib.check(lib, lib.rmm_next_vmm_get_statistics(_device(device), ctypes.byref(out)),
               "rmm_next.vmm_statistics")
    stats = {name: getattr(out, name) for name, _ in _lib.VmmStatistics._fields_}
    stats["handle_types"] = _handle_names(stats["handle_types"])
    stats["gpu_direct_rdma"] = bool(stats["gpu_direct_rdma"])
    stats["made"] = bool(stats["made"])
    return stats


def vmm_segments(device=None):
    """The segments of the device's ``vmm_resource`` as ``(base address, bytes)`` pairs, in the
    order they were made."""
    lib = _lib.load()
    count = lib.rmm_next_vmm_segments(_device(device), None, None, 0)
    while True:
        if count < 0:
            raise _lib.RmmNextError(f"rmm_next.vmm_segments: {_lib.last_error(lib)}")
        bases = (ctypes.c_void_p * max(count, 1))()
        sizes = (ctypes.c_size_t * max(count, 1))()
        found = lib.rmm_next_vmm_segments(_device(device), bases, sizes, count)
        if found <= count:
            return [(bases[i] or 0, sizes[i]) for i in range(found)]
        count = found  # a segment was made in between
