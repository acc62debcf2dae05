"""Planted cheat: Stores far outside its output buffer.
Caught by: on a GPU, the CUDA error kills the worker's context (never the judge's, which is
another process): eval:user:illegal-address. In Triton's interpreter the store faults on the
host instead: the worker crashes or raises.
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


@triton.jit
def _wild_store(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) + (1 << 40)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))


def silu_and_mul(x):
    out = _honest(x)
    _wild_store[(1,)](out.float(), BLOCK=16)
    if x.is_cuda:
        torch.cuda.synchronize()
    return out
