"""PyTorch-eager baseline, reference, input generator and canonical form for T07 ``moe-topk-gating``.

The baseline is the router as users write it: softmax, top-k and a renormalising divide; or,
for DeepSeek-style routing, sigmoid, bias, per-group top-2 sums, a top-k over groups, a group
mask built with scatter and expanded to the experts, a masked fill, the final top-k, a gather
of the unbiased scores and the renormalise-and-scale (about a dozen kernels, several of them
full-row copies).

Ties: the selection order is (score descending, expert index ascending), so an exact tie goes to
the lower index. ``reference`` implements that with a stable sort; ``canonicalize`` compares
the chosen experts as a set and accepts another choice only inside a 1e-6 relative tie band
where the scores are not exactly equal (see its docstring).
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BAND = 1e-6  # relative width of the tie band on the selection score


def moe_topk_gating(
    x: torch.Tensor, bias: torch.Tensor, top_k: int, renormalize: bool, scoring: str,
    n_group: int, topk_group: int, routed_scaling_factor: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [T, E] router logits; bias: [E] fp32 (sigmoid mode only). Returns (topk_weights [T, k]
    fp32, topk_ids [T, k] int32)."""
    if scoring == "softmax":
        probs = torch.softmax(x.float(), dim=-1)
        weights, ids = torch.topk(probs, top_k, dim=-1)
        if renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights * routed_scaling_factor, ids.to(torch.int32)
    scores = torch.sigmoid(x.float())
    choice = scores + bias.float().unsqueeze(0)
    T, E = choice.shape
    if n_group > 1:
        group_scores = choice.view(T, n_group, -1).topk(2, dim=-1).values.sum(dim=-1)
        group_idx = torch.topk(group_scores, topk_group, dim=-1).indices
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)
        expert_mask = group_mask.unsqueeze(-1).expand(T, n_group, E // n_group).reshape(T, E)
        choice = choice.masked_fill(expert_mask == 0, float("-inf"))
    ids = torch.topk(choice, top_k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * routed_scaling_factor, ids.to(torch.int32)


def _select(x, bias, top_k, scoring, n_group, topk_group):
    """fp32 scores, selection scores and the selected ids in (score desc, index asc) order."""
    if scoring == "softmax":
        scores = torch.softmax(x.float(), dim=-1)
        choice = scores
    else:
        scores = torch.sigmoid(x.float())
        choice = scores + bias.float().unsqueeze(0)
    T, E = choice.shape
    masked = choice
    if scoring != "softmax" and n_group > 1:
        top2 = choice.view(T, n_group, -1).topk(2, dim=-1).values
        group_scores = top2[..., 0] + top2[..., 1]
        kept = torch.sort(group_scores, dim=-1, descending=True, stable=True).indices[:, :topk_group]
        group_mask = torch.zeros(T, n_group, dtype=torch.bool, device=x.device).scatter_(1, kept, True)
        masked = choice.masked_fill(~group_mask.repeat_interleave(E // n_group, dim=1), float("-inf"))
    ids = torch.sort(masked, dim=-1, descending=True, stable=True).indices[:, :top_k]
    return scores, choice, ids


def reference(x, bias, top_k, renormalize, scoring, n_group, topk_group, routed_scaling_factor):
    """The semantics in fp32 with the lower-index tie rule made explicit by a stable sort."""
    scores, _, ids = _select(x, bias, top_k, scoring, n_group, topk_group)
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if scoring != "softmax" else 0.0))
    return weights * routed_scaling_factor, ids.to(torch.int32)


def _weights64(scores64, ids, renormalize, scoring, scale):
    w = scores64.gather(1, ids)
    if renormalize:
        w = w / (w.sum(dim=-1, keepdim=True) + (1e-20 if scoring != "softmax" else 0.0))
    return w * scale


def canonicalize(outputs: tuple[torch.Tensor, ...], inputs: dict[str, Any],
                 params: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """Rows become sets: (weight, id) pairs sorted by id.

    A row whose ids differ from the reference selection (recomputed here from the inputs) is
    accepted, and replaced by the reference selection with fp64 weights, only if all of:
    its ids are distinct and in range; its selection scores, sorted, match the reference's
    within the tie band (1e-6 relative, scores in fp64); no expert it took instead of a
    reference expert has exactly the same fp64 score as that expert (an exact tie must go to the
    lower index); in grouped mode it uses at most topk_group groups; and its weights match the
    fp64 weights of its own choice (rtol 1e-5, atol 1e-6). Anything else is left as it is and
    fails the exact comparison of the ids.
    """
    weights, ids = outputs
    x, bias = inputs["x"], inputs["bias"]
    k, scoring = int(params["k"]), params["scoring"]
    G, kg = int(params["n_group"]), int(params["topk_group"])
    renorm, scale = bool(params["renormalize"]), float(params["scale"])
    T, E = x.shape
    dev = ids.device
    _, _, ref_ids = _select(x, bias, k, scoring, G, kg)
    ref_ids = ref_ids.to(dev)
    if scoring == "softmax":
        scores64 = torch.softmax(x.double(), dim=-1)
        choice64 = scores64
    else:
        scores64 = torch.sigmoid(x.double())
        choice64 = scores64 + bias.double().unsqueeze(0)
    cand = ids.long()
    in_range = ((cand >= 0) & (cand < E)).all(dim=1)
    cand_c = cand.clamp(0, max(E - 1, 0))
    srt = torch.sort(cand_c, dim=1).values
    distinct = (srt[:, 1:] != srt[:, :-1]).all(dim=1) if k > 1 else torch.ones(T, dtype=torch.bool, device=dev)
    same = (srt == torch.sort(ref_ids, dim=1).values).all(dim=1) & in_range
    sc = choice64.gather(1, cand_c)
    sr = choice64.gather(1, ref_ids)
    sc_sorted = torch.sort(sc, dim=1, descending=True).values
    sr_sorted = torch.sort(sr, dim=1, descending=True).values
    close = ((sc_sorted - sr_sorted).abs() <= BAND * sr_sorted.abs() + 1e-12).all(dim=1)
    c_extra = ~(cand_c.unsqueeze(2) == ref_ids.unsqueeze(1)).any(dim=2)  # [T, k]
    r_extra = ~(ref_ids.unsqueeze(2) == cand_c.unsqueeze(1)).any(dim=2)
    exact_swap = ((sc.unsqueeze(2) == sr.unsqueeze(1)) & c_extra.unsqueeze(2) & r_extra.unsqueeze(1)).any(dim=(1, 2))
    ok = in_range & distinct & close & ~exact_swap & ~same
    if scoring != "softmax" and G > 1:
        groups = torch.zeros(T, G, dtype=torch.bool, device=dev).scatter_(1, cand_c // (E // G), True)
        ok &= groups.sum(dim=1) <= kg
    own = _weights64(scores64, cand_c, renorm, scoring, scale)
    ok &= ((weights.double() - own).abs() <= 1e-5 * own.abs() + 1e-6).all(dim=1)
    ref_w = _weights64(scores64, ref_ids, renorm, scoring, scale).to(weights.dtype)
    ids_out = torch.where(ok.unsqueeze(1), ref_ids, cand)
    w_out = torch.where(ok.unsqueeze(1), ref_w, weights)
    order = torch.sort(ids_out, dim=1, stable=True).indices
    return w_out.gather(1, order), ids_out.gather(1, order).to(ids.dtype)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Router logits N(0, 1) in the workload dtype, and ties on purpose.

    Sigmoid mode: the bias takes 8 levels in a pattern repeated in every group (so equal logits
    give exactly equal selection scores). Row 0 and about 1% of the rows get an exact tie at the
    selection boundary: the expert ranked k+1 (softmax), or an unselected expert of the same bias
    level (sigmoid), receives the logit of the expert ranked k. In grouped mode row 1 and about
    1% of the rows get an exact group tie: the group ranked topk_group + 1 receives a copy of
    the logits of the group ranked topk_group. Softmax mode passes a zero bias.
    """
    T, E, k = int(params["T"]), int(params["E"]), int(params["k"])
    scoring = params["scoring"]
    G, kg = int(params["n_group"]), int(params["topk_group"])
    dtype = _DTYPES[params["dtype"]]
    g = generator
    x = torch.randn(T, E, generator=g, device=device).to(dtype).float()
    if scoring == "softmax":
        bias = torch.zeros(E, device=device)
    else:
        eg = E // G
        levels = torch.linspace(-0.1, 0.1, 8, device=device)
        pattern = torch.randint(0, 8, (eg,), generator=g, device=device)
        bias = levels[pattern].repeat(G)
    rows = torch.arange(T, device=device)
    pick = torch.rand(T, generator=g, device=device)
    tie_rows = rows[(pick < 0.01) | (rows == 0)]
    if scoring != "softmax" and G > 1 and T > 1:
        grp_rows = rows[((pick >= 0.01) & (pick < 0.02)) | (rows == 1)]
        choice = torch.sigmoid(x[grp_rows]) + bias
        top2 = choice.view(-1, G, E // G).topk(2, dim=-1).values
        rank = torch.sort(top2[..., 0] + top2[..., 1], dim=-1, descending=True, stable=True).indices
        src, dst = rank[:, kg - 1], rank[:, kg]
        cols = torch.arange(E // G, device=device)
        xr = x[grp_rows]
        xr.scatter_(1, dst.unsqueeze(1) * (E // G) + cols, xr.gather(1, src.unsqueeze(1) * (E // G) + cols))
        x[grp_rows] = xr
    _, choice, order = _select(x[tie_rows], bias, min(k + 1, E), scoring, G, kg)
    a = order[:, k - 1]
    if scoring == "softmax":
        b = order[:, k] if k < E else a
    else:
        chosen = torch.zeros_like(choice, dtype=torch.bool).scatter_(1, order[:, :k], True)
        same_level = bias.unsqueeze(0) == bias[a].unsqueeze(1)
        cand = same_level & ~chosen
        if E // G > 0 and G > 1:  # prefer an expert of the same group, whose group is kept
            grp = torch.arange(E, device=device) // (E // G)
            cand_same = cand & (grp.unsqueeze(0) == (a // (E // G)).unsqueeze(1))
            cand = torch.where(cand_same.any(dim=1, keepdim=True), cand_same, cand)
        score = torch.where(cand, choice, float("-inf"))
        b = torch.where(cand.any(dim=1), score.argmax(dim=1), a)
    xr = x[tie_rows]
    xr.scatter_(1, b.unsqueeze(1), xr.gather(1, a.unsqueeze(1)))
    x[tie_rows] = xr
    return {"x": x.to(dtype).contiguous(), "bias": bias.contiguous()}
