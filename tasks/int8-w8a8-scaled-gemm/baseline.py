"""PyTorch-eager baseline, reference and input generator for T13 ``int8-w8a8-scaled-gemm``.

The baseline is what a user writes without an int8 GEMM: convert both int8 operands to the
activation dtype (exact: |code| <= 127), a cuBLAS matmul with fp32 accumulation, then the scales
and the bias as separate elementwise passes over the [M, N] output.
"""

from __future__ import annotations

from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def int8_scaled_mm(A: torch.Tensor, a_s: torch.Tensor, B: torch.Tensor, b_s: torch.Tensor,
                   bias: torch.Tensor, out_dtype: str) -> torch.Tensor:
    """A [M, K] int8, a_s [M, 1], B [N, K] int8, b_s [1, N], bias [N] or [0] -> C [M, N].

    ``out_dtype`` names the output dtype ("bf16", "fp16" or "fp32").
    """
    dtype = DTYPES[out_dtype]
    acc = torch.matmul(A.to(dtype), B.to(dtype).t())
    out = acc.float() * a_s * b_s
    if bias.numel():
        out = out + bias.float()
    return out.to(dtype)


def reference(A: torch.Tensor, a_s: torch.Tensor, B: torch.Tensor, b_s: torch.Tensor,
              bias: torch.Tensor, out_dtype: str) -> torch.Tensor:
    """fp64 evaluation (int8 products and their sums are exact in fp64), in column chunks."""
    M = A.shape[0]
    N = B.shape[0]
    a = A.double()
    out = torch.empty(M, N, dtype=torch.float32, device=A.device)
    chunk = 8192
    for n0 in range(0, N, chunk):
        n1 = min(N, n0 + chunk)
        c = torch.matmul(a, B[n0:n1].double().t()) * a_s.double() * b_s[:, n0:n1].double()
        if bias.numel():
            c = c + bias[n0:n1].double()
        out[:, n0:n1] = c.float()
    return out


def _codes(shape: tuple[int, int], generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Rounded N(0, 32^2) clamped to [-127, 127]: the spread of per-token/per-channel int8 codes."""
    return (torch.randn(shape, generator=generator, device=device) * 32.0).round_().clamp_(-127, 127).to(torch.int8)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    M, N, K = int(params["M"]), int(params["N"]), int(params["K"])
    dtype = DTYPES[params["dtype"]]
    A = _codes((M, K), generator, device)
    B = _codes((N, K), generator, device)
    # acc has a spread of about 32*32*sqrt(K); scales near 1/(32*K^(1/4)) each give O(1) outputs.
    base = 1.0 / (32.0 * K ** 0.25)
    a_s = base * (0.5 + torch.rand(M, 1, generator=generator, device=device))
    b_s = base * (0.5 + torch.rand(1, N, generator=generator, device=device))
    n_bias = N if int(params["has_bias"]) else 0
    bias = torch.randn(n_bias, generator=generator, device=device).to(dtype)
    return {"A": A, "a_s": a_s, "B": B, "b_s": b_s, "bias": bias}
