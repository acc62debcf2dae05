"""Expert Triton kernel for T26 ``causal-conv1d``: one pass over channel-last activations.

Each program owns a (time block x channel block) tile of one sequence. Channels are contiguous,
so every load and store is a wide vector over D; the W-1 taps that reach before the tile come
from the rows just above it (L1/L2 hits of the neighbouring tile's data) or, at a sequence start,
from the sequence's conv state. Weights and bias for the channel block are loaded once per tile
and stay in registers. The program that owns a sequence's first time block is the only one that
reads its conv state, so it also writes the new state (after a barrier): no cross-program race.
Tiles never straddle sequences: programs walk ``cu_seqlens`` on the device to find their
sequence, so there is no host synchronisation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _causal_conv1d_fwd_kernel(
    x_ptr, w_ptr, b_ptr, cu_ptr, state_ptr, out_ptr,
    D, stride_x, stride_o,
    stride_sn, stride_sd, stride_sw,
    N: tl.constexpr, W: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, FIXED_LEN: tl.constexpr,
):
    tile = tl.program_id(0)
    pid_d = tl.program_id(1)
    if FIXED_LEN > 0:
        tiles_per_seq = tl.cdiv(FIXED_LEN, BLOCK_T)
        seq = tile // tiles_per_seq
        t_blk = tile - seq * tiles_per_seq
        start = seq * FIXED_LEN
        seqlen = FIXED_LEN
    else:
        # Find this tile's sequence: tiles are numbered sequence after sequence.
        seq = -1
        t_blk = 0
        start = 0
        seqlen = 0
        acc_tiles = 0
        for s in tl.static_range(N):
            a = tl.load(cu_ptr + s)
            b = tl.load(cu_ptr + s + 1)
            nt = tl.cdiv(b - a, BLOCK_T)
            hit = (tile >= acc_tiles) & (tile < acc_tiles + nt)
            seq = tl.where(hit, s, seq)
            t_blk = tl.where(hit, tile - acc_tiles, t_blk)
            start = tl.where(hit, a, start)
            seqlen = tl.where(hit, b - a, seqlen)
            acc_tiles += nt
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
        # New state: the last W-1 columns of concat(old state, tokens). Only this program reads
        # the old state, so after a barrier it may overwrite it.
        j = tl.arange(0, 4)
        pos = seqlen - (W - 1) + j  # position in the sequence; < 0 falls back to the old state
        jm = j < W - 1
        from_x = (pos >= 0) & jm
        xs = tl.load(x_ptr + (start + pos).to(tl.int64)[:, None] * stride_x + offs_d[None, :],
                     mask=from_x[:, None] & mask_d[None, :], other=0.0)
        from_s = (pos < 0) & jm
        s_ptrs = state_base + di[None, :] * stride_sd
        ss = tl.load(s_ptrs + (pos + (W - 1))[:, None] * stride_sw,
                     mask=from_s[:, None] & mask_d[None, :], other=0.0)
        new = tl.where(from_s[:, None], ss, xs.to(ss.dtype))
        tl.debug_barrier()
        tl.store(s_ptrs + j[:, None] * stride_sw, new, mask=jm[:, None] & mask_d[None, :])


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

    def grid(meta: dict) -> tuple[int, int]:
        bt = meta["BLOCK_T"]
        n_tiles = N * triton.cdiv(fixed, bt) if fixed else triton.cdiv(T, bt) + N
        return (n_tiles, triton.cdiv(D, meta["BLOCK_D"]))

    args = (x, weight, bias, cu_seqlens, conv_state, out, D, x.stride(0), out.stride(0),
            conv_state.stride(0), conv_state.stride(1), conv_state.stride(2))
    if x.device.type == "cpu":  # the interpreter runs one fixed tile
        meta = {"BLOCK_T": BLOCK_T, "BLOCK_D": BLOCK_D}
        _causal_conv1d_fwd_kernel[grid(meta)](*args, N=N, W=W, FIXED_LEN=fixed, num_warps=NUM_WARPS, **meta)
    else:
        _causal_conv1d_tuned[grid](*args, N=N, W=W, FIXED_LEN=fixed)
    return out, conv_state
