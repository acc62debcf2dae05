"""Expert Triton kernels for T17 ``rmsnorm-backward``: persistent rows, two-level dw reduction.

Stage 1 launches a small multiple of the SM count as persistent programs. Program p owns rows
p*R, p*R + G*R, ... (R rows per step, G programs): it loads the weight once, then streams dy and x
rows through registers (the next step's rows are requested before the current step is reduced),
writes dx, and keeps a private fp32 partial of dw for its rows. Stage 2
sums the [G, H] partials column-wise. The row assignment is fixed, so dw is deterministic, and no
per-row atomics are needed. Traffic is the compulsory 6 bytes per element plus the tiny partials.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_bwd_load(dy_ptr, x_ptr, rstd_ptr, first_row, T, cols, col_ok, stride_dy, stride_x,
                      ROWS: tl.constexpr):
    """The dy and x rows (and rstd) of ROWS rows from first_row; rows past T are masked off."""
    rows = first_row + tl.arange(0, ROWS)
    row_ok = rows < T
    rows64 = rows.to(tl.int64)
    mask = row_ok[:, None] & col_ok[None, :]
    dy = tl.load(dy_ptr + rows64[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0,
                 eviction_policy="evict_first")
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first")
    r = tl.load(rstd_ptr + rows64, mask=row_ok, other=0.0)
    return dy, x, r


@triton.jit
def _rmsnorm_bwd_compute(dy, x, r, w, acc, dx_ptr, first_row, T, cols, col_ok, inv_h, stride_dx,
                         ROWS: tl.constexpr):
    """Writes dx of the loaded rows and returns acc plus their dw contribution."""
    rows = first_row + tl.arange(0, ROWS)
    mask = (rows < T)[:, None] & col_ok[None, :]
    dyf = dy.to(tl.float32)
    xf = x.to(tl.float32)
    m = dyf * w[None, :]
    dot = tl.sum(m * xf, axis=1)
    c = r * r * dot * inv_h
    dx = r[:, None] * (m - c[:, None] * xf)
    tl.store(dx_ptr + rows.to(tl.int64)[:, None] * stride_dx + cols[None, :], dx.to(dx_ptr.dtype.element_ty),
             mask=mask)
    # The forward's normalized input, rounded to the activation dtype (Llama casting).
    x_hat = (xf * r[:, None]).to(x.dtype).to(tl.float32)
    return acc + tl.sum(dyf * x_hat, axis=0)


@triton.jit
def _rmsnorm_bwd_rows_kernel(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, part_ptr,
    T, H, n_prog, stride_dy, stride_x, stride_dx,
    ROWS: tl.constexpr, BLOCK_H: tl.constexpr, INTERPRET: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    col_ok = cols < H
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    acc = tl.zeros((BLOCK_H,), dtype=tl.float32)
    inv_h = 1.0 / H
    step = n_prog * ROWS
    # Register double buffering: the next step's rows are requested before the current ones are
    # reduced, so each program keeps two steps of loads in flight.
    first = pid * ROWS
    dy, x, r = _rmsnorm_bwd_load(dy_ptr, x_ptr, rstd_ptr, first, T, cols, col_ok, stride_dy, stride_x, ROWS)
    if INTERPRET:
        # The interpreter cannot take a loop bound derived from program_id in range() (numpy >= 2
        # refuses int() of a one-element array); the compiled kernel takes the for loop.
        while first < T:
            dy_n, x_n, r_n = _rmsnorm_bwd_load(dy_ptr, x_ptr, rstd_ptr, first + step, T, cols, col_ok,
                                               stride_dy, stride_x, ROWS)
            acc = _rmsnorm_bwd_compute(dy, x, r, w, acc, dx_ptr, first, T, cols, col_ok, inv_h, stride_dx, ROWS)
            dy, x, r = dy_n, x_n, r_n
            first += step
    else:
        for _ in range(pid * ROWS, T, step):
            dy_n, x_n, r_n = _rmsnorm_bwd_load(dy_ptr, x_ptr, rstd_ptr, first + step, T, cols, col_ok,
                                               stride_dy, stride_x, ROWS)
            acc = _rmsnorm_bwd_compute(dy, x, r, w, acc, dx_ptr, first, T, cols, col_ok, inv_h, stride_dx, ROWS)
            dy, x, r = dy_n, x_n, r_n
            first += step
    tl.store(part_ptr + pid.to(tl.int64) * H + cols, acc, mask=col_ok)


@triton.jit
def _rmsnorm_bwd_dw_reduce_kernel(part_ptr, dw_ptr, H, G: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < H
    acc = tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32)
    # G is a constexpr: the loop unrolls, so every tile's load is issued before the first is summed
    # (one L2 round trip per program, not one per tile: the partials were just written, by stage 1).
    for g0 in tl.static_range(0, G, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        mask = (g[:, None] < G) & col_ok[None, :]
        acc += tl.load(part_ptr + g[:, None].to(tl.int64) * H + cols[None, :], mask=mask, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(acc, axis=0), mask=col_ok)


#: (rows per step, warps) by padded row length. Each thread holds 8-16 elements per row and
#: tensor (16-byte bf16 vectors); short rows take several rows per step so every step moves
#: enough bytes to keep HBM busy. Chosen for the H200 (132 SMs, 64K registers per SM).
LAUNCH_TABLE: dict[int, tuple[int, int]] = {2048: (2, 4), 4096: (1, 8), 8192: (1, 16)}
#: Persistent programs per SM: enough concurrent rows in flight per SM for HBM latency, while the
#: [G, H] fp32 partial buffer stays a few percent of the traffic.
PROGRAMS_PER_SM = 4


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4  # the interpreter: a few programs, so the strided row loop and stage 2 are exercised


def rmsnorm_backward(
    dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """dy, x: [T, H] (rows contiguous); w: [H]; rstd: [T] fp32. Returns (dx [T, H], dw [H] fp32)."""
    if dy.shape != x.shape or x.dim() != 2 or w.shape != (x.shape[1],) or rstd.shape != (x.shape[0],):
        raise ValueError(f"bad shapes dy={tuple(dy.shape)} x={tuple(x.shape)} w={tuple(w.shape)} rstd={tuple(rstd.shape)}")
    if dy.stride(1) != 1 or x.stride(1) != 1 or not w.is_contiguous() or not rstd.is_contiguous():
        raise ValueError("rows of dy and x, w and rstd must be contiguous")
    T, H = x.shape
    dx = torch.empty_like(dy)
    dw = torch.empty(H, dtype=torch.float32, device=x.device)
    if T == 0:
        return dx, dw.zero_()
    block = triton.next_power_of_2(H)
    rows, num_warps = LAUNCH_TABLE.get(block, (max(1, 2048 // block), max(4, min(16, block // 512))))
    G = max(1, min(_num_sms(x.device) * PROGRAMS_PER_SM, triton.cdiv(T, rows)))
    part = torch.empty(G, H, dtype=torch.float32, device=x.device)
    _rmsnorm_bwd_rows_kernel[(G,)](
        dy, x, w, rstd, dx, part, T, H, G, dy.stride(0), x.stride(0), dx.stride(0),
        ROWS=rows, BLOCK_H=block, INTERPRET=x.device.type != "cuda", num_warps=num_warps,
    )
    # Stage 2 reads G x H fp32 partials (8.6 MB at W1). 32-column programs give H / 32 of them (128
    # at H = 4096, where 64-column ones left half the SMs idle), each summing 128-row tiles.
    block_n = 32
    _rmsnorm_bwd_dw_reduce_kernel[(triton.cdiv(H, block_n),)](
        part, dw, H, G=G, BLOCK_G=128, BLOCK_N=block_n, num_warps=8,
    )
    return dx, dw
