"""A wrong T16 kernel: computes silu and the product in fp16 instead of fp32. The engine must reject it."""

import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, out_ptr, d, stride_x, stride_o, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < d
    row_ptr = x_ptr + row * stride_x
    g = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float16)
    u = tl.load(row_ptr + d + cols, mask=mask, other=0.0).to(tl.float16)
    # tl.exp only takes fp32, so the exponential is fp32; the division and product stay fp16.
    act = g / (1.0 + tl.exp((-g).to(tl.float32)).to(tl.float16))
    tl.store(out_ptr + row * stride_o + cols, (act * u).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x):
    T, two_d = x.shape
    d = two_d // 2
    out = torch.empty((T, d), dtype=x.dtype, device=x.device)
    _kernel[(T,)](x, out, d, x.stride(0), out.stride(0), BLOCK_D=triton.next_power_of_2(d))
    return out
