"""Expert Triton kernel for T05 ``mla-decode-paged``: absorbed-MLA decode over the paged latent cache.

Design:
- All heads read the same latent stream, so the (query token, head) rows of a sequence are the M
  dimension of a GEMM against the cache: a program owns BLOCK_H such rows (64 where there are
  enough heads, for Hopper's 64-row warpgroup MMA) and streams the sequence's cache rows once.
- Every cache row is loaded once per program and used twice: its full 576 dims (latent + rope)
  for the score product, its latent prefix as the value operand of P.V. The rope slice is just a
  second, short K-step of the score product.
- Pages are 64 tokens and a key chunk never crosses a page, so each chunk resolves one block-table
  entry (masked at the sequence end: table tails are never dereferenced) and loads contiguous rows.
- Online softmax in the exp2 domain with fp32 statistics; MTP causality (query t of a sequence sees
  keys up to len - q_len + t) is a per-row key limit.
- Split-KV with a log-sum-exp merge when the (sequence, head block) grid is too small for the
  GPU; the head blocks of one sequence are adjacent in the grid so the second reader of a chunk
  finds it in L2. With one split the first kernel writes o and lse directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
NUM_SMS = 132  # H200


@triton.jit
def _mla_chunk(q_nope, q_pe, acc, m_i, l_i, n0, end, limit, bt_row, kv_ptr, stride_kb, stride_ks, qk_scale,
               DV: tl.constexpr, DPE: tl.constexpr, PAGE: tl.constexpr, BLOCK_N: tl.constexpr):
    """One BLOCK_N-token chunk (inside one page): scores from latent + rope, online softmax, P.V."""
    blk = tl.load(bt_row + n0 // PAGE).to(tl.int64)
    toks = n0 + tl.arange(0, BLOCK_N)
    tmask = toks < end
    rows = blk * stride_kb + (n0 % PAGE + tl.arange(0, BLOCK_N)).to(tl.int64) * stride_ks
    c = tl.load(kv_ptr + rows[:, None] + tl.arange(0, DV)[None, :], mask=tmask[:, None], other=0.0)
    kpe = tl.load(kv_ptr + rows[:, None] + DV + tl.arange(0, DPE)[None, :], mask=tmask[:, None], other=0.0)
    s = tl.dot(q_nope, tl.trans(c))
    s = tl.dot(q_pe, tl.trans(kpe), s)
    s = s * qk_scale
    s = tl.where(toks[None, :] <= limit[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(c.dtype), c)
    return acc, m_new, l_i


@triton.jit
def _mla_decode_split_kernel(
    q_ptr, kv_ptr, bt_ptr, lens_ptr, o_ptr, lse_ptr, part_o_ptr, part_lse_ptr,
    qk_scale, H, q_len, num_splits, split_tokens,
    stride_qt, stride_qh, stride_kb, stride_ks, stride_bt, stride_ot, stride_oh,
    DV: tl.constexpr, DPE: tl.constexpr, PAGE: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    DIRECT: tl.constexpr, INTERPRET: tl.constexpr,
):
    hb = tl.program_id(0)
    b = tl.program_id(1)
    split = tl.program_id(2)
    rows_total = q_len * H
    r = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    row_ok = r < rows_total
    t = r // H
    h = r % H
    qrow = (b * q_len + t).to(tl.int64)  # row of q / o / lse
    seq_len = tl.load(lens_ptr + b)
    limit = seq_len - q_len + t  # last key this query row may see
    start = split * split_tokens
    end = tl.minimum(start + split_tokens, seq_len)
    if not DIRECT:
        part_row = ((b * rows_total + r) * num_splits + split).to(tl.int64)
    if start >= seq_len:
        if not DIRECT:
            tl.store(part_lse_ptr + part_row, tl.full([BLOCK_H], float("-inf"), tl.float32), mask=row_ok)
        return

    q_base = q_ptr + qrow[:, None] * stride_qt + h[:, None] * stride_qh
    q_nope = tl.load(q_base + tl.arange(0, DV)[None, :], mask=row_ok[:, None], other=0.0)
    q_pe = tl.load(q_base + DV + tl.arange(0, DPE)[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, DV], tl.float32)
    bt_row = bt_ptr + b.to(tl.int64) * stride_bt
    if INTERPRET:
        # Triton's interpreter cannot use a loop bound read from memory (numpy >= 2 refuses int()
        # of its one-element scalars); the compiled kernel takes the pipelined for-loop.
        n0 = start
        while n0 < end:
            acc, m_i, l_i = _mla_chunk(q_nope, q_pe, acc, m_i, l_i, n0, end, limit, bt_row, kv_ptr,
                                       stride_kb, stride_ks, qk_scale, DV, DPE, PAGE, BLOCK_N)
            n0 += BLOCK_N
    else:
        for n0 in range(start, end, BLOCK_N):
            acc, m_i, l_i = _mla_chunk(q_nope, q_pe, acc, m_i, l_i, n0, end, limit, bt_row, kv_ptr,
                                       stride_kb, stride_ks, qk_scale, DV, DPE, PAGE, BLOCK_N)

    # A row can see no key of this split (an MTP row whose limit precedes the split's start).
    has = l_i > 0.0
    out = acc / tl.where(has, l_i, 1.0)[:, None]
    lse2 = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
    dcols = tl.arange(0, DV)
    if DIRECT:
        tl.store(o_ptr + qrow[:, None] * stride_ot + h[:, None] * stride_oh + dcols[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
        tl.store(lse_ptr + qrow * H + h, lse2 * 0.6931471805599453, mask=row_ok)
    else:
        tl.store(part_o_ptr + part_row[:, None] * DV + dcols[None, :], out, mask=row_ok[:, None])
        tl.store(part_lse_ptr + part_row, lse2, mask=row_ok)


def _prune_by_rows(configs, named_args, **kwargs):
    """Tall head blocks (two warpgroups) and short ones (TP-sharded heads) have separate configs."""
    tall = kwargs["BLOCK_H"] >= 64
    return [c for c in configs if (c.num_warps == 8) == tall]


#: Candidate (chunk, warps, stages) per head-block height, tuned on the device at the first call
#: (the warm-up): two warpgroups for 64-row blocks (a 64 x 512 fp32 accumulator), one for 16-row
#: blocks. Every candidate compiles for sm_90 without spills except 32-key chunks in 3 stages at 64 rows
#: (68-72 B; docs/results/preflight-sm90.md).
_mla_decode_split_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 32}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK_N": 64}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK_N": 32}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_N": 32}, num_warps=4, num_stages=3),
        triton.Config({"BLOCK_N": 64}, num_warps=4, num_stages=2),
    ],
    key=["H", "q_len", "num_splits", "split_tokens"],
    prune_configs_by={"early_config_prune": _prune_by_rows},
)(_mla_decode_split_kernel)


@triton.jit
def _mla_merge_kernel(
    o_ptr, lse_ptr, part_o_ptr, part_lse_ptr, H, q_len, num_splits, stride_ot, stride_oh,
    DV: tl.constexpr, BLOCK_S: tl.constexpr,
):
    b = tl.program_id(0)
    r = tl.program_id(1)  # row t * H + h of sequence b
    t = r // H
    h = r % H
    splits = tl.arange(0, BLOCK_S)
    smask = splits < num_splits
    base = (b * q_len * H + r).to(tl.int64) * num_splits
    lse = tl.load(part_lse_ptr + base + splits, mask=smask, other=float("-inf"))
    m = tl.max(lse, 0)  # finite: every row sees at least its own position's key
    w = tl.exp2(lse - m)
    dcols = tl.arange(0, DV)
    parts = tl.load(part_o_ptr + (base + splits)[:, None] * DV + dcols[None, :],
                    mask=(smask & (w > 0))[:, None], other=0.0)
    total = tl.sum(w, 0)
    out = tl.sum(parts * w[:, None], 0) / total
    qrow = (b * q_len + t).to(tl.int64)
    tl.store(o_ptr + qrow * stride_ot + h * stride_oh + dcols, out.to(o_ptr.dtype.element_ty))
    tl.store(lse_ptr + qrow * H + h, (m + tl.log2(total)) * 0.6931471805599453)


def _launch_config(rows: int, B: int, max_ctx: int, page: int, interpret: bool) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_H, BLOCK_N, splits, tokens per split, warps, stages).

    64 rows per program with two warpgroups (the value columns of the 64 x 512 fp32 accumulator
    split between them) where there are enough heads: 255 registers, no spills, 144 KB of shared
    memory (the 72 KB query block plus two 36 KB chunks of 32 cache rows), so one program per SM;
    splits only when the (head block, sequence) grid would leave SMs idle, because each split adds
    an fp32 partial of the whole accumulator to the traffic. 16 rows for TP-sharded head counts
    (bandwidth-bound): 178 registers, 56 KB, three stages, and splits for about four resident
    programs per SM. (Resource figures from an sm_90 compile with Triton 3.6.)
    """
    if interpret:
        block_h, block_n, num_warps, num_stages, target, min_split = 16, 16, 4, 1, 6, 32
    elif rows >= 64:
        block_h, block_n, num_warps, num_stages, target, min_split = 64, 32, 8, 2, NUM_SMS, 1024
    else:
        # Few heads: bandwidth-bound, so aim for about four resident programs per SM.
        block_h, block_n, num_warps, num_stages, target, min_split = max(16, triton.next_power_of_2(rows)), 32, 4, 3, 4 * NUM_SMS, 1024
    block_n = min(block_n, page)
    programs = triton.cdiv(rows, block_h) * B
    n_split = max(1, min(round(target / programs), triton.cdiv(max_ctx, min_split)))
    align = block_n if interpret else 64  # a multiple of every tuned chunk size
    split_tokens = triton.cdiv(triton.cdiv(max_ctx, n_split), align) * align
    n_split = triton.cdiv(max_ctx, split_tokens)
    return block_h, block_n, n_split, split_tokens, num_warps, num_stages


def mla_decode_paged(
    q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
    scale: float, kv_lora_rank: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [B*q_len, H, Dk]; kv_cache: [num_blocks, page, Dk] (rows contiguous); block_table:
    [B, max_blocks] int32; seq_lens: [B] int32 (>= q_len).

    Returns (o [B*q_len, H, kv_lora_rank] in q's dtype, lse [B*q_len, H] fp32, natural log).
    """
    B = seq_lens.shape[0]
    BQ, H, Dk = q.shape
    _, page, Dk2 = kv_cache.shape
    DV, DPE = int(kv_lora_rank), Dk - int(kv_lora_rank)
    if Dk2 != Dk or B == 0 or BQ % B or DPE <= 0:
        raise ValueError(f"bad shapes q={tuple(q.shape)} kv_cache={tuple(kv_cache.shape)} B={B}")
    for d in (DV, DPE, page):
        if d & (d - 1):
            raise ValueError("kv_lora_rank, the rope dim and the page size must be powers of two")
    if q.stride(2) != 1 or kv_cache.stride(2) != 1 or block_table.stride(1) != 1:
        raise ValueError("the last dims of q, kv_cache and block_table must be contiguous")
    q_len = BQ // B
    o = torch.empty((BQ, H, DV), dtype=q.dtype, device=q.device)
    lse = torch.empty((BQ, H), dtype=torch.float32, device=q.device)
    interpret = q.device.type == "cpu"
    rows = q_len * H
    block_h, block_n, n_split, split_tokens, num_warps, num_stages = _launch_config(
        rows, B, block_table.shape[1] * page, page, interpret)
    direct = n_split == 1
    if direct:
        part_o = part_lse = lse  # unused
    else:
        part_o = torch.empty((B * rows * n_split, DV), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((B * rows * n_split,), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(rows, block_h), B, n_split)
    args = (q, kv_cache, block_table, seq_lens, o, lse, part_o, part_lse,
            scale * LOG2E, H, q_len, n_split, split_tokens,
            q.stride(0), q.stride(1), kv_cache.stride(0), kv_cache.stride(1), block_table.stride(0),
            o.stride(0), o.stride(1))
    if interpret or page % 64:
        _mla_decode_split_kernel[grid](*args, DV=DV, DPE=DPE, PAGE=page, BLOCK_H=block_h, BLOCK_N=block_n,
                                       DIRECT=direct, INTERPRET=interpret, num_warps=num_warps,
                                       num_stages=num_stages)
    else:
        _mla_decode_split_tuned[grid](*args, DV=DV, DPE=DPE, PAGE=page, BLOCK_H=block_h, DIRECT=direct,
                                      INTERPRET=False)
    if not direct:
        _mla_merge_kernel[(B, rows)](
            o, lse, part_o, part_lse, H, q_len, n_split, o.stride(0), o.stride(1),
            DV=DV, BLOCK_S=triton.next_power_of_2(n_split), num_warps=4,
        )
    return o, lse
