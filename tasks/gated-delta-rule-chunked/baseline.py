"""PyTorch-eager baseline, exact fp64 references and inputs for T24 ``gated-delta-rule-chunked``.

The baseline is flash-linear-attention's chunked reference for the gated delta rule, in fp32:
l2-normalized q and k, chunks of 64, the gate cumsum, the masked K·Kᵀ, a row loop for the
triangular inverse, the WY products, then a Python loop over chunks carrying the state. Grouped
value heads expand q and k by repetition; packed variable-length input loops over sequences.

The reference is the delta rule solved exactly chunk by chunk in fp64 (all sequences advanced
together): within a chunk of 64 tokens the unit lower triangular system of the WY/UT form is solved
directly, and only the chunk states are carried sequentially. That is the same function as the
token-by-token recurrence, up to fp64 rounding; the recurrence is kept as ``recurrent_reference``,
the definition, and tests/tasks/test_gated_delta_reference.py checks the two against each other.
Why not the recurrence itself: at 65,536 tokens (W3) it is 65,536 sequential steps of about ten
small kernels, ~30 s per call on the H200, and the judge calls the reference for every correctness
trial and for sampled timed calls; the chunk-wise form takes 64x fewer sequential steps.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

CHUNK = 64
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


@torch.compiler.disable
def _recurrence(q, k, u, w, g, decay, state):
    """The sequential sweep over the chunks, carrying the state. Kept out of torch.compile:
    unrolling up to 1024 chunk steps would only add minutes of compile time."""
    b, h, n = q.shape[:3]
    dv = u.size(-1)
    o = torch.zeros(b, h, n, CHUNK, dv, dtype=q.dtype, device=q.device)
    upper = torch.triu(torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device), diagonal=1)
    S = state
    for i in range(n):
        q_i, k_i, g_i = q[:, :, i], k[:, :, i], g[:, :, i]
        a = (q_i @ k_i.transpose(-1, -2) * decay[:, :, i]).masked_fill(upper, 0)
        v_new = u[:, :, i] - w[:, :, i] @ S
        o[:, :, i] = (q_i * g_i.exp()[..., None]) @ S + a @ v_new
        S = S * g_i[..., -1, None, None].exp() + (k_i * (g_i[..., -1:] - g_i).exp()[..., None]).transpose(-1, -2) @ v_new
    return o, S


def _chunk_gdr(q, k, v, g, beta, scale, state):
    """One batch of equal-length sequences, fp32. q, k: [b, h, t, dk]; v: [b, h, t, dv];
    g, beta: [b, h, t]; state: [b, h, dk, dv]. Returns (o [b, h, t, dv], final state)."""
    b, h, t, dk = q.shape
    dv = v.size(-1)
    pad = (-t) % CHUNK
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = q.size(2) // CHUNK
    q = q * scale
    k_beta = k * beta[..., None]
    v = v * beta[..., None]
    q, k, v, k_beta = (x.reshape(b, h, n, CHUNK, -1) for x in (q, k, v, k_beta))
    g = g.reshape(b, h, n, CHUNK).cumsum(-1)
    upper_incl = torch.triu(torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device), diagonal=0)
    decay = (g[..., :, None] - g[..., None, :]).tril().exp().tril()
    attn = -((k_beta @ k.transpose(-1, -2)) * decay).masked_fill(upper_incl, 0)
    for i in range(1, CHUNK):  # (I + A)^-1 by forward substitution, row by row
        attn[..., i, :i] = attn[..., i, :i].clone() + (attn[..., i, :i, None].clone() * attn[..., :i, :i].clone()).sum(-2)
    attn = attn + torch.eye(CHUNK, dtype=attn.dtype, device=q.device)
    u = attn @ v
    w = attn @ (k_beta * g.exp()[..., None])
    o, S = _recurrence(q, k, u, w, g, decay, state)
    return o.reshape(b, h, n * CHUNK, dv)[:, :, :t], S


def gated_delta_rule_chunked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    initial_state: torch.Tensor, cu_seqlens: torch.Tensor, scale: float, varlen: int, n_final: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k: [B, T, H, K]; v: [B, T, HV, V]; g (fp32), beta: [B, T, HV]; initial_state: [NI, HV, K, V]
    fp32 (NI = 0: zeros); cu_seqlens: [N+1] over the B*T packed tokens.

    Returns (o [B, T, HV, V], final_state [n_final, HV, K, V] fp32; n_final = 0: not returned).
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    rep = HV // H
    qf = _l2norm(q.float()).repeat_interleave(rep, dim=2)
    kf = _l2norm(k.float()).repeat_interleave(rep, dim=2)
    vf, gf, bf = v.float(), g.float(), beta.float()
    N = cu_seqlens.numel() - 1
    init = initial_state.float() if initial_state.size(0) else torch.zeros(N, HV, K, V, device=q.device)
    if not varlen:
        o, S = _chunk_gdr(*(x.transpose(1, 2) for x in (qf, kf, vf, gf, bf)), scale, init)
        o = o.transpose(1, 2)
    else:
        outs, finals = [], []
        bounds = cu_seqlens.tolist()
        flat = [x.reshape(B * T, *x.shape[2:]) for x in (qf, kf, vf, gf, bf)]
        for s in range(N):
            a, e = bounds[s], bounds[s + 1]
            seg = [x[a:e].transpose(0, 1)[None] for x in flat]
            o_s, S_s = _chunk_gdr(*seg, scale, init[s:s + 1])
            outs.append(o_s[0].transpose(0, 1))
            finals.append(S_s)
        o = torch.cat(outs, dim=0).reshape(B, T, HV, V)
        S = torch.cat(finals, dim=0)
    final = S if n_final else S[:0]
    return o.to(q.dtype), final.contiguous()


def _sequence_index(cu_seqlens: torch.Tensor, multiple: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The packed token index of every sequence's steps, [N, L], and which steps are real: the
    references advance all sequences together, padded at the end to the longest one, rounded up to
    ``multiple``. A padded step points at token 0; the references make it the identity."""
    bounds = cu_seqlens.tolist()
    N = len(bounds) - 1
    lens = [bounds[i + 1] - bounds[i] for i in range(N)]
    L = -(-max(lens) // multiple) * multiple
    idx = torch.zeros(N, L, dtype=torch.long, device=dev)
    valid = torch.zeros(N, L, dtype=torch.bool, device=dev)
    for i in range(N):
        idx[i, :lens[i]] = torch.arange(bounds[i], bounds[i + 1], device=dev)
        valid[i, :lens[i]] = True
    return idx, valid


def recurrent_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    initial_state: torch.Tensor, cu_seqlens: torch.Tensor, scale: float, varlen: int, n_final: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition: the delta rule token by token in fp64, every sequence advanced together
    (padded at the end). Too slow to be the judge's reference at long lengths; see ``reference``."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    f64 = torch.float64
    dev = q.device
    idx, valid = _sequence_index(cu_seqlens, 1, dev)
    N, Lmax = idx.shape
    rep = HV // H
    qs = _l2norm(q.to(f64).reshape(B * T, H, K)).repeat_interleave(rep, dim=1)[idx] * scale
    ks = _l2norm(k.to(f64).reshape(B * T, H, K)).repeat_interleave(rep, dim=1)[idx]
    vs = v.to(f64).reshape(B * T, HV, V)[idx]
    alpha = torch.where(valid[..., None], torch.exp(g.to(f64).reshape(B * T, HV)[idx]), 1.0)
    bet = torch.where(valid[..., None], beta.to(f64).reshape(B * T, HV)[idx], 0.0)
    S = initial_state.to(f64).clone() if initial_state.size(0) else torch.zeros(N, HV, K, V, dtype=f64, device=dev)
    out = torch.empty(N, Lmax, HV, V, dtype=f64, device=dev)
    for t in range(Lmax):
        S = S * alpha[:, t, :, None, None]
        kt = ks[:, t]
        vt = bet[:, t, :, None] * (vs[:, t] - torch.einsum("nhkv,nhk->nhv", S, kt))
        S = S + kt[..., None] * vt[:, :, None, :]
        out[:, t] = torch.einsum("nhkv,nhk->nhv", S, qs[:, t])
    o = torch.empty(B * T, HV, V, dtype=f64, device=dev)
    o[idx[valid]] = out[valid]
    final = S if n_final else S[:0]
    return o.reshape(B, T, HV, V), final


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    initial_state: torch.Tensor, cu_seqlens: torch.Tensor, scale: float, varlen: int, n_final: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same function as ``recurrent_reference``, solved exactly chunk by chunk in fp64.

    Take one chunk, one sequence and value head, with incoming state S0 and Γ_i = g_1 + ... + g_i
    the chunk's cumulative log decay through token i. The state token i's update acts on (after its
    decay) is e^{Γ_i} S0 + Σ_{j<i} e^{Γ_i - Γ_j} k_j ṽ_jᵀ, so ṽ_i = β_i (v_i - (that state)ᵀ k_i) reads

        ṽ_i + Σ_{j<i} β_i (k_i·k_j) e^{Γ_i - Γ_j} ṽ_j = β_i v_i - β_i e^{Γ_i} S0ᵀ k_i,

    i.e. (I + A) Ṽ = diag(β) V - diag(β e^Γ) K S0 with A strictly lower triangular. Solving the unit
    triangular system once for both right-hand sides, U = (I + A)^-1 diag(β) V and
    W = (I + A)^-1 diag(β e^Γ) K, neither of which depends on S0, gives Ṽ = U - W S0. Then
    o_i = e^{Γ_i} S0ᵀ q_i + Σ_{j<=i} e^{Γ_i - Γ_j} (q_i·k_j) ṽ_j and the outgoing state is
    e^{Γ_C} S0 + Σ_j e^{Γ_C - Γ_j} k_j ṽ_jᵀ. Everything but this last update is computed for all
    chunks at once; the sweep over chunks is the only sequential part. Steps past a sequence's end
    (padding up to the longest sequence, then to a whole chunk) have g = 0 and β = 0: their row of A
    and of the right-hand side is zero, so ṽ = 0 and the step is the identity, as in the recurrence.
    """
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    f64 = torch.float64
    dev = q.device
    C = CHUNK
    idx, valid = _sequence_index(cu_seqlens, C, dev)
    N, L = idx.shape
    n = L // C
    rep = HV // H

    def chunked(x: torch.Tensor) -> torch.Tensor:  # [N, L, HV, D] -> [n, N, HV, C, D], chunks contiguous
        return x.reshape(N, n, C, HV, x.size(-1)).permute(1, 0, 3, 2, 4).contiguous()

    qs = chunked(_l2norm(q.to(f64).reshape(B * T, H, K)).repeat_interleave(rep, dim=1)[idx] * scale)
    ks = chunked(_l2norm(k.to(f64).reshape(B * T, H, K)).repeat_interleave(rep, dim=1)[idx])
    vs = chunked(v.to(f64).reshape(B * T, HV, V)[idx])
    gs = chunked(torch.where(valid[..., None], g.to(f64).reshape(B * T, HV)[idx], 0.0)[..., None])[..., 0]
    bs = chunked(torch.where(valid[..., None], beta.to(f64).reshape(B * T, HV)[idx], 0.0)[..., None])
    G = gs.cumsum(-1)  # [n, N, HV, C]
    causal = torch.ones(C, C, dtype=torch.bool, device=dev).tril()
    # e^{Γ_i - Γ_j} on and below the diagonal, 0 above it (masked before exp: Γ_i - Γ_j > 0 there)
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    eG = G.exp()[..., None]
    A = (bs * (ks @ ks.transpose(-1, -2)) * decay).tril(-1)
    eye = torch.eye(C, dtype=f64, device=dev)
    UW = torch.linalg.solve_triangular(eye + A, torch.cat([bs * vs, bs * eG * ks], -1), upper=False,
                                       unitriangular=True)
    U, W = UW[..., :V], UW[..., V:]
    P = (qs @ ks.transpose(-1, -2)) * decay  # intra-chunk causal scores, diagonal included
    Qd = qs * eG  # reads the incoming state
    Kd = ks * (G[..., -1:] - G).exp()[..., None]  # writes the outgoing state
    gC = G[..., -1].exp()[..., None, None]
    del qs, ks, vs, bs, A, UW, decay
    S = initial_state.to(f64).clone() if initial_state.size(0) else torch.zeros(N, HV, K, V, dtype=f64, device=dev)
    out = torch.empty(n, N, HV, C, V, dtype=f64, device=dev)
    for c in range(n):
        vn = U[c] - W[c] @ S
        out[c] = Qd[c] @ S + P[c] @ vn
        S = S * gC[c] + Kd[c].transpose(-1, -2) @ vn
    out = out.permute(1, 0, 3, 2, 4).reshape(N, L, HV, V)
    o = torch.empty(B * T, HV, V, dtype=f64, device=dev)
    o[idx[valid]] = out[valid]
    final = S if n_final else S[:0]
    return o.reshape(B, T, HV, V), final


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """Qwen3-Next-style GDN inputs: q, k, v ~ N(0, 1); g = -exp(A_log) * softplus(a + dt_bias) with
    A_log ~ log U[1, 16] per value head and softplus(dt_bias) log-uniform in [1e-3, 1e-1]; beta =
    sigmoid(N(0, 1)). Varlen: random lengths (equal when they divide evenly into >= 4096) and, when
    the workload carries them, random initial states."""
    B, T, H, HV, K, V, N = (int(params[x]) for x in ("B", "T", "H", "HV", "K", "V", "N"))
    dtype = _DTYPES[params["dtype"]]
    gen = generator

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device)

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=gen, device=device)

    q = randn(B, T, H, K).to(dtype)
    k = randn(B, T, H, K).to(dtype)
    v = randn(B, T, HV, V).to(dtype)
    A_log = torch.log(rand(HV) * 15.0 + 1.0)
    lo, hi = torch.log(torch.tensor(1e-3)), torch.log(torch.tensor(1e-1))
    dt0 = torch.exp(rand(HV) * (hi - lo) + lo)
    dt_bias = dt0 + torch.log(-torch.expm1(-dt0))
    g = -torch.exp(A_log) * F.softplus(randn(B, T, HV) + dt_bias)
    beta = torch.sigmoid(randn(B, T, HV)).to(dtype)
    total = B * T
    if params["varlen"]:
        if total % N == 0 and total // N >= 4096:
            lengths = torch.full((N,), total // N, dtype=torch.long, device=device)
        else:
            share = rand(N).double() + 0.5
            lengths = torch.clamp((share / share.sum() * total).floor().long(), min=1)
            lengths[-1] += total - int(lengths.sum())
        cu = torch.zeros(N + 1, dtype=torch.long, device=device)
        cu[1:] = torch.cumsum(lengths, 0)
    else:
        cu = torch.arange(N + 1, device=device, dtype=torch.long) * T
    NI = int(params["NI"])
    init = randn(NI, HV, K, V) * 0.1
    return {"q": q, "k": k, "v": v, "g": g.float(), "beta": beta, "initial_state": init.float(),
            "cu_seqlens": cu.to(torch.int32)}
