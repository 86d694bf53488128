# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""A stand-in torch package for the tests that need no GPU and no PyTorch: it records what
rmm_next.torch asks of it.

Its ``torch.cuda.MemPool`` and ``ProcessGroupNCCL.register_mem_pool`` take the parameters of one
PyTorch generation (FAKE_TORCH_GENERATION, as read from each release's torch/cuda/memory.py and
the pybind11 binding of ProcessGroupNCCL; the binding's signature is in its docstring, as
pybind11 writes it, since inspect.signature cannot read one):

  2.7   MemPool(allocator, use_on_oom)             register_mem_pool(arg0)
  2.8   MemPool(allocator, use_on_oom, symmetric)  register_mem_pool(arg0)
  2.9   MemPool(allocator, use_on_oom)             register_mem_pool(pool, symm=False)
  2.15  MemPool(allocator, use_on_oom, no_split)   register_mem_pool(pool, symm=False)  (2.10 on)
  opaque  as 2.7, but register_mem_pool's docstring shows no signature

FAKE_TORCH_NCCL=0 stands for a build without NCCL (torch.distributed.is_available() is False).
Its torch.cuda.memory statistics functions are "native" ones that call each other by their
module-global names, as PyTorch's do.
"""

import json
import os
import subprocess
import sys
import textwrap

from conftest import PACKAGE_PATHS

TORCH = '''
class device:
    def __init__(self, type, index=None):
        self.type, self.index = type, index
    def __repr__(self):
        return f"device(type={self.type!r}, index={self.index})"
from . import cuda, distributed
'''

CUDA = '''
"""torch.cuda: records every call in `calls`."""
import contextlib, os
calls = []
GENERATION = os.environ.get("FAKE_TORCH_GENERATION", "2.15")
class _Allocator:
    def __init__(self, path, alloc, free):
        calls.append(("CUDAPluggableAllocator", path, alloc, free))
        self.token = ("allocator", alloc, free)
    def allocator(self):
        return self.token
def _made(allocator, **arguments):
    calls.append(("MemPool", allocator, arguments))
if GENERATION in ("2.7", "2.9", "opaque"):
    class MemPool:
        def __init__(self, allocator=None, use_on_oom=False):
            _made(allocator, use_on_oom=use_on_oom)
            self.allocator = allocator
elif GENERATION == "2.8":
    class MemPool:
        def __init__(self, allocator=None, use_on_oom=False, symmetric=False):
            _made(allocator, use_on_oom=use_on_oom, symmetric=symmetric)
            self.allocator = allocator
else:
    class MemPool:
        def __init__(self, allocator=None, use_on_oom=False, no_split=False):
            _made(allocator, use_on_oom=use_on_oom, no_split=no_split)
            self.allocator = allocator
@contextlib.contextmanager
def device(index):
    calls.append(("device", index))
    yield
def current_device():
    return 0
def _get_device_index(device, optional=False):
    if device is None:
        return current_device()
    return int(getattr(device, "index", device))
from . import memory
from .memory import (memory_stats, memory_allocated, max_memory_allocated, memory_reserved,
                     max_memory_reserved, reset_peak_memory_stats, memory_cached,
                     reset_max_memory_allocated)
'''

MEMORY = '''
from . import calls
refuse = False
def CUDAPluggableAllocator(path, alloc, free):
    from . import _Allocator
    return _Allocator(path, alloc, free)
def change_current_allocator(allocator):
    if refuse:
        raise RuntimeError("Can't swap an already initialized allocator")
    calls.append(("change_current_allocator", allocator.token))
def memory_stats(device=None):
    calls.append(("native", "memory_stats", device))
    return {"native": 1}
def memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.current", -1)
def max_memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.peak", -1)
def memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.current", -1)
def max_memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.peak", -1)
def reset_peak_memory_stats(device=None):
    calls.append(("native", "reset_peak_memory_stats", device))
def memory_cached(device=None):
    return memory_reserved(device=device)
def reset_max_memory_allocated(device=None):
    return reset_peak_memory_stats(device=device)
'''

DISTRIBUTED = '''
"""torch.distributed with a ProcessGroupNCCL whose register_mem_pool is as pybind11 makes it."""
import os
from ..cuda import calls, GENERATION
def is_available():
    return os.environ.get("FAKE_TORCH_NCCL", "1") == "1"
_PREFIX = "register_mem_pool(self: torch._C._distributed_c10d.ProcessGroupNCCL, "
if GENERATION in ("2.7", "2.8"):
    _DOC, _ACCEPTS = _PREFIX + "arg0: torch._C._MemPool) -> None\\n", ("arg0",)
elif GENERATION == "opaque":
    _DOC, _ACCEPTS = "Registers the pool's segments.\\n", ("arg0",)
else:
    _DOC = _PREFIX + "pool: torch._C._MemPool, symm: bool = False) -> None\\n"
    _ACCEPTS = ("pool", "symm")
class _Bound:
    def __init__(self, backend):
        self.__doc__, self.backend = _DOC, backend
    def __call__(self, *args, **kwargs):
        names = list(_ACCEPTS[:len(args)]) + list(kwargs)
        if len(args) > len(_ACCEPTS) or any(n not in _ACCEPTS for n in kwargs) or not names:
            raise TypeError("register_mem_pool(): incompatible function arguments")
        calls.append(["register_mem_pool", self.backend.device.index, len(args), kwargs])
class _Pybind:
    """No inspect.signature; the signature is the docstring's first line."""
    __doc__ = _DOC
    def __get__(self, backend, owner=None):
        return self if backend is None else _Bound(backend)
class ProcessGroupNCCL:
    register_mem_pool = _Pybind()
    def __init__(self, device):
        self.device = device
class _Group:
    def _get_backend(self, device):
        calls.append(("get_backend", device.type, device.index))
        return ProcessGroupNCCL(device)
from . import distributed_c10d
'''

DISTRIBUTED_C10D = '''
from . import _Group
def _get_default_group():
    return _Group()
'''


def run_with_fake_torch(tmp_path, prelude, body=None, generation="2.15", nccl=True):
    """Runs `prelude` then `body` (after `import rmm_next.torch as rt`) against the stand-in torch
    of `generation`; returns the JSON its last line prints."""
    if body is None:
        prelude, body = "", prelude
    package = tmp_path / "torch"
    for sub in ("cuda", "distributed"):
        (package / sub).mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(TORCH)
    (package / "cuda" / "__init__.py").write_text(CUDA)
    (package / "cuda" / "memory.py").write_text(MEMORY)
    (package / "distributed" / "__init__.py").write_text(DISTRIBUTED)
    (package / "distributed" / "distributed_c10d.py").write_text(DISTRIBUTED_C10D)
    script = "import json, sys\nimport torch\nimport rmm_next, rmm_next._vmm\n" \
             "import rmm_next.torch as rt\n" + prelude + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + PACKAGE_PATHS + sys.path),
               FAKE_TORCH_GENERATION=generation, FAKE_TORCH_NCCL="1" if nccl else "0")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


#: A prelude with calls(kind), the stand-in's calls of that kind (without the kind), and
#: refusal(make), the message of the RmmNextError make() raises (None: it raised none).
CALLS = '''
def calls(kind):
    return [list(c[1:]) for c in torch.cuda.calls if c[0] == kind]
def refusal(make):
    try:
        make()
    except rmm_next.RmmNextError as e:
        return str(e)
    return None
'''

#: CALLS, and rmm_next._vmm.configure_vmm replaced with a recorder (`configured`).
RECORD_CONFIGURE = CALLS + '''
configured = []
def record(options, device, *, _call):
    c = options.to_c()
    configured.append([device, _call, c.segment_size, c.handle_types, c.granularity,
                       c.peer_access, c.gpu_direct_rdma])
rmm_next._vmm.configure_vmm = record
'''
