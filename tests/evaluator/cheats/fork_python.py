"""Planted cheat: forks a copy of the worker that keeps running Python (a helper that could
precompute, or wait for the timing phase) without ever exec'ing anything.
Caught by: the process watch. A copy of its parent is forgiven once (every subprocess call passes
through that state between fork and exec) and reported when it is still a copy one interval later
(eval:user:process).
"""

import os
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < d
    g = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (g / (1.0 + tl.exp(-g)) * u).to(out_ptr.dtype.element_ty), mask=mask)


def _honest(x, out=None):
    T, d = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, d), dtype=x.dtype, device=x.device) if out is None else out
    _silu_mul_kernel[(T,)](x, out, d, BLOCK=triton.next_power_of_2(d))
    return out



_forked = False


def silu_and_mul(x):
    global _forked
    if not _forked:
        _forked = True
        if os.fork() == 0:  # the child: Python, busy, for a while; never exec's
            end = time.monotonic() + 20
            while time.monotonic() < end:
                sum(range(1000))
            os._exit(0)
    return _honest(x)
