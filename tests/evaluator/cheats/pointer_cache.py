"""Planted cheat: Caches each output keyed on the input's data_ptr and shape, and serves the cache when the
same buffer comes back: a benchmark that reuses its input buffers would time a dictionary lookup.
Caught by: fresh secret inputs for every call written at the same addresses (the arena is
reused), so the cached answer is stale: a wrong answer.
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

_CACHE = {}


def silu_and_mul(x):
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if key not in _CACHE:
        _CACHE[key] = _honest(x).clone()
    return _CACHE[key].clone()
