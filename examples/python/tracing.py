# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The code block of docs/python.md's "Logging and tracking allocations": a PyTorch program
logged and tracked through rmm-next.

Run with a GPU and PyTorch installed: python3 examples/python/tracing.py (writes trace.csv)
"""


def traced():
    # [tracing]
    import rmm_next
    import torch

    rmm_next.configure(log="trace.csv", track=True)  # at any time
    rmm_next.torch.use()
    x = torch.ones(1 << 20, device="cuda")
    for a in rmm_next.outstanding():  # what is live now, oldest first
        print(hex(a["ptr"]), a["size"], a["stream"], a["device"], a["thread"], a["time"])
    rmm_next.flush_log()  # write out what the log buffered
    rmm_next.configure(log=None)  # close the log (it is also written at exit)
    # [tracing end]
    return x


if __name__ == "__main__":
    traced()
