# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Out of memory under rmm-next: what PyTorch raises, and whether it keeps working."""

import torch

import rmm_next
from _common import emit

rmm_next.torch.use()
a = torch.ones(1 << 20, device="cuda")
result = {"raised": False}
try:
    huge = torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # 1 PiB
    result["null_tensor"] = huge.data_ptr() == 0
    del huge
except Exception as e:  # noqa: BLE001 - the type is what is reported
    result.update(
        raised=True,
        type=type(e).__name__,
        is_torch_oom=isinstance(e, torch.cuda.OutOfMemoryError),
        message=str(e)[:300],
    )
b = a * 2
result["recovered"] = bool((b == 2).all())
result["failed_allocations"] = rmm_next.statistics(0)["failed_allocations"]
emit(result)
