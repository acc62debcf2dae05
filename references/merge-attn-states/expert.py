"""Expert Triton kernel for T06 ``merge-attn-states``: one pass, a block of tokens of one head per program.

Each program takes BLOCK_T consecutive tokens of one head: their lse values are contiguous in the
head-major [H, T] arrays (one coalesced load each), and each token's row of o_a / o_b is D
contiguous elements (16-byte vectors). The two weights are formed once per row in fp32 and
broadcast over D; the infinities are handled with selects, and only differences lse - max are
exponentiated. Traffic is the compulsory one: both parts read once, the result written once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _merge_attn_states_kernel(
    o_ptr, lse_ptr, oa_ptr, lsea_ptr, ob_ptr, lseb_ptr,
    T, D, stride_t, stride_h,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_t = tl.program_id(0)
    h = tl.program_id(1).to(tl.int64)
    toks = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = toks < T
    # lse: head-major, so this block's values are contiguous.
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
    offs = toks.to(tl.int64)[:, None] * stride_t + h * stride_h + cols[None, :]
    mask = tmask[:, None] & (cols[None, :] < D)
    xa = tl.load(oa_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    xb = tl.load(ob_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    out = xa * (w_a * inv)[:, None] + xb * (w_b * inv)[:, None]
    tl.store(o_ptr + offs, out.to(o_ptr.dtype.element_ty), mask=mask)


#: Rows per program, tuned on the device at the first call (the warm-up): 8 to 32 KB of each input
#: per program; many rows in flight matter more than arithmetic occupancy.
_merge_attn_states_tuned = triton.autotune(
    configs=[
        triton.Config({"BLOCK_T": 16}, num_warps=4),
        triton.Config({"BLOCK_T": 32}, num_warps=4),
        triton.Config({"BLOCK_T": 64}, num_warps=8),
        triton.Config({"BLOCK_T": 128}, num_warps=8),
    ],
    key=["T", "D"],
)(_merge_attn_states_kernel)


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
    args = (o, lse, o_a, lse_a, o_b, lse_b, T, D, o_a.stride(0), o_a.stride(1))
    if o.device.type == "cpu":  # Triton's interpreter: one configuration
        _merge_attn_states_kernel[(triton.cdiv(T, 16), H)](*args, BLOCK_T=16, BLOCK_D=block_d, num_warps=4)
    else:
        _merge_attn_states_tuned[lambda m: (triton.cdiv(T, m["BLOCK_T"]), H)](*args, BLOCK_D=block_d)
    return o, lse
