"""PyTorch-eager baseline, recurrent fp64 reference and inputs for T25 ``mamba2-ssd-chunk-scan``.

The baseline is the ``ssd_minimal_discrete`` recipe from mamba (segment sums via cumsum and a
masked exp, einsums for the intra-chunk output, the chunk states, the inter-chunk recurrence over
a chunk-level segment-sum matrix and the state-to-output term), in fp32, with softplus, the D skip
and the z gate as separate ops. Fixed-length batches run as one batch; packed variable-length
input loops over the sequences in Python.

The reference is the token-by-token recurrence itself in fp64 (all sequences advanced together,
padded at the end), independent of any chunking.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _segsum(x: torch.Tensor) -> torch.Tensor:
    """[..., T] -> [..., T, T] with out[..., i, j] = sum_{j < k <= i} x[..., k] (i >= j), -inf above."""
    T = x.size(-1)
    cs = torch.cumsum(x, dim=-1)
    out = cs[..., :, None] - cs[..., None, :]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    return out.masked_fill(~mask, -torch.inf)


def _ssd(X, dA, Bh, Ch, init, Q):
    """Chunked SSD of one batch of equal-length sequences (fp32).

    X = x * delta [b, seqlen, h, p]; dA [b, seqlen, h]; Bh, Ch [b, seqlen, h, n]; init [b, h, p, n].
    """
    b, seqlen, h, p = X.shape
    pad = (-seqlen) % Q
    if pad:
        X = F.pad(X, (0, 0, 0, 0, 0, pad))
        dA = F.pad(dA, (0, 0, 0, pad))
        Bh = F.pad(Bh, (0, 0, 0, 0, 0, pad))
        Ch = F.pad(Ch, (0, 0, 0, 0, 0, pad))
    c = X.size(1) // Q
    X = X.reshape(b, c, Q, h, p)
    Bh = Bh.reshape(b, c, Q, h, -1)
    Ch = Ch.reshape(b, c, Q, h, -1)
    A = dA.reshape(b, c, Q, h).permute(0, 3, 1, 2)  # [b, h, c, Q]
    A_cumsum = torch.cumsum(A, dim=-1)
    # 1. intra-chunk (diagonal blocks)
    L = torch.exp(_segsum(A))  # [b, h, c, Q, Q]
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Ch, Bh, L, X)
    # 2. chunk states
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bh, decay_states, X)
    # 3. inter-chunk recurrence
    states = torch.cat([init[:, None], states], dim=1)
    decay_chunk = torch.exp(_segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final = new_states[:, :-1], new_states[:, -1]
    # 4. state -> output
    Y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", Ch, states, torch.exp(A_cumsum))
    Y = (Y_diag + Y_off).reshape(b, c * Q, h, p)[:, :seqlen]
    return Y, final


def mamba2_ssd_chunk_scan(
    x: torch.Tensor, dt: torch.Tensor, dt_bias: torch.Tensor, A: torch.Tensor, B_: torch.Tensor,
    C_: torch.Tensor, D: torch.Tensor, z: torch.Tensor, initial_states: torch.Tensor,
    cu_seqlens: torch.Tensor, chunk_size: int, varlen: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, z: [b, seqlen, h, p]; dt: [b, seqlen, h]; dt_bias, A, D: [h]; B_, C_: [b, seqlen, g, n];
    initial_states: [s, h, p, n] fp32; cu_seqlens: [s+1] over the b*seqlen packed tokens.

    Returns (out [b, seqlen, h, p] in x's dtype, final_states [s, h, p, n] fp32).
    """
    bsz, seqlen, h, p = x.shape
    g = B_.size(2)
    delta = F.softplus(dt.float() + dt_bias.float())
    dA = delta * A.float()
    X = x.float() * delta[..., None]
    Bh = B_.float().repeat_interleave(h // g, dim=2)
    Ch = C_.float().repeat_interleave(h // g, dim=2)
    if not varlen:
        Y, final = _ssd(X, dA, Bh, Ch, initial_states.float(), chunk_size)
    else:
        ys, finals = [], []
        bounds = cu_seqlens.tolist()
        flat = (X.reshape(-1, h, p), dA.reshape(-1, h), Bh.reshape(-1, h, Bh.size(-1)), Ch.reshape(-1, h, Ch.size(-1)))
        for s in range(len(bounds) - 1):
            a, e = bounds[s], bounds[s + 1]
            y_s, f_s = _ssd(*(t[a:e][None] for t in flat), initial_states[s:s + 1].float(), chunk_size)
            ys.append(y_s[0])
            finals.append(f_s)
        Y = torch.cat(ys, dim=0).reshape(bsz, seqlen, h, p)
        final = torch.cat(finals, dim=0)
    y = Y + x.float() * D.float()[:, None]
    out = y * F.silu(z.float())
    return out.to(x.dtype), final


def reference(
    x: torch.Tensor, dt: torch.Tensor, dt_bias: torch.Tensor, A: torch.Tensor, B_: torch.Tensor,
    C_: torch.Tensor, D: torch.Tensor, z: torch.Tensor, initial_states: torch.Tensor,
    cu_seqlens: torch.Tensor, chunk_size: int, varlen: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence token by token in fp64, every sequence advanced together (padded at the end)."""
    bsz, seqlen, h, p = x.shape
    g, n = B_.size(2), B_.size(3)
    f64 = torch.float64
    bounds = cu_seqlens.tolist()
    S = len(bounds) - 1
    lens = [bounds[i + 1] - bounds[i] for i in range(S)]
    Lmax = max(lens)
    delta = F.softplus(dt.to(f64).reshape(-1, h) + dt_bias.to(f64))
    xs, Bs, Cs = x.to(f64).reshape(-1, h, p), B_.to(f64).reshape(-1, g, n), C_.to(f64).reshape(-1, g, n)
    # [S, Lmax, ...] padded with delta = 0 (no decay, no input) after each sequence's end.
    idx = torch.zeros(S, Lmax, dtype=torch.long, device=x.device)
    valid = torch.zeros(S, Lmax, dtype=torch.bool, device=x.device)
    for i in range(S):
        idx[i, :lens[i]] = torch.arange(bounds[i], bounds[i + 1], device=x.device)
        valid[i, :lens[i]] = True
    hg = h // g
    dl = torch.where(valid[..., None], delta[idx], 0.0).reshape(S, Lmax, g, hg)
    Bp, Cp, xp = Bs[idx], Cs[idx], xs[idx].reshape(S, Lmax, g, hg, p)  # B, C stay per group
    decay = torch.exp(dl * A.to(f64).reshape(g, hg))
    state = initial_states.to(f64).reshape(S, g, hg, p, n).clone()
    Y = torch.empty(S, Lmax, g, hg, p, dtype=f64, device=x.device)
    for t in range(Lmax):
        state = state * decay[:, t, :, :, None, None] + \
            (xp[:, t] * dl[:, t, :, :, None])[..., None] * Bp[:, t, :, None, None, :]
        Y[:, t] = torch.einsum("sghpn,sgn->sghp", state, Cp[:, t])
    Y = Y.reshape(S, Lmax, h, p)
    state = state.reshape(S, h, p, n)
    y = torch.empty(bsz * seqlen, h, p, dtype=f64, device=x.device)
    y[idx[valid]] = Y[valid]
    y = (y + xs * D.to(f64)[:, None]).reshape(bsz, seqlen, h, p)
    return y * F.silu(z.to(f64)), state


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """Mamba2-style parameters: A = -exp(A_log) with A_log ~ log U[1, 16], dt_bias such that
    softplus(dt_bias) is log-uniform in [1e-3, 1e-1], raw dt ~ N(0, 0.5); x, z, B, C ~ N(0, 1).
    Varlen: random sequence lengths (chunk boundaries fall inside sequences in the smoke set) and
    random initial states; fixed length: zero initial states."""
    b, seqlen, h, p, g, n, S = (int(params[k]) for k in ("batch", "L", "H", "P", "G", "N", "S"))
    dtype = _DTYPES[params["dtype"]]
    gen = generator

    def randn(*shape: int, std: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device) * std

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=device)

    x = randn(b, seqlen, h, p).to(dtype)
    z = randn(b, seqlen, h, p).to(dtype)
    dt = randn(b, seqlen, h, std=0.5).to(dtype)
    dt0 = torch.exp(rand(h) * (torch.log(torch.tensor(0.1)) - torch.log(torch.tensor(1e-3))) + torch.log(torch.tensor(1e-3)))
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))  # inverse softplus
    A = -(rand(h) * 15.0 + 1.0)
    D = rand(h) + 0.5
    B_ = randn(b, seqlen, g, n).to(dtype)
    C_ = randn(b, seqlen, g, n).to(dtype)
    T = b * seqlen
    if params["varlen"]:
        share = rand(S).double() + 0.5
        lengths = torch.clamp((share / share.sum() * T).floor().long(), min=1)
        if T // S >= 2048 and T % S == 0:
            lengths = torch.full((S,), T // S, device=device, dtype=torch.long)
        lengths[-1] += T - int(lengths.sum())
        cu = torch.zeros(S + 1, dtype=torch.long, device=device)
        cu[1:] = torch.cumsum(lengths, 0)
        init = randn(S, h, p, n, std=0.5)
    else:
        cu = torch.arange(S + 1, device=device, dtype=torch.long) * seqlen
        init = torch.zeros(S, h, p, n, device=device)
    return {"x": x, "dt": dt, "dt_bias": dt_bias.float(), "A": A.float(), "B_": B_, "C_": C_, "D": D.float(),
            "z": z, "initial_states": init.float(), "cu_seqlens": cu.to(torch.int32)}
