"""PyTorch-eager baseline, reference and input generator for T12 ``fp8-blockwise-gemm``.

The baseline is what a user writes without a block-scaled GEMM kernel: expand both scale
tensors over their blocks, dequantize both operands to the output dtype and call a bf16 matmul
(cuBLAS, fp32 accumulation). Two full-size dequantized copies and a GEMM at half the fp8 rate.
"""

from __future__ import annotations

from typing import Any

import torch

BLOCK = 128
FP8_MAX = 448.0
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _dequant_a(A: torch.Tensor, A_s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    M, K = A.shape
    s = A_s[:, :M].t()  # logical [M, K/128] view of the column-major buffer
    return (A.to(torch.float32).view(M, K // BLOCK, BLOCK) * s.unsqueeze(-1)).view(M, K).to(dtype)


def _dequant_b(B: torch.Tensor, B_s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    N, K = B.shape
    s = B_s.repeat_interleave(BLOCK, dim=0)[:N].repeat_interleave(BLOCK, dim=1)
    return (B.to(torch.float32) * s).to(dtype)


def fp8_blockwise_gemm(A: torch.Tensor, A_s: torch.Tensor, B: torch.Tensor, B_s: torch.Tensor,
                       out_dtype: str) -> torch.Tensor:
    """A [M, K] fp8, A_s [K/128, M_pad], B [N, K] fp8, B_s [ceil(N/128), K/128] -> C [M, N].

    ``out_dtype`` names the output dtype ("bf16", "fp16" or "fp32").
    """
    dtype = DTYPES[out_dtype]
    a = _dequant_a(A, A_s, dtype)
    b = _dequant_b(B, B_s, dtype)
    return torch.matmul(a, b.t())


def reference(A: torch.Tensor, A_s: torch.Tensor, B: torch.Tensor, B_s: torch.Tensor,
              out_dtype: str) -> torch.Tensor:
    """fp32 GEMM of the fp32-dequantized operands, in column chunks to bound memory."""
    M, K = A.shape
    N = B.shape[0]
    a = _dequant_a(A, A_s, torch.float32)
    out = torch.empty(M, N, dtype=torch.float32, device=A.device)
    chunk = 4096
    for n0 in range(0, N, chunk):
        n1 = min(N, n0 + chunk)
        b = _dequant_b(B[n0:n1], B_s[n0 // BLOCK:(n1 + BLOCK - 1) // BLOCK], torch.float32)
        out[:, n0:n1] = torch.matmul(a, b.t())
    return out


def _quantize_blocks(w: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize w [R, K] to e4m3 with one scale per (rows x 128) block; returns (codes, scales)."""
    R, K = w.shape
    rb = (R + rows - 1) // rows
    pad = torch.zeros(rb * rows, K, dtype=torch.float32, device=w.device)
    pad[:R] = w
    blocks = pad.view(rb, rows, K // BLOCK, BLOCK)
    s = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-10) / FP8_MAX  # [rb, K/128]
    q = (blocks / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(rb * rows, K)[:R].contiguous(), s


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """A: 1x128-quantized N(0, 1) activations; B: 128x128-quantized N(0, 1/K) weights.

    A_s comes in the column-major TMA-aligned buffer with NaN in its padding columns.
    """
    M, N, K = int(params["M"]), int(params["N"]), int(params["K"])
    x = torch.randn(M, K, generator=generator, device=device)
    A, a_s = _quantize_blocks(x, 1)  # a_s [M, K/128]
    del x
    m_pad = (M + 3) // 4 * 4
    A_s = torch.full((K // BLOCK, m_pad), float("nan"), dtype=torch.float32, device=device)
    A_s[:, :M] = a_s.t()
    w = torch.randn(N, K, generator=generator, device=device) * K ** -0.5
    B, B_s = _quantize_blocks(w, BLOCK)
    del w
    return {"A": A, "A_s": A_s, "B": B, "B_s": B_s.contiguous()}
