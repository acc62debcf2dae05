"""PLANTED BUG (CI must reject this kernel): segment padding holds n - 1 instead of the sentinel n.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _count_kernel(ids_ptr, table_ptr, n, CHUNK: tl.constexpr, E_PAD: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * CHUNK + tl.arange(0, CHUNK)
    m = offs < n
    ids = tl.load(ids_ptr + offs, mask=m, other=0)
    hist = tl.histogram(ids, E_PAD, mask=m)
    tl.store(table_ptr + pid * E_PAD + tl.arange(0, E_PAD), hist)


@triton.jit
def _scan_scatter_kernel(
    ids_ptr, table_ptr, cursor_ptr, sorted_ptr, eids_ptr, ntpp_ptr,
    n, max_len,
    NUM_PROGS: tl.constexpr, MAX_BLOCKS: tl.constexpr, E: tl.constexpr, BS: tl.constexpr, E_PAD: tl.constexpr, CHUNK: tl.constexpr,
    ROWS: tl.constexpr, BS_PAD: tl.constexpr, FILL: tl.constexpr, EB: tl.constexpr,
):
    pid = tl.program_id(0)
    e_offs = tl.arange(0, E_PAD)
    total = tl.zeros([E_PAD], dtype=tl.int32)
    before = tl.zeros([E_PAD], dtype=tl.int32)
    for r0 in range(0, NUM_PROGS, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        tile = tl.load(table_ptr + rows[:, None] * E_PAD + e_offs[None, :], mask=rows[:, None] < NUM_PROGS, other=0)
        total += tl.sum(tile, axis=0)
        before += tl.sum(tl.where(rows[:, None] < pid, tile, 0), axis=0)
    padded = (total + BS - 1) // BS * BS
    seg_end = tl.cumsum(padded, axis=0)
    seg_start = seg_end - padded
    total_pad = tl.sum(padded, axis=0)

    # Scatter: each slot claims a position on its own program's cursor row.
    cur = cursor_ptr + pid * E_PAD
    tl.store(cur + e_offs, seg_start + before)
    tl.debug_barrier()
    offs = pid * CHUNK + tl.arange(0, CHUNK)
    m = offs < n
    ids = tl.load(ids_ptr + offs, mask=m, other=0)
    pos = tl.atomic_add(cur + ids, 1, mask=m, sem="relaxed")
    tl.store(sorted_ptr + pos, offs, mask=m)

    # Sentinels in the tails of this program's experts (e = pid, pid + NUM_PROGS, ...).
    j = tl.arange(0, BS_PAD)
    for e0 in range(0, E, NUM_PROGS):
        e = e0 + pid
        sel = (e_offs == e) & (e < E)
        start = tl.sum(tl.where(sel, seg_start, 0), axis=0)
        cnt = tl.sum(tl.where(sel, total, 0), axis=0)
        pad = tl.sum(tl.where(sel, padded, 0), axis=0)
        tl.store(sorted_ptr + start + cnt + j, n - 1, mask=j < pad - cnt)
    # Sentinels past the padded total.
    f = tl.arange(0, FILL)
    for p0 in range(0, E * (BS - 1), NUM_PROGS * FILL):  # total_pad >= n: the tail is shorter
        p = total_pad + p0 + pid * FILL + f
        tl.store(sorted_ptr + p, n, mask=p < max_len)
    # Block-to-expert map: block b belongs to the number of segments that end at or before it.
    blk_end = seg_end // BS
    b = tl.arange(0, EB)
    for b0 in range(0, MAX_BLOCKS, NUM_PROGS * EB):
        blk = b0 + pid * EB + b
        owner = tl.sum((blk_end[None, :] <= blk[:, None]).to(tl.int32), axis=1)
        tl.store(eids_ptr + blk, tl.minimum(owner, E - 1), mask=blk < MAX_BLOCKS)
    if pid == 0:
        tl.store(ntpp_ptr, total_pad)


def _chunk(n: int) -> tuple[int, int]:
    """(ids per program, warps): about 128 programs or fewer, chunks of 1024 to 4096 ids."""
    chunk = min(4096, max(1024, triton.next_power_of_2(triton.cdiv(max(n, 1), 128))))
    return chunk, 8 if chunk >= 2048 else 4


def moe_align_block_size(
    topk_ids: torch.Tensor, block_size: int, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """topk_ids: [T, k] int32. Returns (sorted_token_ids, expert_ids, num_tokens_post_pad)."""
    bs, E = int(block_size), int(num_experts)
    ids = topk_ids.reshape(-1)
    if ids.dtype != torch.int32:
        ids = ids.to(torch.int32)
    ids = ids.contiguous()
    n = ids.numel()
    max_len = n + E * (bs - 1)
    max_blocks = triton.cdiv(max_len, bs)
    dev = ids.device
    sorted_ids = torch.empty(max_len, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
    ntpp = torch.empty(1, dtype=torch.int32, device=dev)
    chunk, warps = _chunk(n)
    progs = max(1, triton.cdiv(n, chunk))
    e_pad = triton.next_power_of_2(E)
    scratch = torch.empty(2 * progs * e_pad, dtype=torch.int32, device=dev)
    table, cursor = scratch[: progs * e_pad], scratch[progs * e_pad:]
    _count_kernel[(progs,)](ids, table, n, CHUNK=chunk, E_PAD=e_pad, num_warps=warps)
    _scan_scatter_kernel[(progs,)](
        ids, table, cursor, sorted_ids, expert_ids, ntpp, n, max_len,
        NUM_PROGS=progs, MAX_BLOCKS=max_blocks, E=E, BS=bs, E_PAD=e_pad, CHUNK=chunk, ROWS=max(1, min(32, 8192 // e_pad)),
        BS_PAD=triton.next_power_of_2(bs), FILL=1024, EB=max(16, min(128, 8192 // e_pad)), num_warps=warps,
    )
    return sorted_ids, expert_ids, ntpp
