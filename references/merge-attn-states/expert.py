"""Expert Triton kernel for T06 ``merge-attn-states``: one pass, a block of rows per program.

Each program takes BLOCK_T rows (a row: one token of one head, D contiguous elements, 16-byte
vectors). The two weights are formed once per row in fp32 and broadcast over D; the infinities
are handled with selects, and only differences lse - max are exponentiated. Traffic is the
compulsory one: both parts read once, the result written once.

Which rows a program owns and in what order programs are launched (``ORDER``):

- 0 (the interpreter's, and the original GPU candidates): BLOCK_T consecutive tokens of one head,
  token blocks on grid axis 0 (which varies fastest in launch order), heads on axis 1. Their lse
  values are contiguous in the head-major [H, T] arrays (one coalesced load each), but programs
  launched together read rows of one head, a whole token (H*D elements) apart.
- 1: the same blocks on one grid axis, heads fastest: the H programs of a token block, launched
  together, read its BLOCK_T whole tokens between them, a contiguous span.
- 2: BLOCK_T consecutive rows of the token-major [T*H, D] view (row r: token r // H, head r % H),
  each program one contiguous span, programs walking memory linearly as Inductor's pointwise
  kernel does; the lse loads and stores are gathers (4 bytes per row of 2*D elements read).

On the GPU an autotuner times the four ORDER 0 tiles used so far and one tile each in ORDER 1 and
2 per shape, and keeps the fastest: the choice is picked by timing on the GPU.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_attn_states_kernel(
    o_ptr, lse_ptr, oa_ptr, lsea_ptr, ob_ptr, lseb_ptr,
    T, H, D, stride_t, stride_h,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, ORDER: tl.constexpr,
):
    if ORDER == 2:
        r = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
        toks = r // H
        h = r % H
        tmask = toks < T
    else:
        if ORDER == 0:
            pid_t = tl.program_id(0)
            h = tl.program_id(1).to(tl.int64)
        else:
            pid_t = tl.program_id(0) // H
            h = (tl.program_id(0) % H).to(tl.int64)
        toks = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
        tmask = toks < T
    # lse: head-major; in ORDER 0 and 1 this block's values are contiguous.
    a = tl.load(lsea_ptr + h * T + toks, mask=tmask, other=float("-inf"))
    b = tl.load(lseb_ptr + h * T + toks, mask=tmask, other=float("-inf"))
    a = tl.where(a == float("inf"), float("-inf"), a)
    b = tl.where(b == float("inf"), float("-inf"), b)
    m = tl.maximum(a, b)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w_a = tl.exp(a - m_safe)  # exactly 1 for the larger side, 0 for an empty one
    w_b = tl.exp(b - m_safe)
    total = w_a + w_b
    nonempty = total > 0.0
    inv = tl.where(nonempty, 1.0 / tl.where(nonempty, total, 1.0), 0.0)
    tl.store(lse_ptr + h * T + toks, tl.where(nonempty, m_safe + tl.log(tl.where(nonempty, total, 1.0)),
                                               float("-inf")), mask=tmask)

    cols = tl.arange(0, BLOCK_D)
    head_off = (h * stride_h)[:, None] if ORDER == 2 else h * stride_h  # a row vector, or one head's scalar
    offs = toks.to(tl.int64)[:, None] * stride_t + head_off + cols[None, :]
    mask = tmask[:, None] & (cols[None, :] < D)
    xa = tl.load(oa_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    xb = tl.load(ob_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    out = xa * (w_a * inv)[:, None] + xb * (w_b * inv)[:, None]
    tl.store(o_ptr + offs, out.to(o_ptr.dtype.element_ty), mask=mask)


#: GPU candidates, timed by the autotuner per shape at the first call (the warm-up). The four
#: ORDER 0 tiles (8 to 32 KB of each input a program) are the ones tuned before; ORDER 1 and 2
#: change only the order in which memory is walked (see the module docstring).
GPU_CONFIGS = [
    triton.Config({"BLOCK_T": 16, "ORDER": 0}, num_warps=4),
    triton.Config({"BLOCK_T": 32, "ORDER": 0}, num_warps=4),
    triton.Config({"BLOCK_T": 64, "ORDER": 0}, num_warps=8),
    triton.Config({"BLOCK_T": 128, "ORDER": 0}, num_warps=8),
    triton.Config({"BLOCK_T": 16, "ORDER": 1}, num_warps=4),
    triton.Config({"BLOCK_T": 32, "ORDER": 2}, num_warps=4),
]
_merge_attn_states_tuned = triton.autotune(configs=GPU_CONFIGS, key=["T", "H", "D"])(_merge_attn_states_kernel)


def merge_grid(T: int, H: int) -> Callable[[dict], tuple[int, ...]]:
    """The launch grid of a configuration: ORDER 0 (token blocks, heads); ORDER 1 the same
    programs on one axis, heads fastest; ORDER 2 one program per BLOCK_T rows of [T*H, D]."""
    def grid(meta: dict) -> tuple[int, ...]:
        if meta["ORDER"] == 2:
            return (triton.cdiv(T * H, meta["BLOCK_T"]),)
        n_t = triton.cdiv(T, meta["BLOCK_T"])
        return (n_t, H) if meta["ORDER"] == 0 else (n_t * H,)
    return grid


def merge_attn_states(
    o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """o_a, o_b: [T, H, D] ; lse_a, lse_b: [H, T] fp32 contiguous.

    Returns (o [T, H, D] in o_a's dtype, lse [H, T] fp32).
    """
    if o_a.shape != o_b.shape or o_a.dim() != 3:
        raise ValueError(f"bad shapes o_a={tuple(o_a.shape)} o_b={tuple(o_b.shape)}")
    T, H, D = o_a.shape
    if lse_a.shape != (H, T) or lse_b.shape != (H, T):
        raise ValueError(f"lse must be [H, T] = {(H, T)}, got {tuple(lse_a.shape)} and {tuple(lse_b.shape)}")
    o_a, o_b = o_a.contiguous(), o_b.contiguous()
    lse_a, lse_b = lse_a.contiguous(), lse_b.contiguous()
    o = torch.empty((T, H, D), dtype=o_a.dtype, device=o_a.device)
    lse = torch.empty((H, T), dtype=torch.float32, device=o_a.device)
    if T == 0 or H == 0:
        return o, lse
    block_d = triton.next_power_of_2(D)
    args = (o, lse, o_a, lse_a, o_b, lse_b, T, H, D, o_a.stride(0), o_a.stride(1))
    grid = merge_grid(T, H)
    if o.device.type == "cpu":  # Triton's interpreter: one configuration
        meta = {"BLOCK_T": 16, "ORDER": 0}
        _merge_attn_states_kernel[grid(meta)](*args, BLOCK_D=block_d, num_warps=4, **meta)
    else:
        _merge_attn_states_tuned[grid](*args, BLOCK_D=block_d)
    return o, lse
