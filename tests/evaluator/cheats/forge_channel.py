"""Planted cheat: Forges results: prints a fake "correct" result on stdout and writes fake answers and results
to every inherited file descriptor, then returns garbage.
Caught by: results travel only on the judge's own channel; a worker's answers must validate and
answer the call just made, so an extra line is a broken protocol (eval:user:protocol).
"""

import contextlib
import os

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


_FAKE_RESULT = '{"type": "result", "result": {"slug": "silu-and-mul", "status": "correct", "verdict": "clean"}}'


def silu_and_mul(x):
    print(_FAKE_RESULT, flush=True)
    for fd in range(3, 64):
        for seq in range(1, 4):
            fake = f'{{"type": "done", "seq": {seq}, "ok": true, "device_ms": 0.001}}'
            with contextlib.suppress(OSError):
                os.write(fd, (fake + "\n" + _FAKE_RESULT + "\n").encode())
    T, d = x.shape[0], x.shape[1] // 2
    return torch.zeros((T, d), dtype=x.dtype, device=x.device)
