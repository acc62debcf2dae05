"""PyTorch-eager baseline, reference and input generator for T14 ``w4a16-awq-gemm``.

The baseline is the dequantize-then-matmul a user writes: broadcast shifts to unpack every
nibble into an int32 [K, N] tensor, undo AWQ's column interleave with a gather, do the same for
the zeros, expand zeros and scales over each group with repeat_interleave, form the fp16 weight
and call torch.matmul. Several full-size int32 and fp16 weight intermediates per call.
"""

from __future__ import annotations

from typing import Any

import torch

#: Nibble holding column j of each group of eight (AWQ packs columns [0, 2, 4, 6, 1, 3, 5, 7]).
AWQ_NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _unpack(packed: torch.Tensor) -> torch.Tensor:
    """int32 [R, C] -> int32 [R, 8C] codes in logical column order."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=packed.device)
    nibbles = (packed.unsqueeze(-1) >> shifts) & 0xF  # [R, C, 8], nibble order
    order = torch.tensor(AWQ_NIBBLE, device=packed.device)
    return nibbles[:, :, order].reshape(packed.shape[0], -1)


def awq_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             group_size: int) -> torch.Tensor:
    """x [M, K], qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales [K/G, N] -> out [M, N]."""
    codes = _unpack(qweight)
    zeros = _unpack(qzeros).repeat_interleave(group_size, dim=0)
    s = scales.repeat_interleave(group_size, dim=0)
    w = (codes - zeros).to(x.dtype) * s
    return torch.matmul(x, w)


def reference(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
              group_size: int) -> torch.Tensor:
    """fp32 GEMM on the exactly dequantized weight (small integers times the scale, in fp32)."""
    codes = _unpack(qweight)
    zeros = _unpack(qzeros).repeat_interleave(group_size, dim=0)
    w = (codes - zeros).float() * scales.float().repeat_interleave(group_size, dim=0)
    return torch.matmul(x.float(), w)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    M, N, K, G = int(params["M"]), int(params["N"]), int(params["K"]), int(params["G"])
    dtype = DTYPES[params["dtype"]]
    # Uniform random 32-bit words: every nibble (code or zero point) is uniform over 0..15.
    qweight = torch.randint(-2**31, 2**31, (K, N // 8), generator=generator, device=device, dtype=torch.int32)
    qzeros = torch.randint(-2**31, 2**31, (K // G, N // 8), generator=generator, device=device, dtype=torch.int32)
    # |code - zero| has an rms of about 6.5; scale so that W has a spread of ~1/sqrt(K).
    scales = (0.5 + torch.rand(K // G, N, generator=generator, device=device)) / (6.5 * K ** 0.5)
    x = torch.randn(M, K, generator=generator, device=device)
    return {"x": x.to(dtype), "qweight": qweight, "qzeros": qzeros, "scales": scales.to(dtype)}
