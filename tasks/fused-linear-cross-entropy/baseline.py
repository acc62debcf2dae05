"""PyTorch-eager baseline, reference, input generator and canonical form for T21
``fused-linear-cross-entropy``.

The baseline is the LM-head loss as a training loop writes it: bf16 logits from one matmul,
upcast to fp32, ``F.cross_entropy`` with the ignore index, and autograd's backward into x and W.
It materializes the bf16 and fp32 [BT, V] logits and their fp32 gradient.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def fused_linear_cross_entropy(
    x: torch.Tensor, W: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x: [BT, H]; W: [V, H]; targets: [BT] int64 (-100 = ignore).

    Returns (loss fp32 scalar, dX [BT, H] in x's dtype, dW [V, H] fp32) for a mean loss over the
    non-ignored tokens with upstream gradient 1.
    """
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        wg = W.detach().requires_grad_(True)
        logits = xg @ wg.t()
        loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX)
        loss.backward()
    return loss.detach().float(), xg.grad, wg.grad.float()


#: Tokens per step of the reference: bounds its fp32 [chunk, V] temporaries.
REF_CHUNK = 1024


def reference(
    x: torch.Tensor, W: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ground truth in fp32 (logits never rounded), chunked over tokens to bound memory."""
    BT = x.shape[0]
    Wf = W.float()
    valid_all = targets != IGNORE_INDEX
    n = valid_all.sum().float()
    loss = torch.zeros((), dtype=torch.float64, device=x.device)
    dX = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    dW = torch.zeros(W.shape, dtype=torch.float32, device=x.device)
    for c0 in range(0, BT, REF_CHUNK):
        xc = x[c0:c0 + REF_CHUNK].float()
        tc = targets[c0:c0 + REF_CHUNK]
        valid = tc != IGNORE_INDEX
        safe = torch.where(valid, tc, torch.zeros_like(tc))
        z = xc @ Wf.t()
        lse = torch.logsumexp(z, dim=-1)
        zy = z.gather(1, safe[:, None]).squeeze(1)
        loss += ((lse - zy) * valid).double().sum()
        p = torch.exp(z - lse[:, None])
        p[torch.arange(p.shape[0], device=x.device), safe] -= 1.0
        p *= (valid.float() / n)[:, None]
        dX[c0:c0 + REF_CHUNK] = p @ Wf
        dW += p.t() @ xc
    return (loss / n.double()).float(), dX, dW


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """x ~ N(0, 1), W ~ N(0, 1/H) (logits of unit spread), targets uniform over the vocab with a
    fraction `ignore` set to the ignore index -100."""
    BT, H, V = int(params["BT"]), int(params["H"]), int(params["V"])
    dtype = DTYPES[params["dtype"]]
    x = torch.randn(BT, H, generator=generator, device=device).to(dtype)
    W = (torch.randn(V, H, generator=generator, device=device) / H ** 0.5).to(dtype)
    targets = torch.randint(0, V, (BT,), generator=generator, device=device)
    ignored = torch.rand(BT, generator=generator, device=device) < float(params["ignore"])
    ignored[0] = False  # at least one valid token
    targets = torch.where(ignored, torch.full_like(targets, IGNORE_INDEX), targets)
    return {"x": x, "W": W, "targets": targets}


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """(loss, n_valid * sqrt(H) * dX, n_valid * dW) as floats, after checking that every ignored
    token's dX row is exactly zero.

    The gradients carry the 1/n_valid of the mean and are small (dX ~ 1/(n sqrt(H))); scaling them by
    known factors from the inputs brings their largest entries to order one, so the normalized rule
    max|out - ref| / max(1, max|ref|) compares them relative to their own magnitude.
    """
    loss, dX, dW = outputs
    targets = inputs["targets"].to(dX.device)
    ignored = targets == IGNORE_INDEX
    if bool(ignored.any()):
        bad = dX[ignored] != 0
        if bool(bad.any()):
            raise ValueError(f"dX: {int(bad.any(-1).sum())} ignored tokens have a nonzero gradient row")
    n = float((~ignored).sum())
    H = dX.shape[1]
    return loss.float(), dX.float() * (n * H ** 0.5), dW.float() * n
