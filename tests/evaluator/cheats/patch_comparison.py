"""Planted cheat: Returns zeros and patches the comparison it can reach (evaluator.compare.error_ratio in its
own process) so that every error reads as zero.
Caught by: the comparison runs in the judge process, which never imports the kernel: the patch
changes nothing there and the zeros fail the tolerance (eval:user:wrong-answer).
"""

import torch
import triton
import triton.language as tl

import evaluator.compare as _compare


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



class _Pass:
    ratio = 0.0
    rule = "tolerance"
    message = ""
    worst_index = None


_compare.error_ratio = lambda *a, **k: _Pass()


def silu_and_mul(x):
    T, d = x.shape[0], x.shape[1] // 2
    return torch.zeros((T, d), dtype=x.dtype, device=x.device)
