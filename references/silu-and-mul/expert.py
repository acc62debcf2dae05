"""Expert Triton kernel for T16 ``silu-and-mul``: one fused pass over gate and up.

A program owns a tile of ``ROWS x BLOCK_D`` outputs and reads the two matching input streams
(gate at column c, up at column c + d), so every byte is read once and the result written once:
3 units of traffic against eager's 5, in one launch instead of two. Short rows (the MoE
intermediate, d = 768) get several rows per program so that programs stay large.

On the GPU the launch is picked by timing, on the first call of each row length d, among a few
candidates (``_candidates``) that always include the fixed launch used before (``_launch_config``).
The others change the program order (``COLS_FIRST``: a flat grid in which the column blocks of a
row block are adjacent programs, so consecutive programs read consecutive addresses as
torch.compile's pointwise kernels do, instead of row blocks varying fastest and consecutive
programs reading a whole row apart), the elements a thread holds, the tile (1024 outputs on
4 warps, torch.compile's pointwise block), or whether the loads carry the evict-first hint
(torch.compile's do not). Where the tiles cover the tensor exactly, nothing is masked (``EVEN``).
The CPU interpreter runs the fixed launch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.heuristics({"EVEN": lambda a: a["T"] % a["ROWS"] == 0 and a["d"] % a["BLOCK_D"] == 0})
@triton.jit
def _silu_and_mul_fwd_kernel(
    x_ptr, out_ptr, T, d, stride_x, stride_o,
    ROWS: tl.constexpr, BLOCK_D: tl.constexpr, COLS_FIRST: tl.constexpr = 0, EVEN: tl.constexpr = 0,
    HINT: tl.constexpr = 1,
):
    # EVEN (set from the shape, never tuned): the tiles cover [T, d] exactly, so no load or store
    # is masked, as in torch.compile's kernel of the same op when its block divides the size.
    # HINT: the inputs are read with the evict-first hint (each byte is read once).
    # Row block and column block: axes 0 and 1 of a 2D grid (row blocks vary fastest), or, with
    # COLS_FIRST, split from one flat program id so that a row block's column blocks are adjacent.
    rows = tl.program_id(0)
    col_blk = tl.program_id(1)
    if COLS_FIRST:
        n_col_blks = tl.cdiv(d, BLOCK_D)
        col_blk = rows % n_col_blks
        rows = rows // n_col_blks
    rows = rows.to(tl.int64) * ROWS + tl.arange(0, ROWS).to(tl.int64)
    cols = col_blk * BLOCK_D + tl.arange(0, BLOCK_D)
    gate_ptrs = x_ptr + rows[:, None] * stride_x + cols[None, :]
    out_ptrs = out_ptr + rows[:, None] * stride_o + cols[None, :]
    if EVEN:
        if HINT:
            g = tl.load(gate_ptrs, eviction_policy="evict_first")
            u = tl.load(gate_ptrs + d, eviction_policy="evict_first")
        else:
            g = tl.load(gate_ptrs)
            u = tl.load(gate_ptrs + d)
    else:
        mask = (rows[:, None] < T) & (cols[None, :] < d)
        if HINT:
            g = tl.load(gate_ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
            u = tl.load(gate_ptrs + d, mask=mask, other=0.0, eviction_policy="evict_first")
        else:
            g = tl.load(gate_ptrs, mask=mask, other=0.0)
            u = tl.load(gate_ptrs + d, mask=mask, other=0.0)
    g = g.to(tl.float32)
    # silu(g) = g * sigmoid(g), with the exponential in base 2 (one MUFU op).
    act = g / (1.0 + tl.exp2(-g * 1.4426950408889634))
    res = (act * u.to(tl.float32)).to(out_ptr.dtype.element_ty)
    if EVEN:
        tl.store(out_ptrs, res)
    else:
        tl.store(out_ptrs, res, mask=mask)


def _launch_config(d: int) -> tuple[int, int, int]:
    """(rows per program, column block, warps): the fixed launch, which the interpreter runs and
    which is the first GPU candidate.

    Column block: the largest power of two up to 2048 that divides d (no masked lanes), else the
    next power of two. A sweep on the H200 (2026-12-02, docs/results/tune-norm-act-h200.txt)
    put one row of 2048 columns with 8 warps within 1% of the best for d = 14336 and 28672, and
    two rows of 256 with 4 warps within 1% of the best for d = 768.
    """
    block_d = 2048
    while block_d > 128 and d % block_d:
        block_d //= 2
    if d % block_d:
        block_d = min(2048, triton.next_power_of_2(d))
    rows = 1 if block_d >= 2048 else 2
    num_warps = 8 if rows * block_d >= 2048 else 4
    return rows, block_d, num_warps


def _tile_key(d: int) -> tuple[int, int]:
    """What the candidates of d depend on: the fixed launch's column block, and the row padded to
    a power of two when several such blocks make up a short row (else 0)."""
    block_d = _launch_config(d)[1]
    full = triton.next_power_of_2(d)
    return block_d, (full if block_d < full <= 1024 else 0)


def _candidates_of(block_d: int, full: int) -> list[triton.Config]:
    """The GPU candidates of one ``_tile_key``. Each is there because:

    1. the fixed launch (``_launch_config``), row blocks fastest: so the pick is never slower
       than before beyond timing noise;
    2. the same tile with column blocks fastest: the program order alone;
    3. the same tile and order with half the warps: twice the elements (and bytes in flight) a
       thread, 16-byte vectors where the fixed launch of d = 768 has 8-byte ones;
    4. 1024-output programs on 4 warps, column blocks fastest: torch.compile's pointwise block
       (a row slice of 1024 for long rows, 1024 // BLOCK_D rows of BLOCK_D for short ones);
    5. for a short row cut into several column blocks (d = 768: three of 256), whole rows padded
       to a power of two, 1024 outputs a program: every program reads whole rows;
    6. 2 and 4 again without the evict-first hint on the loads, as torch.compile's kernel reads
       (it ran 2% faster than the pick among 1-5 at d = 14336 and 28672 on an H100, session 19;
       with these candidates the tuner took an unhinted launch at all three real workloads and
       the expert tied torch.compile, session 34: docs/results/h100-runs/s34-ab-silu-unhinted.md).
    """
    rows, _, warps = _launch_config(block_d)  # d = block_d has the same fixed launch
    bd = min(block_d, 1024)
    order = (rows, block_d, warps, 1)
    compile_like = (max(1, 1024 // bd), bd, 4, 1)
    picks = [(rows, block_d, warps, 0), order, (rows, block_d, max(1, warps // 2), 1), compile_like]
    if full:
        picks.append((max(1, 1024 // full), full, 4, 0))
    configs = [triton.Config({"ROWS": r, "BLOCK_D": b, "COLS_FIRST": c}, num_warps=w)
               for r, b, w, c in dict.fromkeys(picks)]
    return configs + [triton.Config({"ROWS": r, "BLOCK_D": b, "COLS_FIRST": c, "HINT": 0}, num_warps=w)
                      for r, b, w, c in dict.fromkeys([order, compile_like])]


def _candidates(d: int) -> list[triton.Config]:
    """The GPU candidates for rows of length d, the fixed launch first."""
    return _candidates_of(*_tile_key(d))


#: One autotuner per candidate list (per ``_tile_key``), built on first use; each tunes per d
#: (the dtype joins the key on its own). A call is a pure function of x, so the timed trials need
#: no restore.
_TUNED: dict[tuple[int, int], Callable] = {}


def _tuned(d: int) -> Callable:
    key = _tile_key(d)
    if key not in _TUNED:
        _TUNED[key] = triton.autotune(configs=_candidates_of(*key), key=["d"])(_silu_and_mul_fwd_kernel)
    return _TUNED[key]


def _grid(T: int, d: int) -> Callable[[dict], tuple[int, ...]]:
    """The launch grid of a configuration: (row blocks, column blocks), or with COLS_FIRST one
    flat axis of row blocks x column blocks."""
    def grid(meta: dict) -> tuple[int, ...]:
        n_rows, n_cols = triton.cdiv(T, meta["ROWS"]), triton.cdiv(d, meta["BLOCK_D"])
        return (n_rows * n_cols,) if meta["COLS_FIRST"] else (n_rows, n_cols)
    return grid


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x: [T, 2d] (rows contiguous), gate then up in each row. Returns silu(gate) * up, [T, d]."""
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x must be [T, 2d], got {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("rows of x must be contiguous")
    T, two_d = x.shape
    d = two_d // 2
    out = torch.empty((T, d), dtype=x.dtype, device=x.device)
    if T == 0 or d == 0:
        return out
    args = (x, out, T, d, x.stride(0), out.stride(0))
    if x.device.type == "cpu":  # the interpreter: the fixed launch
        rows, block_d, num_warps = _launch_config(d)
        meta = {"ROWS": rows, "BLOCK_D": block_d, "COLS_FIRST": 0}
        _silu_and_mul_fwd_kernel[_grid(T, d)(meta)](*args, num_warps=num_warps, **meta)
    else:
        _tuned(d)[_grid(T, d)](*args)
    return out
