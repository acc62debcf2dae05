"""PyTorch-eager baseline, input generator and canonical form for T08 ``moe-align-block-size``.

The baseline is the expert sort as a user writes it with torch ops: bincount, padded counts and
a cumsum for the segment starts, a stable argsort of the ids, the rank of each slot inside its
expert, a scatter into a sentinel-filled buffer, and ``repeat_interleave`` for the block-to-expert
map (whose data-dependent size costs a host sync). About a dozen kernels.
"""

from __future__ import annotations

from typing import Any

import torch


def moe_align_block_size(
    topk_ids: torch.Tensor, block_size: int, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """topk_ids: [T, k] int32 in [0, E). Returns (sorted_token_ids [n + E*(bs-1)],
    expert_ids [ceil((n + E*(bs-1)) / bs)], num_tokens_post_pad [1]), all int32."""
    bs, E = int(block_size), int(num_experts)
    flat = topk_ids.reshape(-1).long()
    n = flat.numel()
    max_len = n + E * (bs - 1)
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + bs - 1) // bs * bs
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    first = torch.cumsum(counts, 0) - counts  # first position of each expert in the sorted ids
    order = torch.argsort(flat, stable=True)
    expert_of = flat[order]
    rank = torch.arange(n, device=flat.device) - first[expert_of]
    sorted_ids = torch.full((max_len,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[starts[expert_of] + rank] = order.to(torch.int32)
    expert_ids = torch.zeros((max_len + bs - 1) // bs, dtype=torch.int32, device=flat.device)
    blocks = torch.repeat_interleave(torch.arange(E, device=flat.device), padded // bs)  # host sync
    expert_ids[: blocks.numel()] = blocks.to(torch.int32)
    return sorted_ids, expert_ids, ends[-1:].to(torch.int32)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Routing ids, k distinct experts per token: ``uniform`` draws them uniformly; ``zipf``
    draws them with probability proportional to 1/rank^1.2 over a random ranking of the experts
    (a few hot experts take most tokens, the coldest may get none)."""
    T, k, E = int(params["T"]), int(params["k"]), int(params["E"])
    g = generator
    if params["dist"] == "zipf":
        ranks = torch.randperm(E, generator=g, device=device).double()
        probs = (ranks + 1.0) ** -1.2
        ids = torch.multinomial(probs.expand(T, E), k, replacement=False, generator=g)
    else:
        ids = torch.rand(T, E, generator=g, device=device).argsort(dim=1)[:, :k]
    return {"topk_ids": ids.to(torch.int32).contiguous()}


def canonicalize(outputs: tuple[torch.Tensor, ...], inputs: dict[str, Any],
                 params: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """Sort the entries inside every expert segment (their order is free; sentinels n sort last)
    and blank the expert_ids past the padded total (unspecified). Segments come from the input
    ids, not from the outputs, so a wrong count cannot move a segment boundary."""
    sorted_ids, expert_ids, ntpp = outputs
    bs, E = int(params["bs"]), int(params["E"])
    flat = inputs["topk_ids"].reshape(-1).long()
    counts = torch.bincount(flat, minlength=E)
    ends = torch.cumsum((counts + bs - 1) // bs * bs, 0)
    total = int(ends[-1]) if E else 0
    pos = torch.arange(sorted_ids.numel(), device=sorted_ids.device)
    seg = torch.searchsorted(ends.to(sorted_ids.device), pos, right=True)  # E past the total
    key = seg * 2**32 + (sorted_ids.long() + 2**31)  # any int32 value keeps its segment
    canon = (torch.sort(key).values % 2**32 - 2**31).to(sorted_ids.dtype)
    blocks = torch.arange(expert_ids.numel(), device=expert_ids.device)
    eids = torch.where(blocks < total // bs, expert_ids, torch.full_like(expert_ids, -1))
    return canon, eids, ntpp
