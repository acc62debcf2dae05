"""Expert Triton kernel for T10 ``moe-unpermute-combine``: one gather-reduce pass.

A program owns one token and a slice of BLOCK_H columns. It loads the token's k row indices
and weights once (alpha folded into the weights, dropped slots turned into a zero weight and a
masked load), issues the k row loads as one [K_PAD, BLOCK_H] gather so every request is in
flight before any arithmetic, reduces over k in fp32 registers and writes the row once. Traffic
is the k source rows plus the output: eager's [T, k, H] intermediate never exists.

On the GPU the launch is picked by timing, on the first call of each (H, k), among a few
candidates (``_candidates``) that always include the fixed launch used before (``_config``). The
others change the program order (``COLS_FIRST``: a flat grid in which a token's column slices are
adjacent programs, so consecutive programs read consecutive addresses of the same k source rows,
instead of tokens varying fastest and consecutive programs reading k other rows) or the slice (twice
the columns, so more loads are in flight behind each load of the token's indices). The CPU
interpreter runs the fixed launch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _moe_combine_kernel(
    y_ptr, idx_ptr, w_ptr, out_ptr, H, alpha, stride_y, stride_o,
    K: tl.constexpr, K_PAD: tl.constexpr, BLOCK_H: tl.constexpr, COLS_FIRST: tl.constexpr = 0,
):
    # Token and column slice: axes 0 and 1 of a 2D grid (tokens vary fastest), or, with
    # COLS_FIRST, split from one flat program id so that a token's column slices are adjacent.
    t = tl.program_id(0)
    h_blk = tl.program_id(1)
    if COLS_FIRST:
        n_h_blks = tl.cdiv(H, BLOCK_H)
        h_blk = t % n_h_blks
        t = t // n_h_blks
    t = t.to(tl.int64)
    cols = h_blk * BLOCK_H + tl.arange(0, BLOCK_H)
    slots = tl.arange(0, K_PAD)
    smask = slots < K
    rows = tl.load(idx_ptr + t * K + slots, mask=smask, other=-1)
    w = tl.load(w_ptr + t * K + slots, mask=smask, other=0.0)
    live = rows >= 0
    w = tl.where(live, w * alpha, 0.0)
    src = y_ptr + rows.to(tl.int64)[:, None] * stride_y + cols[None, :]
    lmask = live[:, None] & (cols[None, :] < H)
    vals = tl.load(src, mask=lmask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    acc = tl.sum(vals * w[:, None], axis=0)
    tl.store(out_ptr + t * stride_o + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < H)


def _config(H: int) -> tuple[int, int]:
    """(BLOCK_H, warps): the fixed launch, which the interpreter runs and which is the first GPU
    candidate. 1024-column slices (8 bf16 per thread with 4 warps) divide every catalogue hidden
    size (2048, 4096, 7168); short rows take the next power of two."""
    block_h = min(1024, triton.next_power_of_2(max(H, 16)))
    return block_h, 4 if block_h >= 512 else 2


def _candidates_of(block_h: int, split: bool, wide: bool) -> list[triton.Config]:
    """The GPU candidates of one ``_slice_key``. Each is there because:

    1. the fixed launch (``_config``), tokens fastest: so the pick is never slower than before
       beyond timing noise;
    and for rows of several slices (a slice that is a whole row has no order to change):
    2. the same slice with a token's slices adjacent: the program order alone;
    3. (``wide``) twice the columns on the same warps, slices adjacent: twice the loads in flight
       a thread behind the one load of the token's indices and weights;
    4. twice the columns and twice the warps, slices adjacent: fewer, larger programs with the
       fixed launch's elements per thread.
    """
    warps = _config(block_h)[1]  # H = block_h has the same fixed launch
    picks = [(block_h, warps, 0)]
    if split:
        picks.append((block_h, warps, 1))
        if wide:
            picks.append((2 * block_h, warps, 1))
        picks.append((2 * block_h, 2 * warps, 1))
    return [triton.Config({"BLOCK_H": b, "COLS_FIRST": c}, num_warps=w) for b, w, c in picks]


def _slice_key(H: int, k_pad: int) -> tuple[int, bool, bool]:
    """What the candidates of (H, k) depend on: the fixed slice, whether a row spans several, and
    whether the doubled slice on the same warps keeps the gathered [K_PAD, BLOCK_H] fp32 tile at
    most 64 values a thread (the fixed launch's at k = 8), so that no candidate spills."""
    block_h, warps = _config(H)
    return block_h, block_h < H, k_pad * 2 * block_h <= 64 * 32 * warps


def _candidates(H: int, k: int) -> list[triton.Config]:
    """The GPU candidates for rows of H columns gathered from k slots, the fixed launch first."""
    return _candidates_of(*_slice_key(H, triton.next_power_of_2(k)))


#: One autotuner per candidate list (per ``_slice_key``), built on first use; each tunes per
#: (H, k) (the dtypes join the key on their own). A call is a pure function of its inputs, so the
#: timed trials need no restore.
_TUNED: dict[tuple[int, bool, bool], Callable] = {}


def _tuned(H: int, k: int) -> Callable:
    key = _slice_key(H, triton.next_power_of_2(k))
    if key not in _TUNED:
        _TUNED[key] = triton.autotune(configs=_candidates_of(*key), key=["H", "K"])(_moe_combine_kernel)
    return _TUNED[key]


def _grid(T: int, H: int) -> Callable[[dict], tuple[int, ...]]:
    """The launch grid of a configuration: (tokens, column slices), or with COLS_FIRST one flat
    axis of tokens x column slices."""
    def grid(meta: dict) -> tuple[int, ...]:
        n_h = triton.cdiv(H, meta["BLOCK_H"])
        return (T * n_h,) if meta["COLS_FIRST"] else (T, n_h)
    return grid


def moe_unpermute_combine(
    y: torch.Tensor, inv_idx: torch.Tensor, topk_weights: torch.Tensor, alpha: float
) -> torch.Tensor:
    """y: [R, H]; inv_idx: [T, k] int32 (-1 = dropped); topk_weights: [T, k] fp32. Returns [T, H]."""
    if y.stride(1) != 1:
        raise ValueError("rows of y must be contiguous")
    T, k = inv_idx.shape
    H = y.shape[1]
    idx = inv_idx.contiguous()
    w = topk_weights.contiguous()
    out = torch.empty((T, H), dtype=y.dtype, device=y.device)
    if T == 0 or H == 0:
        return out
    args = (y, idx, w, out, H, float(alpha), y.stride(0), out.stride(0))
    if y.device.type == "cpu":  # the interpreter: the fixed launch
        block_h, warps = _config(H)
        meta = {"BLOCK_H": block_h, "COLS_FIRST": 0}
        _moe_combine_kernel[_grid(T, H)(meta)](*args, K=k, K_PAD=triton.next_power_of_2(k), num_warps=warps, **meta)
    else:
        _tuned(H, k)[_grid(T, H)](*args, K=k, K_PAD=triton.next_power_of_2(k))
    return out
