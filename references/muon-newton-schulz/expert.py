"""Expert Triton kernels for T23 ``muon-newton-schulz``: the composed, symmetric iteration.

Every Newton-Schulz step multiplies X on the left by P_k = aI + bA_k + cA_k², a polynomial in the
Gram matrix. All these polynomials are polynomials of the first Gram matrix A_0, so they are
symmetric and commute: A_{k+1} = P_k A_k P_k and X_5 = (P_4 ... P_0) X_0. The kernels below
implement the three ideas of the task's guidance:

1. Compose small square matrices, then one large multiply: the iteration runs on r x r matrices
   (A, P, the accumulated Q = P_k ... P_0 and one temporary) and the r x c matrix is multiplied
   once, X = Q X_0, at the end of a segment.
2. Keep the square state resident inside a segment and materialize the rectangular matrix only at
   segment boundaries: wide matrices (aspect >= 2) run all five steps as one segment; near-square
   ones, where composing in low precision drifts, use segments of 2, 2 and 1 steps, each starting
   from a freshly materialized X and its new Gram matrix.
3. Compute each symmetric product once as triangular blocks: every r x r product here (X Xᵀ, A·A,
   A·P, P·(AP), Q·P) is symmetric, so only tiles on or below the diagonal are scheduled; each
   off-diagonal tile is written to its place and mirrored, each diagonal tile is written once.

The Frobenius normalization is folded into the first Gram: the Gram kernel's diagonal tiles add
their trace into a per-matrix fp32 scalar (||X||² = tr(X Xᵀ)); later kernels read it and scale A
by 1/||X||² and Q by 1/||X|| in their epilogues, so X is never rescaled in memory. The polynomial
P = aI + bA + cA² is formed in the epilogue of the A·A product. Accumulation is fp32, storage is
the working dtype (bf16), as in the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

NS_A, NS_B, NS_C = 3.4445, -4.7750, 2.0315
NS_STEPS = 5


@triton.jit
def _tri_tile(t):
    """Tile (i, j) with j <= i of the t-th lower-triangle tile, rows enumerated in order."""
    i = ((tl.sqrt(8.0 * t.to(tl.float32) + 1.0) - 1.0) * 0.5).to(tl.int32)
    i = tl.where((i + 1) * (i + 2) // 2 <= t, i + 1, i)
    i = tl.where(i * (i + 1) // 2 > t, i - 1, i)
    return i, t - i * (i + 1) // 2


@triton.jit
def _scale_of(scale_ptr, bid, POW: tl.constexpr):
    """(1 / (sqrt(trace) + 1e-7)) ** POW for matrix ``bid``; POW = 0 gives 1 without a load."""
    if POW == 0:
        return 1.0
    s = 1.0 / (tl.sqrt(tl.load(scale_ptr + bid)) + 1e-7)
    out = s
    for _ in tl.static_range(POW - 1):
        out = out * s
    return out


@triton.jit
def _store_sym(c_base, acc, rows_i, rows_j, R, scr, ti, tj):
    """Write the tile at (i, j) and, off the diagonal, its mirror at (j, i)."""
    mask = (rows_i[:, None] < R) & (rows_j[None, :] < R)
    tl.store(c_base + rows_i[:, None] * scr + rows_j[None, :], acc, mask=mask)
    if ti != tj:
        tl.store(c_base + rows_j[None, :] * scr + rows_i[:, None], acc, mask=mask)


@triton.jit
def _gram_fwd_kernel(
    x_ptr, c_ptr, trace_ptr, R,
    sxb, sxr, sxc, scb, scr,
    K: tl.constexpr, TRACE: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr,
):
    """C = X Xᵀ for X [R, K] (any strides), lower-triangle tiles only, mirrored."""
    ti, tj = _tri_tile(tl.program_id(0))
    bid = tl.program_id(1)
    rows_i = ti * BM + tl.arange(0, BM)
    rows_j = tj * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    xb = x_ptr + bid.to(tl.int64) * sxb
    a_ptrs = xb + rows_i[:, None] * sxr + ks[None, :] * sxc
    b_ptrs = xb + rows_j[:, None] * sxr + ks[None, :] * sxc
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, K, BK):
        kmask = (k + ks) < K
        a = tl.load(a_ptrs, mask=(rows_i[:, None] < R) & kmask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=(rows_j[:, None] < R) & kmask[None, :], other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
        a_ptrs += BK * sxc
        b_ptrs += BK * sxc
    if TRACE:  # noqa: SIM102 (constexpr test, then a runtime one)
        if ti == tj:
            diag = tl.where(rows_i[:, None] == rows_j[None, :], acc, 0.0)
            tl.atomic_add(trace_ptr + bid, tl.sum(tl.sum(diag, axis=1), axis=0))
    _store_sym(c_ptr + bid.to(tl.int64) * scb, acc.to(c_ptr.dtype.element_ty), rows_i, rows_j, R, scr, ti, tj)


@triton.jit
def _sym_mm_fwd_kernel(
    a_ptr, b_ptr, c_ptr, scale_ptr, R, smb, smr,
    coef_a, coef_b, coef_c,
    K: tl.constexpr, POW: tl.constexpr, POLY: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr,
):
    """C = s^POW · A·B for symmetric, commuting A, B [R, R] (so C is symmetric): lower tiles only.

    POLY: C = coef_a·I + coef_b·s^POW·A + coef_c·s^(2 POW)·A·A (B is A): the Newton-Schulz
    polynomial straight out of the A² epilogue.
    """
    ti, tj = _tri_tile(tl.program_id(0))
    bid = tl.program_id(1)
    rows_i = ti * BM + tl.arange(0, BM)
    rows_j = tj * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    off = bid.to(tl.int64) * smb
    a_ptrs = a_ptr + off + rows_i[:, None] * smr + ks[None, :]
    b_ptrs = b_ptr + off + ks[:, None] * smr + rows_j[None, :]
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, K, BK):
        kmask = (k + ks) < K
        a = tl.load(a_ptrs, mask=(rows_i[:, None] < R) & kmask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kmask[:, None] & (rows_j[None, :] < R), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * smr
    s = _scale_of(scale_ptr, bid, POW)
    mask = (rows_i[:, None] < R) & (rows_j[None, :] < R)
    if POLY:
        a_ij = tl.load(a_ptr + off + rows_i[:, None] * smr + rows_j[None, :], mask=mask, other=0.0).to(tl.float32)
        eye = tl.where(rows_i[:, None] == rows_j[None, :], coef_a, 0.0)
        acc = eye + (coef_b * s) * a_ij + (coef_c * s * s) * acc
    else:
        acc = acc * s
    _store_sym(c_ptr + off, acc.to(c_ptr.dtype.element_ty), rows_i, rows_j, R, smr, ti, tj)


@triton.jit
def _apply_fwd_kernel(
    q_ptr, x_ptr, y_ptr, scale_ptr, R, C,
    sqb, sqr, sxb, sxr, sxc, syb, syr, syc,
    K: tl.constexpr, POW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    GROUP: tl.constexpr,
):
    """Y = s^POW · Q·X for Q [R, R], X [R, C] (strided: X may be a transposed view), Y strided."""
    pid = tl.program_id(0)
    bid = tl.program_id(1)
    n_m = tl.cdiv(R, BM)
    n_n = tl.cdiv(C, BN)
    # Grouped rasterization: consecutive programs share Q row-panels and X column-panels in L2.
    width = GROUP * n_n
    first_m = (pid // width) * GROUP
    gm = tl.minimum(n_m - first_m, GROUP)
    pid_m = first_m + (pid % width) % gm
    pid_n = (pid % width) // gm
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    q_ptrs = q_ptr + bid.to(tl.int64) * sqb + rows[:, None] * sqr + ks[None, :]
    x_ptrs = x_ptr + bid.to(tl.int64) * sxb + ks[:, None] * sxr + cols[None, :] * sxc
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kmask = (k + ks) < K
        q = tl.load(q_ptrs, mask=(rows[:, None] < R) & kmask[None, :], other=0.0)
        x = tl.load(x_ptrs, mask=kmask[:, None] & (cols[None, :] < C), other=0.0)
        acc = tl.dot(q, x, acc)
        q_ptrs += BK
        x_ptrs += BK * sxr
    acc = acc * _scale_of(scale_ptr, bid, POW)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    y_ptrs = y_ptr + bid.to(tl.int64) * syb + rows[:, None] * syr + cols[None, :] * syc
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


#: Tiles for the H200: 128 x 128 output tiles with 64-deep k-steps keep two wgmma warpgroups busy
#: and four stages fit the 228 KB of shared memory; small r (the batched W3) uses 64 x 64 tiles so
#: that a grouped launch over (matrix, tile) still fills the 132 SMs.
def _tiles(r: int, b: int) -> tuple[int, int, int, int]:
    """(square tile, k-step, warps, stages)."""
    if r <= 64 or b * (triton.cdiv(r, 128) * (triton.cdiv(r, 128) + 1) // 2) < 132:
        return 64, 64, 4, 4
    return 128, 64, 8, 4


def _segments(r: int, c: int) -> list[int]:
    """Steps per segment: wide matrices compose all five steps; near-square ones restart twice."""
    return [NS_STEPS] if c >= 2 * r else [2, 2, 1]


class _Sym:
    """Launchers for one batch of r x r symmetric products."""

    def __init__(self, b: int, r: int, dtype: torch.dtype, device: torch.device, scale: torch.Tensor):
        self.b, self.r, self.dtype, self.device, self.scale = b, r, dtype, device, scale
        self.bm, self.bk, self.warps, self.stages = _tiles(r, b)
        nt = triton.cdiv(r, self.bm)
        self.grid = (nt * (nt + 1) // 2, b)

    def new(self) -> torch.Tensor:
        return torch.empty(self.b, self.r, self.r, dtype=self.dtype, device=self.device)

    def mm(self, A: torch.Tensor, B: torch.Tensor, out: torch.Tensor, pow_: int = 0, poly: bool = False) -> torch.Tensor:
        _sym_mm_fwd_kernel[self.grid](
            A, B, out, self.scale, self.r, A.stride(0), A.stride(1), NS_A, NS_B, NS_C,
            K=self.r, POW=pow_, POLY=poly, BM=self.bm, BK=self.bk, num_warps=self.warps, num_stages=self.stages,
        )
        return out


def muon_newton_schulz(G: torch.Tensor) -> torch.Tensor:
    """G: [b, m, n] (bf16; fp16 in the smoke set). Returns X [b, m, n], same dtype."""
    if G.dim() != 3:
        raise ValueError(f"G must be [b, m, n], got {tuple(G.shape)}")
    if G.dtype == torch.float32:
        G = G.to(torch.bfloat16)
    G = G.contiguous()
    b, m, n = G.shape
    tall = m > n
    r, c = (n, m) if tall else (m, n)
    dev, dt = G.device, G.dtype
    # X0 as a strided r x c view of G (the transpose of a tall matrix costs nothing).
    x_strides = (G.stride(0), G.stride(2), G.stride(1)) if tall else (G.stride(0), G.stride(1), G.stride(2))
    out = torch.empty_like(G)
    y_strides = x_strides
    trace = torch.zeros(b, dtype=torch.float32, device=dev)
    sym = _Sym(b, r, dt, dev, trace)
    bm, bk, warps, stages = sym.bm, sym.bk, sym.warps, sym.stages
    bn = 128 if bm == 128 else 64
    segs = _segments(r, c)
    x_src, xs = G, x_strides
    A, P, T, Q, Q2 = sym.new(), sym.new(), sym.new(), sym.new(), sym.new()
    for si, steps in enumerate(segs):
        first = si == 0
        # Gram of the current X (the raw input in the first segment; its trace is ||X0||²).
        _gram_fwd_kernel[sym.grid](
            x_src, A, trace, r, xs[0], xs[1], xs[2], A.stride(0), A.stride(1),
            K=c, TRACE=first, BM=bm, BK=bk, num_warps=warps, num_stages=stages,
        )
        p2 = 2 if first else 0  # A_0 = A_raw / ||X0||²
        q_cur = None
        for k in range(steps):
            sym.mm(A, A, P, pow_=p2, poly=True)  # P = aI + bA + cA²
            if q_cur is None:
                q_cur = P
                P, Q = Q, P  # Q now holds P_0; P is free scratch for the next step
            else:
                sym.mm(q_cur, P, Q2)  # Q <- Q·P (commuting symmetric: symmetric)
                Q, Q2 = Q2, Q
                q_cur = Q
            if k < steps - 1:
                pk = q_cur if k == 0 else P
                sym.mm(A, pk, T, pow_=p2)  # T = A·P
                sym.mm(pk, T, A)  # A <- P·(A·P)
                p2 = 0
        last = si == len(segs) - 1
        if last:
            y, ys = out, y_strides
        else:
            y = torch.empty(b, r, c, dtype=dt, device=dev)
            ys = (y.stride(0), y.stride(1), y.stride(2))
        grid = (triton.cdiv(r, bm) * triton.cdiv(c, bn), b)
        _apply_fwd_kernel[grid](
            q_cur, x_src, y, trace, r, c, q_cur.stride(0), q_cur.stride(1), xs[0], xs[1], xs[2],
            ys[0], ys[1], ys[2], K=r, POW=1 if first else 0, BM=bm, BN=bn, BK=bk, GROUP=8,
            num_warps=warps, num_stages=stages,
        )
        x_src, xs = y, ys
    return out
