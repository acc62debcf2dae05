"""PyTorch-eager baseline, exact reference and comparison for T22 ``topk-topp-sampling``.

The baseline is vLLM's ``apply_top_k_top_p_pytorch`` followed by its exponential-race sampler:
a full sort of every row, a gather of the k-th value, masked fills, a softmax, a cumulative sum,
a scatter back to vocabulary order, a second softmax and ``probs.div(q).argmax``. The only change
is the tie rule at the top-p cut (tokens with equal logits are kept or dropped together, using the
cumulative mass at the last member of the tie group), so that the result does not depend on the
order an unstable sort gives to equal logits.

The reference evaluates the definition in fp64 by value, and ``canonicalize`` accepts a
different token only inside the ambiguity band of TASKS.md (see the task notes).
"""

from __future__ import annotations

from typing import Any

import torch

TOPK_REL_BAND = 1e-6  # a logit this close (relative) to the k-th value is ambiguous
TOPP_BAND = 1e-5  # a token whose mass above it is this close to p is ambiguous
SCORE_BAND = 1e-5  # scores (logit - log q) this close count as equal


def topk_topp_sampling(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """logits: [B, V] fp32; k: [B] int32 (k = V: off); p: [B] fp32 (p = 1: off); q: [B, V] Exp(1) noise.

    Returns the sampled token ids [B] int64.
    """
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)
    # Top-k: keep every token >= the k-th largest logit (ties at the threshold are kept).
    kth = logits_sort.gather(1, (logits_sort.size(1) - k.long()).unsqueeze(1))
    logits_sort = logits_sort.masked_fill(logits_sort < kth, -float("inf"))
    # Top-p on the survivors: drop tokens whose ascending cumulative mass is <= 1 - p.
    probs_sort = logits_sort.softmax(dim=-1)
    probs_sum = probs_sort.cumsum(dim=-1)
    last_of_tie = torch.searchsorted(logits_sort, logits_sort, right=True) - 1
    probs_sum = probs_sum.gather(1, last_of_tie)
    top_p_mask = probs_sum <= 1 - p.unsqueeze(1)
    top_p_mask[:, -1] = False  # the largest token is always kept
    logits_sort = logits_sort.masked_fill(top_p_mask, -float("inf"))
    logits = logits_sort.scatter(1, logits_idx, logits_sort)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return probs.div(q).argmax(dim=-1)


def _analyze(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor):
    """fp64 evaluation by value: (winner ids, strictly kept mask, loosely kept mask, scores)."""
    B, V = logits.shape
    x = logits.double()
    s, idx = x.sort(dim=-1, descending=True)
    kk = k.long().clamp(1, V)
    kth = s.gather(1, (kk - 1).unsqueeze(1))  # k-th largest value
    topk_on = (kk < V).unsqueeze(1)
    keep_k = (s >= kth) | ~topk_on
    band_k = topk_on & (s < kth) & ((s - kth).abs() <= TOPK_REL_BAND * kth.abs())
    m = s[:, :1]
    e = torch.exp(s - m) * keep_k
    z = e.sum(dim=1, keepdim=True)
    # Mass strictly above each token (over the top-k survivors), equal for a whole tie group.
    neg = -s
    first_of_tie = torch.searchsorted(neg.contiguous(), neg.contiguous(), right=False)
    above = ((torch.cumsum(e, dim=1) - e) / z).gather(1, first_of_tie)
    pp = p.double().unsqueeze(1)
    topp_on = pp < 1.0
    keep = keep_k & ((above < pp) | ~topp_on)
    strict = keep_k & ~band_k & ((above < pp - TOPP_BAND) | ~topp_on)
    loose = (keep_k | band_k) & ((above < pp + TOPP_BAND) | ~topp_on)
    unsort = torch.empty_like(idx)
    unsort.scatter_(1, idx, torch.arange(V, device=idx.device).expand(B, V))
    keep, strict, loose = (t.gather(1, unsort) for t in (keep, strict, loose))
    score = x - torch.log(q.double())
    ninf = torch.tensor(-float("inf"), dtype=torch.float64, device=x.device)
    winner = torch.where(keep, score, ninf).argmax(dim=1)
    return winner, strict, loose, score


def reference(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The definition evaluated exactly (fp64, by value, ties kept, smallest index on equal scores)."""
    return _analyze(logits, k, p, q)[0]


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """Replace an id that differs from the reference by the reference's id when the difference is
    explained by the ambiguity band: the token is kept under the loose reading of the thresholds
    and its score is at least the best score among the strictly kept tokens (within 1e-5)."""
    ids = outputs[0]
    winner, strict, loose, score = _analyze(inputs["logits"], inputs["k"], inputs["p"], inputs["q"])
    ids = ids.to(winner.device).long()
    B, V = score.shape
    valid = (ids >= 0) & (ids < V)
    safe = ids.clamp(0, V - 1).unsqueeze(1)
    ninf = torch.tensor(-float("inf"), dtype=torch.float64, device=score.device)
    best_strict = torch.where(strict, score, ninf).max(dim=1).values
    s_c = score.gather(1, safe).squeeze(1)
    ok = valid & loose.gather(1, safe).squeeze(1) & (s_c >= best_strict - SCORE_BAND * best_strict.abs().clamp_min(1.0))
    return (torch.where(ok, winner, ids),)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """Peaked, heavy-tailed logits rounded to bf16 (as an lm-head in bf16 produces them, which
    makes equal logits common, also at the k-th value), per-row filters and Exp(1) noise."""
    B, V, mode = int(params["B"]), int(params["V"]), int(params["filters"])
    g = generator
    # Gumbel-distributed logits (scale 1.1-1.8 per row): token weights exp(logit) follow a
    # power law, as real next-token distributions do, so most nuclei are small; plus a few
    # preferred tokens per row lifted by a row-dependent amount.
    scale = torch.rand(B, 1, generator=g, device=device) * 0.7 + 1.1
    e = torch.empty(B, V, device=device).exponential_(1.0, generator=g).clamp_min(1e-30)
    logits = -torch.log(e) * scale
    n_hot = 16
    hot = torch.randint(0, V, (B, n_hot), generator=g, device=device)
    lift = torch.rand(B, n_hot, generator=g, device=device) * torch.rand(B, 1, generator=g, device=device) * 12.0
    logits.scatter_add_(1, hot, lift)
    logits = logits.to(torch.bfloat16).float()
    if mode == 0:  # both filters, per-row k ~ U{20..1000}, p ~ U[0.8, 0.99]
        k = torch.randint(20, 1001, (B,), generator=g, device=device).clamp(max=V)
        p = torch.rand(B, generator=g, device=device) * 0.19 + 0.8
    elif mode == 1:  # top-p only
        k = torch.full((B,), V, device=device)
        p = torch.full((B,), 0.95, device=device)
    else:  # top-k only, k = 50, 10% of rows with top-k disabled as well
        k = torch.full((B,), 50, device=device)
        off = torch.rand(B, generator=g, device=device) < 0.1
        off[0] = True
        k = torch.where(off, torch.full_like(k, V), k)
        p = torch.ones(B, device=device)
    if mode == 0:
        _plant_nucleus_rows(logits, k, p, g)
    q = torch.empty(B, V, device=device).exponential_(1.0, generator=g).clamp_min(1e-20)
    return {"logits": logits, "k": k.to(torch.int32), "p": p.float(), "q": q}


def _plant_nucleus_rows(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor, g: torch.Generator) -> None:
    """Rows 0 and 1 of a both-filters workload: top-p must cut hard *inside* the top-k set.

    On natural rows the nucleus often holds most of the top-k mass, so a kernel that skips top-p
    whenever top-k is on still samples a nucleus token most of the time and passes by luck. Here
    the top-k set is a plateau of n tokens above the rest of the row: one token one logit above
    n - 1 tied ones, k = n and p = 0.005 (the tied group's mass, about 1.3%, exceeds p, so only
    the lone top token survives). A kernel that ignores p then returns the right token with
    probability about 1/(1 + (n - 1)/e), about 1.4% per row per trial.
    """
    B, V = logits.shape
    n = min(200, V)
    for r in range(min(2, B)):
        base = float(torch.floor(logits[r].max())) + 2.0  # integer-valued: exact in bf16
        idx = torch.randperm(V, generator=g, device=logits.device)[:n]
        logits[r, idx] = base
        logits[r, idx[0]] = base + 1.0
        k[r] = n
        p[r] = 0.005
