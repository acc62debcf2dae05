"""A wrong T15 kernel: masks out the last element of every row (cols < H - 1). The engine must reject it."""

import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, H, stride_x, stride_r, eps, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H - 1
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    r = tl.load(res_ptr + row * stride_r + cols, mask=mask, other=0.0)
    s = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
    tl.store(res_ptr + row * stride_r + cols, s, mask=mask)
    sf = s.to(tl.float32)
    sq = sf * sf
    rstd = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * stride_x + cols, (sf.to(tl.float32) * rstd * w).to(x.dtype), mask=mask)


def fused_add_rmsnorm(x, residual, weight, eps):
    T, H = x.shape
    _kernel[(T,)](x, residual, weight, H, x.stride(0), residual.stride(0), eps, BLOCK_H=triton.next_power_of_2(H))
    return x, residual
