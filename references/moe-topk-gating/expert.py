"""Expert Triton kernel for T07 ``moe-topk-gating``: one read of the logits, selection on chip.

A program owns BLOCK_T rows; each row's E logits sit in registers. Selection runs k rounds of
a row-wise max over packed 64-bit keys (order-preserving bits of the score in the high word,
the complement of the expert index in the low word), so one reduction yields both the value
and the index and an exact tie resolves to the lower index.

Softmax mode never computes the softmax of the row: the top-k of p is the top-k of x, and with
renormalisation the weights are exp(x_i - x_max) / sum over the selected of exp(x_j - x_max),
so only k exponentials are needed (without renormalisation one extra row sum of exponentials).

Sigmoid mode (DeepSeek-V3, Kimi-K2): s = sigmoid(x) computed as 1 / (1 + expf(-x)) with IEEE
division (bit-identical to PyTorch's, so selection matches the reference exactly), s' = s +
bias. With groups, the row is viewed as [groups, experts per group]: the top-2 of every group
come from two packed-key maxima, the best groups from topk_group rounds over the group scores,
and the expert rounds then run on the row with the dropped groups masked in registers.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

_NEG = tl.constexpr(-(2**63))  # the key of an excluded entry


@triton.jit
def _pack(v, idx, IDX_MAX: tl.constexpr):
    """Order-preserving int64 key: float order in the high word, lower index wins ties."""
    b = (v + 0.0).to(tl.int32, bitcast=True)  # + 0.0 folds -0.0 into +0.0
    ordered = tl.where(b >= 0, b, b ^ 0x7FFFFFFF)
    return (ordered.to(tl.int64) << 32) | (IDX_MAX - idx).to(tl.int64)


@triton.jit
def _unpack_value(key):
    hi = (key >> 32).to(tl.int32)
    b = tl.where(hi >= 0, hi, hi ^ 0x7FFFFFFF)
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _topk_gating_kernel(
    x_ptr, bias_ptr, w_ptr, ids_ptr, T, stride_x, scale,
    E: tl.constexpr, E_PAD: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr,
    BLOCK_T: tl.constexpr, SIGMOID: tl.constexpr, RENORM: tl.constexpr,
    N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, PRECISE: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, E_PAD)
    rmask = rows < T
    cmask = cols < E
    mask = rmask[:, None] & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if SIGMOID:
        e = libdevice.exp(-x) if PRECISE else tl.exp(-x)  # expf, as PyTorch's sigmoid
        s = tl.math.div_rn(tl.full([BLOCK_T, E_PAD], 1.0, tl.float32), e + 1.0)
        bias = tl.load(bias_ptr + cols, mask=cmask, other=0.0)
        choice = s + bias[None, :]
    else:
        s = x
        choice = x
    key = tl.where(mask, _pack(choice, cols[None, :], E_PAD - 1), _NEG)
    if SIGMOID and N_GROUP > 1:
        EG: tl.constexpr = E_PAD // N_GROUP
        key3 = tl.reshape(key, [BLOCK_T, N_GROUP, EG])
        first = tl.max(key3, axis=2)
        second = tl.max(tl.where(key3 == first[:, :, None], _NEG, key3), axis=2)
        gscore = _unpack_value(first) + _unpack_value(second)
        gidx = tl.arange(0, N_GROUP)
        gkey = _pack(gscore, gidx[None, :], N_GROUP - 1)
        kept = tl.zeros([BLOCK_T, N_GROUP], dtype=tl.int1)
        for _ in tl.static_range(TOPK_GROUP):
            best = tl.max(gkey, axis=1)
            hit = gkey == best[:, None]
            kept = kept | hit
            gkey = tl.where(hit, _NEG, gkey)
        keep = tl.reshape(tl.broadcast_to(kept[:, :, None], [BLOCK_T, N_GROUP, EG]), [BLOCK_T, E_PAD])
        key = tl.where(keep, key, _NEG)

    slots = tl.arange(0, K_PAD)
    sel_ids = tl.zeros([BLOCK_T, K_PAD], dtype=tl.int32)
    sel_val = tl.zeros([BLOCK_T, K_PAD], dtype=tl.float32)
    for i in tl.static_range(K):
        best = tl.max(key, axis=1)
        idx = E_PAD - 1 - best.to(tl.int32)  # the low word (truncation)
        hit = cols[None, :] == idx[:, None]
        # sigmoid: the unbiased score of the winner; softmax: its logit, from the key itself
        val = tl.sum(tl.where(hit, s, 0.0), axis=1) if SIGMOID else _unpack_value(best)
        key = tl.where(hit, _NEG, key)
        sel_ids = tl.where(slots[None, :] == i, idx[:, None], sel_ids)
        sel_val = tl.where(slots[None, :] == i, val[:, None], sel_val)

    kmask = slots[None, :] < K
    if SIGMOID:
        w = sel_val
        if RENORM:
            w = w / (tl.sum(tl.where(kmask, w, 0.0), axis=1)[:, None] + 1e-20)
    else:
        row_max = tl.max(tl.where(kmask, sel_val, float("-inf")), axis=1)
        ex = tl.where(kmask, tl.exp(sel_val - row_max[:, None]), 0.0)
        full = tl.where(mask, tl.exp(x - row_max[:, None]), 0.0)  # only without renormalisation
        denom = tl.sum(ex, axis=1) if RENORM else tl.sum(full, axis=1)
        w = ex / denom[:, None]
    w = w * scale
    out = rows[:, None] * K + slots[None, :]
    omask = rmask[:, None] & kmask
    tl.store(w_ptr + out, w, mask=omask)
    tl.store(ids_ptr + out, sel_ids, mask=omask)


def moe_topk_gating(
    x: torch.Tensor, bias: torch.Tensor, top_k: int, renormalize: bool, scoring: str,
    n_group: int, topk_group: int, routed_scaling_factor: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, E] logits; bias: [E] fp32. Returns (topk_weights [T, k] fp32, topk_ids [T, k] int32)."""
    if x.stride(1) != 1:
        raise ValueError("rows of x must be contiguous")
    T, E = x.shape
    k = int(top_k)
    sigmoid = scoring == "sigmoid"
    if scoring not in ("softmax", "sigmoid"):
        raise ValueError(f"unknown scoring {scoring!r}")
    groups = int(n_group) if sigmoid and int(n_group) > 1 else 1
    e_pad = triton.next_power_of_2(E)
    if groups > 1 and (E % groups or e_pad != E or (E // groups) < 2):
        raise ValueError("grouped routing needs a power-of-two E split into groups of >= 2 experts")
    weights = torch.empty((T, k), dtype=torch.float32, device=x.device)
    ids = torch.empty((T, k), dtype=torch.int32, device=x.device)
    if T == 0:
        return weights, ids
    block_t = max(1, min(64, 2048 // e_pad))
    precise = x.device.type == "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1"
    _topk_gating_kernel[(triton.cdiv(T, block_t),)](
        x, bias.float().contiguous(), weights, ids, T, x.stride(0), float(routed_scaling_factor),
        E=E, E_PAD=e_pad, K=k, K_PAD=triton.next_power_of_2(k), BLOCK_T=block_t,
        SIGMOID=sigmoid, RENORM=bool(renormalize), N_GROUP=groups, TOPK_GROUP=int(topk_group),
        PRECISE=precise, num_warps=4,
    )
    return weights, ids
