"""Expert Triton kernels for T09 ``fused-moe-mlp``: expert sort, two grouped GEMMs, combine.

1. Expert sort (two launches, as T08): the T*k slots grouped by expert, every segment padded
   to the GEMM row tile, and the expert of every row tile. The second launch has a program per
   chunk of slots, and at least min(E, 128) in all, which share the sentinel fill.
2. GEMM1 (one launch over all experts): each program owns BLOCK_M sorted slots of one expert
   and BLOCK_N intermediate columns. The activation rows are gathered on load straight from x
   through the sorted slot ids (row = slot // k): the permuted copy of x never exists. The
   weight tiles arrive by TMA (tensor descriptors over the [E*2I, H] view), the gathered rows
   by per-row asynchronous copies, both through the same multi-stage pipeline. The gate and up
   tiles of the same columns are accumulated side by side in fp32 on tensor cores, and the
   epilogue writes only silu(gate) * up, rounded to the activation dtype.
3. GEMM2 (one launch): intermediate rows (already in sorted order) times the expert's down
   projection, fp32 accumulation, the routing weight multiplied in the epilogue, and each row
   scattered to its slot f = t*k + j.
4. Combine: out[t] = sum_j slot_out[t*k + j] in fp32, one pass.
Padding rows are masked on load and store; row tiles past the padded total exit at once.
The row tile comes from the average rows per expert; the rest of each GEMM's launch is picked by
timing on a shape's first call (Triton's autotuner), among candidates that include, for GEMM2
with a narrow intermediate (a sharded model's skinny experts), a row tile loaded once and kept
on chip while the program walks several column tiles of the down projection. On an H100 the
tuner takes that path at DeepSeek's TP8 shard (W4), 1.08x faster in one run than session 20's
fixed table (docs/results/h100.md, session 21).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


# ----------------------------------------------------------------------------- expert sort
@triton.jit
def _count_kernel(ids_ptr, table_ptr, n, CHUNK: tl.constexpr, E_PAD: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * CHUNK + tl.arange(0, CHUNK)
    m = offs < n
    ids = tl.load(ids_ptr + offs, mask=m, other=0)
    tl.store(table_ptr + pid * E_PAD + tl.arange(0, E_PAD), tl.histogram(ids, E_PAD, mask=m))


@triton.jit
def _scatter_kernel(
    ids_ptr, table_ptr, cursor_ptr, sorted_ptr, eids_ptr, ntpp_ptr, n, max_len,
    NUM_CHUNKS: tl.constexpr, NUM_PROGS: tl.constexpr, MAX_BLOCKS: tl.constexpr, E: tl.constexpr,
    BS: tl.constexpr, E_PAD: tl.constexpr, CHUNK: tl.constexpr, ROWS: tl.constexpr,
    BS_PAD: tl.constexpr, FILL: tl.constexpr, EB: tl.constexpr,
):
    pid = tl.program_id(0)
    e_offs = tl.arange(0, E_PAD)
    total = tl.zeros([E_PAD], dtype=tl.int32)
    before = tl.zeros([E_PAD], dtype=tl.int32)
    for r0 in range(0, NUM_CHUNKS, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        tile = tl.load(table_ptr + rows[:, None] * E_PAD + e_offs[None, :], mask=rows[:, None] < NUM_CHUNKS, other=0)
        total += tl.sum(tile, axis=0)
        before += tl.sum(tl.where(rows[:, None] < pid, tile, 0), axis=0)
    padded = (total + BS - 1) // BS * BS
    seg_end = tl.cumsum(padded, axis=0)
    seg_start = seg_end - padded
    total_pad = tl.sum(padded, axis=0)
    if pid < NUM_CHUNKS:
        # Only the programs that own a chunk of slots scatter; the others only fill below.
        cur = cursor_ptr + pid * E_PAD
        tl.store(cur + e_offs, seg_start + before)
        tl.debug_barrier()
        offs = pid * CHUNK + tl.arange(0, CHUNK)
        m = offs < n
        ids = tl.load(ids_ptr + offs, mask=m, other=0)
        pos = tl.atomic_add(cur + ids, 1, mask=m, sem="relaxed")
        tl.store(sorted_ptr + pos, offs, mask=m)
    j = tl.arange(0, BS_PAD)
    for e0 in range(0, E, NUM_PROGS):
        e = e0 + pid
        sel = (e_offs == e) & (e < E)
        start = tl.sum(tl.where(sel, seg_start, 0), axis=0)
        cnt = tl.sum(tl.where(sel, total, 0), axis=0)
        pad = tl.sum(tl.where(sel, padded, 0), axis=0)
        tl.store(sorted_ptr + start + cnt + j, n, mask=j < pad - cnt)
    f = tl.arange(0, FILL)
    for p0 in range(0, E * (BS - 1), NUM_PROGS * FILL):
        p = total_pad + p0 + pid * FILL + f
        tl.store(sorted_ptr + p, n, mask=p < max_len)
    blk_end = seg_end // BS
    b = tl.arange(0, EB)
    for b0 in range(0, MAX_BLOCKS, NUM_PROGS * EB):
        blk = b0 + pid * EB + b
        owner = tl.sum((blk_end[None, :] <= blk[:, None]).to(tl.int32), axis=1)
        tl.store(eids_ptr + blk, tl.minimum(owner, E - 1), mask=blk < MAX_BLOCKS)
    if pid == 0:
        tl.store(ntpp_ptr, total_pad)


def _align(ids: torch.Tensor, bs: int, E: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = ids.numel()
    max_len = n + E * (bs - 1)
    max_blocks = triton.cdiv(max_len, bs)
    dev = ids.device
    sorted_ids = torch.empty(max_len, dtype=torch.int32, device=dev)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
    ntpp = torch.empty(1, dtype=torch.int32, device=dev)
    chunk = min(4096, max(1024, triton.next_power_of_2(triton.cdiv(max(n, 1), 128))))
    warps = 8 if chunk >= 2048 else 4
    progs = max(1, triton.cdiv(n, chunk))
    e_pad = triton.next_power_of_2(E)
    scratch = torch.empty(2 * progs * e_pad, dtype=torch.int32, device=dev)
    table, cursor = scratch[: progs * e_pad], scratch[progs * e_pad:]
    _count_kernel[(progs,)](ids, table, n, CHUNK=chunk, E_PAD=e_pad, num_warps=warps)
    # The padding sentinels and the block-to-expert map are spread over at least min(E, 128)
    # programs: at decode sizes there is a single chunk, and one program filling 128 experts'
    # tails in turn took 18 us of the call's 309 us of kernels (Nsight, fused-moe-mlp W3, h200-profiles.md).
    fill_progs = max(progs, min(E, 128))
    _scatter_kernel[(fill_progs,)](
        ids, table, cursor, sorted_ids, expert_ids, ntpp, n, max_len,
        NUM_CHUNKS=progs, NUM_PROGS=fill_progs, MAX_BLOCKS=max_blocks, E=E, BS=bs, E_PAD=e_pad, CHUNK=chunk,
        ROWS=max(1, min(32, 8192 // e_pad)), BS_PAD=triton.next_power_of_2(bs), FILL=1024,
        EB=max(16, min(128, 8192 // e_pad)), num_warps=warps,
    )
    return sorted_ids, expert_ids, ntpp


# ----------------------------------------------------------------------------- grouped GEMMs
@triton.jit
def _tile_ids(NUM_M: tl.constexpr, NUM_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program id to (row tile, column tile): GROUP_M row tiles share each column tile, so the
    weight tile of an expert is fetched once from HBM and reused from L2."""
    pid = tl.program_id(0)
    per_group = GROUP_M * NUM_N
    first_m = (pid // per_group) * GROUP_M
    size_m = tl.minimum(NUM_M - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    return pid_m, pid_n


@triton.jit
def _gate_up_kernel(
    x_ptr, w_desc, inter_ptr, sorted_ptr, eids_ptr, ntpp_ptr,
    n, stride_x, stride_i,
    INTER: tl.constexpr, H: tl.constexpr, TOPK: tl.constexpr, EM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    NUM_M: tl.constexpr = (EM + BLOCK_M - 1) // BLOCK_M
    NUM_N: tl.constexpr = (INTER + BLOCK_N - 1) // BLOCK_N
    pid_m, pid_n = _tile_ids(NUM_M, NUM_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(ntpp_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ptr + offs_m, mask=offs_m < EM, other=n)
    live = slot < n
    row = (slot // TOPK).to(tl.int64)
    expert = tl.load(eids_ptr + pid_m)
    # Weight tiles by TMA from the [E*2I, H] view: gate rows at e*2I + n0, up rows I further.
    # Rows past I inside a tile belong to the next matrix; they only feed masked columns.
    g_row = expert * (2 * INTER) + pid_n * BLOCK_N
    u_row = g_row + INTER
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = x_ptr + row[:, None] * stride_x + offs_k[None, :]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        if H % BLOCK_K == 0:
            a = tl.load(a_ptrs, mask=live[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs, mask=live[:, None] & (offs_k[None, :] < H - k0), other=0.0)
        bg = w_desc.load([g_row, k0])
        bu = w_desc.load([u_row, k0])
        acc_g = tl.dot(a, bg.T, acc_g)
        acc_u = tl.dot(a, bu.T, acc_u)
        a_ptrs += BLOCK_K
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out_ptrs = inter_ptr + offs_m[:, None].to(tl.int64) * stride_i + offs_n[None, :]
    tl.store(out_ptrs, act.to(inter_ptr.dtype.element_ty), mask=(offs_m[:, None] < EM) & (offs_n[None, :] < INTER))


@triton.jit
def _down_kernel(
    a_ptr, w_desc, y_ptr, sorted_ptr, eids_ptr, ntpp_ptr, tw_ptr,
    n, stride_a, stride_y,
    INTER: tl.constexpr, H: tl.constexpr, EM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    N_PER_PROG: tl.constexpr,
):
    """A program owns BLOCK_M sorted rows and N_PER_PROG adjacent column tiles of H.

    When one K step covers the whole intermediate (BLOCK_K >= INTER, the skinny experts of a
    sharded model), the row tile is loaded once and stays on chip while the program walks
    its column tiles, so the weight tiles stream through the pipeline behind it; otherwise each
    column tile runs the usual K loop.
    """
    NUM_M: tl.constexpr = (EM + BLOCK_M - 1) // BLOCK_M
    NUM_N: tl.constexpr = ((H + BLOCK_N - 1) // BLOCK_N + N_PER_PROG - 1) // N_PER_PROG
    pid_m, pid_g = _tile_ids(NUM_M, NUM_N, GROUP_M)
    if pid_m * BLOCK_M >= tl.load(ntpp_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    slot = tl.load(sorted_ptr + offs_m, mask=offs_m < EM, other=n)
    live = slot < n
    expert = tl.load(eids_ptr + pid_m)
    weight = tl.load(tw_ptr + slot, mask=live, other=0.0)
    offs_k = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + offs_m[:, None].to(tl.int64) * stride_a + offs_k[None, :]
    y_rows = y_ptr + slot[:, None].to(tl.int64) * stride_y
    if BLOCK_K >= INTER:
        a_whole = tl.load(a_rows, mask=live[:, None] & (offs_k[None, :] < INTER), other=0.0)
    for j in range(N_PER_PROG):
        n0 = (pid_g * N_PER_PROG + j) * BLOCK_N
        w_row = expert * H + n0  # the [E*H, I] view of w2; rows past H only feed masked columns
        if BLOCK_K >= INTER:
            # Columns past I are outside the descriptor's view: they arrive as zeros.
            acc = tl.dot(a_whole, w_desc.load([w_row, 0]).T)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            a_ptrs = a_rows
            for k0 in range(0, INTER, BLOCK_K):
                if INTER % BLOCK_K == 0:
                    a = tl.load(a_ptrs, mask=live[:, None], other=0.0)
                else:
                    a = tl.load(a_ptrs, mask=live[:, None] & (offs_k[None, :] < INTER - k0), other=0.0)
                acc = tl.dot(a, w_desc.load([w_row, k0]).T, acc)
                a_ptrs += BLOCK_K
        acc = acc * weight[:, None]
        offs_n = n0 + tl.arange(0, BLOCK_N)
        tl.store(y_rows + offs_n[None, :], acc.to(y_ptr.dtype.element_ty), mask=live[:, None] & (offs_n[None, :] < H))


@triton.jit
def _sum_slots_kernel(y_ptr, out_ptr, H, TOPK: tl.constexpr, K_PAD: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, K_PAD)
    mask = (j[:, None] < TOPK) & (cols[None, :] < H)
    vals = tl.load(y_ptr + (t * TOPK + j[:, None]) * H + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + t * H + cols, tl.sum(vals.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty), mask=cols < H)


# ----------------------------------------------------------------------------- launch table
def _block_m(rows_per_expert: float) -> int:
    """The GEMMs' row tile, which is also the padding of the expert sort.

    Prefill with hundreds of rows per expert: 128-row tiles, both GEMMs compute-bound. Tens of
    rows per expert (a sharded model's skinny experts): 64-row tiles. Decode (a few rows per
    expert): 16-row tiles, the smallest MMA, so padding costs little while the weights stream.
    """
    return 128 if rows_per_expert >= 256 else 64 if rows_per_expert >= 32 else 16


def _cfg(bm: int, bn: int, bk: int, group: int, warps: int, stages: int, per_prog: int | None = None,
         hook=None) -> triton.Config:
    meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group}
    if per_prog is not None:
        meta["N_PER_PROG"] = per_prog
    return triton.Config(meta, num_warps=warps, num_stages=stages, pre_hook=hook)


def _w_box(nargs: dict) -> None:
    """Autotune pre-hook: the weight descriptor's box follows the configuration's tile."""
    nargs["w_desc"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_K"]]


#: Candidates per row tile, all with the row tile the sort padded to, timed on a shape's first
#: call. GEMM1's BLOCK_N counts gate columns (the up tile of the same columns rides along), so
#: its weight box is BLOCK_N x BLOCK_K twice a stage. GEMM2's BLOCK_K = 0 means "the whole
#: intermediate in one step" (the row tile loaded once, the program walking N_PER_PROG column
#: tiles); it is resolved per shape, and dropped where the intermediate is wider than a TMA box.
_GATE_UP_CONFIGS = {
    128: [(128, 128, 64, 8, 8, 4), (128, 128, 64, 8, 8, 3), (128, 64, 64, 8, 4, 4), (128, 64, 128, 8, 8, 3)],
    64: [(64, 64, 128, 4, 4, 4), (64, 128, 64, 4, 8, 4), (64, 64, 64, 4, 4, 6), (64, 128, 64, 8, 8, 3),
         (64, 64, 128, 8, 8, 3)],
    16: [(16, 64, 128, 1, 4, 4), (16, 32, 128, 1, 4, 4), (16, 64, 256, 1, 4, 3), (16, 128, 128, 1, 4, 3)],
}
_DOWN_CONFIGS = {
    128: [(128, 256, 64, 8, 8, 3, 1), (128, 128, 64, 8, 8, 4, 1), (128, 128, 64, 8, 4, 4, 1)],
    64: [(64, 128, 64, 4, 4, 4, 1), (64, 256, 64, 4, 8, 3, 1), (64, 128, 0, 4, 4, 2, 8), (64, 64, 0, 4, 4, 4, 8),
         (64, 128, 0, 4, 8, 2, 4), (64, 64, 0, 4, 4, 4, 16)],
    16: [(16, 64, 128, 1, 4, 4, 1), (16, 128, 128, 1, 4, 4, 1), (16, 64, 256, 1, 4, 3, 1), (16, 128, 256, 1, 4, 2, 1)],
}


def _whole_k(configs: list, named_args: dict, **kwargs) -> list:
    """Early prune for GEMM2: resolve BLOCK_K = 0 to the intermediate's power-of-two width, or
    drop the configuration where that exceeds a TMA box (256 elements)."""
    width = triton.next_power_of_2(named_args.get("INTER", kwargs.get("INTER")))
    kept = []
    for c in configs:
        if c.kwargs["BLOCK_K"] == 0:
            if width > 256:
                continue
            c = triton.Config(dict(c.kwargs, BLOCK_K=max(16, width)), num_warps=c.num_warps,
                              num_stages=c.num_stages, pre_hook=c.pre_hook)
        kept.append(c)
    return kept


#: One autotuner per row tile (the key includes everything a launch's speed depends on).
_GATE_UP_TUNED = {
    bm: triton.autotune(configs=[_cfg(*c, hook=_w_box) for c in cs], key=["INTER", "H", "TOPK", "EM"])(_gate_up_kernel)
    for bm, cs in _GATE_UP_CONFIGS.items()
}
_DOWN_TUNED = {
    bm: triton.autotune(configs=[_cfg(*c, hook=_w_box) for c in cs], key=["INTER", "H", "EM"],
                        prune_configs_by={"early_config_prune": _whole_k})(_down_kernel)
    for bm, cs in _DOWN_CONFIGS.items()
}

#: The interpreter's launches: small tiles; GEMM2 either with the K loop or whole-intermediate
#: (``down_whole_k``), so that CI runs both of its paths.
_CPU_GATE_UP = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, num_warps=4, num_stages=2)


def fused_moe_mlp(
    x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
    down_whole_k: bool = False,
) -> torch.Tensor:
    """x: [T, H]; w13: [E, 2I, H]; w2: [E, H, I]; topk_ids: [T, k] int32; topk_weights: [T, k] fp32.

    ``down_whole_k`` picks GEMM2's whole-intermediate path in the interpreter (on the GPU the
    autotuner picks among both paths and ignores it).
    """
    T, H = x.shape
    E, two_i, _ = w13.shape
    inter_dim = two_i // 2
    k = topk_ids.shape[1]
    n = T * k
    if H % 8 or inter_dim % 8:
        raise ValueError("H and I must be multiples of 8 (16-byte rows for the weight descriptors)")
    x = x.contiguous()
    w13 = w13.contiguous()
    w2 = w2.contiguous()
    ids = topk_ids.reshape(-1).to(torch.int32).contiguous()
    tw = topk_weights.reshape(-1).to(torch.float32).contiguous()
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    if n == 0:
        return out.zero_()
    on_cpu = x.device.type == "cpu"
    bm = _CPU_GATE_UP["BLOCK_M"] if on_cpu else _block_m(n / E)
    sorted_ids, expert_ids, ntpp = _align(ids, bm, E)
    em = sorted_ids.numel()
    inter = torch.empty((em, inter_dim), dtype=x.dtype, device=x.device)
    slot_out = torch.empty((n, H), dtype=x.dtype, device=x.device)
    # Placeholder boxes: the autotuner's pre-hook sets each configuration's own.
    w13_desc = TensorDescriptor.from_tensor(w13.view(E * two_i, H), [16, 16])
    w2_desc = TensorDescriptor.from_tensor(w2.view(E * H, inter_dim), [16, 16])
    args1 = (x, w13_desc, inter, sorted_ids, expert_ids, ntpp, n, x.stride(0), inter.stride(0))
    args2 = (inter, w2_desc, slot_out, sorted_ids, expert_ids, ntpp, tw, n, inter.stride(0), slot_out.stride(0))
    if on_cpu:
        g1 = _CPU_GATE_UP
        _w_box({"w_desc": w13_desc, **g1})
        _gate_up_kernel[(triton.cdiv(em, bm) * triton.cdiv(inter_dim, g1["BLOCK_N"]),)](
            *args1, INTER=inter_dim, H=H, TOPK=k, EM=em, **g1)
        bk = max(16, triton.next_power_of_2(inter_dim)) if down_whole_k else 32
        g2 = dict(BLOCK_M=bm, BLOCK_N=32, BLOCK_K=bk, GROUP_M=2, N_PER_PROG=2 if down_whole_k else 1,
                  num_warps=4, num_stages=2)
        _w_box({"w_desc": w2_desc, **g2})
        groups = triton.cdiv(triton.cdiv(H, g2["BLOCK_N"]), g2["N_PER_PROG"])
        _down_kernel[(triton.cdiv(em, bm) * groups,)](*args2, INTER=inter_dim, H=H, EM=em, **g2)
    else:
        grid1 = lambda meta: (triton.cdiv(em, bm) * triton.cdiv(inter_dim, meta["BLOCK_N"]),)  # noqa: E731
        _GATE_UP_TUNED[bm][grid1](*args1, INTER=inter_dim, H=H, TOPK=k, EM=em)
        grid2 = lambda meta: (  # noqa: E731
            triton.cdiv(em, bm) * triton.cdiv(triton.cdiv(H, meta["BLOCK_N"]), meta["N_PER_PROG"]),)
        _DOWN_TUNED[bm][grid2](*args2, INTER=inter_dim, H=H, EM=em)
    block_h = min(1024, triton.next_power_of_2(H))
    _sum_slots_kernel[(T, triton.cdiv(H, block_h))](
        slot_out, out, H, TOPK=k, K_PAD=triton.next_power_of_2(k), BLOCK_H=block_h, num_warps=4,
    )
    return out
