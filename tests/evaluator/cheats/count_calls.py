"""Planted cheat: Honest during the correctness phase, then detects the timing phase by counting calls per shape
and stops computing: after the three correctness trials it returns the last answer it computed.
Caught by: the timed calls that are checked against the reference, on fresh inputs and
indistinguishable from the others: eval:user:timed-call-mismatch.
"""

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

_SEEN = {}
_LAST = {}


def silu_and_mul(x):
    key = tuple(x.shape)
    _SEEN[key] = _SEEN.get(key, 0) + 1
    if _SEEN[key] <= 3 or key not in _LAST:
        _LAST[key] = _honest(x)
    return _LAST[key].clone()
