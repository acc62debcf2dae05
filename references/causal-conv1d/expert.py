"""Expert Triton kernel for T26 ``causal-conv1d``: one pass over channel-last activations.

Each program owns a (time block x channel block) tile of one sequence. Channels are contiguous,
so every load and store is a wide vector over D; the W-1 taps that reach before the tile come
from the rows just above it (L1/L2 hits of the neighbouring tile's data) or, at a sequence start,
from the sequence's conv state. Weights and bias for the channel block are loaded once per tile
and stay in registers. The program that owns a sequence's first time block is the only one that
reads its conv state, so it also writes the new state (after a barrier): no cross-program race.
Tiles never straddle sequences: programs walk ``cu_seqlens`` on the device to find their
sequence, so there is no host synchronisation.

A second kernel reads each input once: a program owns a (time chunk x channel block) strip of one
sequence and walks its rows in order, one row vector at a time, keeping the previous W-1 rows in
registers as a sliding window (the taps), so no row is loaded again for the next tap; only the
W-1 rows before the chunk are read twice. The first call of a shape times both kernels (each
autotuned) and keeps the faster; the conv state is restored after the timing.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _seq_of(tile, cu_ptr, N: tl.constexpr, CHUNK: tl.constexpr, FIXED_LEN: tl.constexpr):
    """(sequence, chunk index in it, first token, length) of ``tile``; chunks are numbered
    sequence after sequence, so with variable lengths the program walks ``cu_seqlens``. A tile
    past the last chunk gets sequence -1."""
    if FIXED_LEN > 0:
        per_seq = tl.cdiv(FIXED_LEN, CHUNK)
        seq = tile // per_seq
        blk = tile - seq * per_seq
        return seq, blk, seq * FIXED_LEN, FIXED_LEN
    seq = -1
    blk = 0
    start = 0
    seqlen = 0
    acc_tiles = 0
    for s in tl.static_range(N):
        a = tl.load(cu_ptr + s)
        b = tl.load(cu_ptr + s + 1)
        nt = tl.cdiv(b - a, CHUNK)
        hit = (tile >= acc_tiles) & (tile < acc_tiles + nt)
        seq = tl.where(hit, s, seq)
        blk = tl.where(hit, tile - acc_tiles, blk)
        start = tl.where(hit, a, start)
        seqlen = tl.where(hit, b - a, seqlen)
        acc_tiles += nt
    return seq, blk, start, seqlen


@triton.jit
def _write_new_state(x_ptr, s_cols, start, seqlen, offs_d, mask_d, stride_x, stride_sw, W: tl.constexpr):
    """Overwrite a sequence's conv state (``s_cols``: its column 0 for each channel of the block)
    with the last W-1 columns of concat(old state, tokens); a sequence shorter than W-1 shifts the
    old state. Called by the one program that also read the old state, so after a barrier that
    orders its reads before the writes, the in-place update is race-free."""
    j = tl.arange(0, 4)
    pos = seqlen - (W - 1) + j  # position in the sequence; < 0 falls back to the old state
    jm = j < W - 1
    from_x = (pos >= 0) & jm
    xs = tl.load(x_ptr + (start + pos).to(tl.int64)[:, None] * stride_x + offs_d[None, :],
                 mask=from_x[:, None] & mask_d[None, :], other=0.0)
    from_s = (pos < 0) & jm
    ss = tl.load(s_cols[None, :] + (pos + (W - 1))[:, None] * stride_sw, mask=from_s[:, None] & mask_d[None, :],
                 other=0.0)
    new = tl.where(from_s[:, None], ss, xs.to(ss.dtype))
    tl.debug_barrier()
    tl.store(s_cols[None, :] + j[:, None] * stride_sw, new, mask=jm[:, None] & mask_d[None, :])


@triton.jit
def _causal_conv1d_fwd_kernel(
    x_ptr, w_ptr, b_ptr, cu_ptr, state_ptr, out_ptr,
    D, stride_x, stride_o,
    stride_sn, stride_sd, stride_sw,
    N: tl.constexpr, W: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, FIXED_LEN: tl.constexpr,
):
    pid_d = tl.program_id(1)
    seq, t_blk, start, seqlen = _seq_of(tl.program_id(0), cu_ptr, N, BLOCK_T, FIXED_LEN)
    # Scalar 64-bit bases, 32-bit offsets inside the tile: keeps per-element address registers low.
    ri = tl.arange(0, BLOCK_T)
    di = tl.arange(0, BLOCK_D)
    offs_t = t_blk * BLOCK_T + ri  # position inside the sequence
    offs_d = pid_d * BLOCK_D + di
    mask_d = offs_d < D
    mask_t = (offs_t < seqlen) & (seq >= 0)
    row0 = (start + t_blk * BLOCK_T).to(tl.int64)
    x_tile = x_ptr + row0 * stride_x + pid_d * BLOCK_D
    bias = tl.load(b_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    acc = tl.zeros((BLOCK_T, BLOCK_D), dtype=tl.float32) + bias[None, :]
    state_base = state_ptr + seq.to(tl.int64) * stride_sn + pid_d * BLOCK_D * stride_sd
    for w in tl.static_range(W):
        wk = tl.load(w_ptr + offs_d * W + w, mask=mask_d, other=0.0).to(tl.float32)
        src = offs_t + (w - (W - 1))  # tap position inside the sequence; < 0 reads the state
        in_x = (src >= 0) & mask_t
        xv = tl.load(x_tile + (ri + (w - (W - 1)))[:, None] * stride_x + di[None, :],
                     mask=in_x[:, None] & mask_d[None, :], other=0.0)
        if w < W - 1:  # noqa: SIM102 (constexpr test, then a runtime one)
            if t_blk == 0:
                in_s = (src < 0) & mask_t
                sv = tl.load(state_base + di[None, :] * stride_sd + (src + (W - 1))[:, None] * stride_sw,
                             mask=in_s[:, None] & mask_d[None, :], other=0.0)
                xv = tl.where(in_s[:, None], sv, xv)
        acc += xv.to(tl.float32) * wk[None, :]
    y = acc / (1.0 + tl.exp2(-acc * 1.4426950408889634))
    tl.store(out_ptr + row0 * stride_o + pid_d * BLOCK_D + ri[:, None] * stride_o + di[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask_t[:, None] & mask_d[None, :])
    if (t_blk == 0) & (seq >= 0):
        _write_new_state(x_ptr, state_base + di * stride_sd, start, seqlen, offs_d, mask_d, stride_x, stride_sw, W)


@triton.jit
def _tap_row(x_ptr, state_base, start, pos, offs_d, mask_d, stride_x, stride_sd, stride_sw,
             W: tl.constexpr):
    """Row ``pos`` of concat(conv state, tokens) for the channel block, in fp32: a token row for
    pos >= 0, the state's column W-1+pos for -(W-1) <= pos < 0, zeros below (unused taps)."""
    xv = tl.load(x_ptr + (start + pos).to(tl.int64) * stride_x + offs_d, mask=mask_d & (pos >= 0), other=0.0)
    sv = tl.load(state_base + offs_d * stride_sd + (pos + (W - 1)) * stride_sw,
                 mask=mask_d & (pos < 0) & (pos >= -(W - 1)), other=0.0)
    return tl.where(pos >= 0, xv.to(tl.float32), sv.to(tl.float32))


@triton.jit
def _silu(a):
    return a / (1.0 + tl.exp2(-a * 1.4426950408889634))


@triton.jit
def _causal_conv1d_rolling_kernel(
    x_ptr, w_ptr, b_ptr, cu_ptr, state_ptr, out_ptr,
    D, stride_x, stride_o,
    stride_sn, stride_sd, stride_sw,
    N: tl.constexpr, W: tl.constexpr, CHUNK: tl.constexpr, BLOCK_D: tl.constexpr, FIXED_LEN: tl.constexpr,
    UNROLL: tl.constexpr,
):
    """One (time chunk x channel block) strip, in order, with a sliding window of W-1 rows in
    registers (see the module docstring). p1, p2, p3 hold rows t-1, t-2, t-3 (W <= 4; the taps a
    narrower filter lacks get weight zero). CHUNK is a multiple of 4."""
    seq, blk, start, seqlen = _seq_of(tl.program_id(0), cu_ptr, N, CHUNK, FIXED_LEN)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_d = offs_d < D
    valid = seq >= 0
    seq_c = tl.maximum(seq, 0)
    state_base = state_ptr + seq_c.to(tl.int64) * stride_sn
    # Taps: weight[d, W-1] multiplies row t, weight[d, W-1-j] row t-j.
    w0 = tl.load(w_ptr + offs_d * W + (W - 1), mask=mask_d, other=0.0).to(tl.float32)
    w1 = tl.load(w_ptr + offs_d * W + (W - 2), mask=mask_d & (W >= 2), other=0.0).to(tl.float32)
    w2 = tl.load(w_ptr + offs_d * W + (W - 3), mask=mask_d & (W >= 3), other=0.0).to(tl.float32)
    w3 = tl.load(w_ptr + offs_d * W + (W - 4), mask=mask_d & (W >= 4), other=0.0).to(tl.float32)
    bias = tl.load(b_ptr + offs_d, mask=mask_d, other=0.0).to(tl.float32)
    t0 = blk * CHUNK
    p1 = _tap_row(x_ptr, state_base, start, t0 - 1, offs_d, mask_d & valid, stride_x, stride_sd, stride_sw, W)
    p2 = _tap_row(x_ptr, state_base, start, t0 - 2, offs_d, mask_d & valid, stride_x, stride_sd, stride_sw, W)
    p3 = _tap_row(x_ptr, state_base, start, t0 - 3, offs_d, mask_d & valid, stride_x, stride_sd, stride_sw, W)
    rows = tl.minimum(seqlen - t0, CHUNK)  # a tile past the last chunk has seqlen 0: no rows
    x_row = x_ptr + (start + t0).to(tl.int64) * stride_x + offs_d
    o_row = out_ptr + (start + t0).to(tl.int64) * stride_o + offs_d
    dt = out_ptr.dtype.element_ty
    # Four rows a step, their loads issued together before any of the step's stores: a load is
    # not moved above an earlier store to memory that may alias it, so a one-row step would have
    # one load in flight per thread. A constant trip count; the last chunk of a sequence masks
    # its missing rows.
    for i in tl.range(0, CHUNK, 4, loop_unroll_factor=UNROLL):
        l0 = mask_d & (i < rows)
        l1 = mask_d & (i + 1 < rows)
        l2 = mask_d & (i + 2 < rows)
        l3 = mask_d & (i + 3 < rows)
        x0 = tl.load(x_row, mask=l0, other=0.0).to(tl.float32)
        x1 = tl.load(x_row + stride_x, mask=l1, other=0.0).to(tl.float32)
        x2 = tl.load(x_row + 2 * stride_x, mask=l2, other=0.0).to(tl.float32)
        x3 = tl.load(x_row + 3 * stride_x, mask=l3, other=0.0).to(tl.float32)
        tl.store(o_row, _silu(bias + w0 * x0 + w1 * p1 + w2 * p2 + w3 * p3).to(dt), mask=l0)
        tl.store(o_row + stride_o, _silu(bias + w0 * x1 + w1 * x0 + w2 * p1 + w3 * p2).to(dt), mask=l1)
        tl.store(o_row + 2 * stride_o, _silu(bias + w0 * x2 + w1 * x1 + w2 * x0 + w3 * p1).to(dt), mask=l2)
        tl.store(o_row + 3 * stride_o, _silu(bias + w0 * x3 + w1 * x2 + w2 * x1 + w3 * x0).to(dt), mask=l3)
        p3 = x1
        p2 = x2
        p1 = x3
        x_row += 4 * stride_x
        o_row += 4 * stride_o
    if (blk == 0) & valid:
        _write_new_state(x_ptr, state_base + offs_d * stride_sd, start, seqlen, offs_d, mask_d, stride_x,
                         stride_sw, W)


#: The interpreter's tile (CPU): 32 x 256, 8 warps.
BLOCK_T, BLOCK_D, NUM_WARPS = 32, 256, 8

#: GPU candidates, timed by the autotuner per shape. The 32 x 256 tile with 8 warps (the only one
#: before session 7) needs 214 registers a thread on sm_90, so one program per SM (12.5%
#: occupancy); Nsight showed it at 23% of DRAM bandwidth on W1 (docs/results/h200-profiles.md).
#: The others hold 8 or 16 elements a thread instead of 32 (106-166 registers for the 16-element
#: ones), for two to four programs per SM.
_GPU_CONFIGS = [
    triton.Config({"BLOCK_T": 32, "BLOCK_D": 256}, num_warps=8),
    triton.Config({"BLOCK_T": 16, "BLOCK_D": 256}, num_warps=8),
    triton.Config({"BLOCK_T": 32, "BLOCK_D": 128}, num_warps=8),
    triton.Config({"BLOCK_T": 16, "BLOCK_D": 128}, num_warps=4),
    triton.Config({"BLOCK_T": 8, "BLOCK_D": 256}, num_warps=8),
]
#: conv_state is updated in place, so every timed trial of the tuner starts from a restored copy.
_causal_conv1d_tuned = triton.autotune(
    configs=_GPU_CONFIGS, key=["D", "N", "FIXED_LEN"], restore_value=["state_ptr"],
)(_causal_conv1d_fwd_kernel)


#: Candidates of the rolling kernel: CHUNK rows a program (the W-1 rows before it are read a second
#: time), BLOCK_D channels over num_warps * 32 threads, 8 channels (16 bytes of bf16) a thread.
_ROLLING_CONFIGS = [
    triton.Config({"CHUNK": 64, "BLOCK_D": 1024, "UNROLL": 1}, num_warps=4),
    triton.Config({"CHUNK": 32, "BLOCK_D": 1024, "UNROLL": 1}, num_warps=4),
    triton.Config({"CHUNK": 64, "BLOCK_D": 512, "UNROLL": 1}, num_warps=2),
    triton.Config({"CHUNK": 128, "BLOCK_D": 1024, "UNROLL": 2}, num_warps=4),
    triton.Config({"CHUNK": 32, "BLOCK_D": 2048, "UNROLL": 1}, num_warps=8),
]
_causal_conv1d_rolling_tuned = triton.autotune(
    configs=_ROLLING_CONFIGS, key=["D", "N", "FIXED_LEN"], restore_value=["state_ptr"],
)(_causal_conv1d_rolling_kernel)

#: Per (T, N, D, W, varlen, dtype, device): "tile" or "rolling", whichever the first call timed faster.
_ROUTE_PICK: dict[tuple, str] = {}
#: What the timed choices above picked, in words, with the times that decided them: the engine
#: reports a module-level ``TIMED_CHOICES`` with each result (docs/bundle-format.md).
TIMED_CHOICES: dict[str, str] = {}


def _grid(T: int, N: int, D: int, fixed: int, rows_key: str):
    """The launch grid of either kernel, from its configuration's rows (``rows_key``) and
    BLOCK_D: (time tiles, channel blocks). With variable lengths the tile count is an upper
    bound (each sequence may end in a partial tile); surplus programs find no sequence."""
    def grid(meta: dict) -> tuple[int, int]:
        bt = meta[rows_key]
        n_tiles = N * triton.cdiv(fixed, bt) if fixed else triton.cdiv(T, bt) + N
        return (n_tiles, triton.cdiv(D, meta["BLOCK_D"]))
    return grid


def _route_timed(routes: dict, key: tuple, conv_state: torch.Tensor):
    """The route of ``routes`` that the first call of shape ``key`` (T, N, D, W, varlen, ...) timed
    fastest (``_fastest``), remembered in ``_ROUTE_PICK``. Every route updates ``conv_state`` in
    place, so it is put back after each warm-up run and each timing: the call that follows starts
    from the caller's state."""
    if key not in _ROUTE_PICK:
        saved = conv_state.clone()
        _ROUTE_PICK[key], times = _fastest(routes, restore=lambda: conv_state.copy_(saved))
        TIMED_CHOICES["route T={} N={} D={} W={} varlen={}".format(*key[:5])] = (
            f"{_ROUTE_PICK[key]} (" + ", ".join(f"{r} {ms * 1e3:.0f} us" for r, ms in times.items()) + ")")
    return routes[_ROUTE_PICK[key]]


def _fastest(routes: dict, warmup: int = 5, restore=None) -> tuple:
    """(name, times in ms) of the fastest of ``routes`` (name -> launch): each route run once first
    (compiled and autotuned outside the timing), then timed in two passes, the second in the
    opposite order, each keeping its faster time. A single pass let one slow timing decide for the
    life of the process (an H100 once timed every route of a shape's first call 30-80% slow, and
    another run one route 70% slow; docs/results/h100.md, session 29). ``restore`` runs after
    each launch or timing of a route that changes an input in place."""
    from triton.testing import do_bench

    for run in routes.values():
        run()
        if restore is not None:
            restore()
    times: dict = {}
    for order in (list(routes), list(reversed(routes))):
        for name in order:
            ms = do_bench(routes[name], warmup=warmup, rep=30)
            if restore is not None:
                restore()
            times[name] = min(ms, times.get(name, ms))
    return min(times, key=times.get), times


def causal_conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, cu_seqlens: torch.Tensor,
    conv_state: torch.Tensor, varlen: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, D] channel-last; weight: [D, W]; bias: [D]; cu_seqlens: [N+1] int32;
    conv_state: [N, D, W-1] (updated in place). Returns (out [T, D], conv_state)."""
    T, D = x.shape
    N = conv_state.shape[0]
    W = weight.shape[1]
    if W > 4 or x.stride(1) != 1 or not weight.is_contiguous():
        raise ValueError("width <= 4, channel-last x and contiguous weight required")
    out = torch.empty_like(x)
    fixed = 0 if varlen else T // N
    args = (x, weight, bias, cu_seqlens, conv_state, out, D, x.stride(0), out.stride(0),
            conv_state.stride(0), conv_state.stride(1), conv_state.stride(2))
    tile_grid = _grid(T, N, D, fixed, "BLOCK_T")
    roll_grid = _grid(T, N, D, fixed, "CHUNK")
    if x.device.type == "cpu":
        # The interpreter runs one fixed configuration of each kernel: the tile kernel on fp16
        # inputs (smoke S2), the rolling one otherwise (S1, S3).
        if x.dtype == torch.float16:
            meta = {"BLOCK_T": BLOCK_T, "BLOCK_D": BLOCK_D}
            _causal_conv1d_fwd_kernel[tile_grid(meta)](*args, N=N, W=W, FIXED_LEN=fixed, num_warps=NUM_WARPS,
                                                       **meta)
        else:
            meta = {"CHUNK": 16, "BLOCK_D": 128, "UNROLL": 1}
            _causal_conv1d_rolling_kernel[roll_grid(meta)](*args, N=N, W=W, FIXED_LEN=fixed, num_warps=4, **meta)
        return out, conv_state
    routes = {
        "tile": lambda: _causal_conv1d_tuned[tile_grid](*args, N=N, W=W, FIXED_LEN=fixed),
        "rolling": lambda: _causal_conv1d_rolling_tuned[roll_grid](*args, N=N, W=W, FIXED_LEN=fixed),
    }
    _route_timed(routes, (T, N, D, W, varlen, x.dtype, x.device), conv_state)()
    return out, conv_state
