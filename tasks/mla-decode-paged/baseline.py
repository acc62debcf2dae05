"""PyTorch-eager baseline and input generator for T05 ``mla-decode-paged``.

The baseline is the absorbed-MLA decode a user writes with batched matmuls: gather each
sequence's pages into [B, Lmax, Dk], one bmm of the queries (q_len * H rows per sequence) against
the whole latent rows for fp32 scores, the length and MTP-causal mask, logsumexp and softmax, and
a second bmm against the latent part as the values.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def mla_decode_paged(
    q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
    scale: float, kv_lora_rank: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [B*q_len, H, Dk]; kv_cache: [num_blocks, page, Dk]; block_table: [B, max_blocks] int32;
    seq_lens: [B] int32. Returns (o [B*q_len, H, kv_lora_rank], lse [B*q_len, H] fp32)."""
    B = seq_lens.shape[0]
    BQ, H, Dk = q.shape
    q_len = BQ // B
    _, page, _ = kv_cache.shape
    n_pages = -(-int(seq_lens.max()) // page)
    logical = torch.arange(n_pages, device=q.device)
    needed = (seq_lens.long() + page - 1) // page
    # Table entries past a sequence's last page are garbage: point them at block 0, mask later.
    pages = torch.where(logical[None, :] < needed[:, None], block_table[:, :n_pages].long(), 0)
    L = n_pages * page
    kv = kv_cache.index_select(0, pages.flatten()).view(B, L, Dk)
    j = torch.arange(L, device=q.device)
    # Query t of sequence b is at position len_b - q_len + t and sees keys j <= its position.
    limit = seq_lens.long()[:, None] - q_len + torch.arange(q_len, device=q.device)[None, :]  # [B, q_len]
    allowed = j[None, None, :] <= limit[:, :, None]  # [B, q_len, L]
    allowed = allowed[:, :, None, :].expand(B, q_len, H, L).reshape(B, q_len * H, L)
    valid = j[None, :] < seq_lens.long()[:, None]
    kv = torch.where(valid[:, :, None], kv, 0)  # rows past the end are not ours (garbage)
    s = torch.bmm(q.view(B, q_len * H, Dk), kv.transpose(1, 2)).float() * scale  # [B, q_len*H, L]
    s = s.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    o = torch.bmm(p.to(kv.dtype), kv[:, :, :kv_lora_rank])
    return o.view(BQ, H, kv_lora_rank), lse.view(BQ, H)


def parse_lens(spec: str, B: int) -> list[int]:
    """``const:N`` or ``list:l0,l1,...``."""
    kind, _, rest = spec.partition(":")
    if kind == "const":
        return [int(rest)] * B
    if kind == "list":
        lens = [int(x) for x in rest.split(",")]
        if len(lens) != B:
            raise ValueError(f"lens lists {len(lens)} lengths for B = {B}")
        return lens
    raise ValueError(f"unknown lens spec {spec!r}")


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    """Queries N(0, 1); latent rows N(0, 1) inside the sequences, NaN elsewhere; shuffled pages."""
    B, q_len, H, Dk = (int(params[k]) for k in ("B", "q_len", "H", "Dk"))
    page, num_blocks, max_blocks = int(params["page"]), int(params["num_blocks"]), int(params["max_blocks"])
    dtype = _DTYPES[params["dtype"]]
    lens = parse_lens(str(params["lens"]), B)
    if min(lens) < q_len:
        raise ValueError("every context must hold the q_len new tokens")
    counts = [-(-n // page) for n in lens]
    total = sum(counts)
    if total > num_blocks or max(counts) > max_blocks:
        raise ValueError("num_blocks / max_blocks too small for these lengths")
    perm = torch.randperm(num_blocks, generator=generator, device=device)
    table = torch.randint(num_blocks, 2**30, (B, max_blocks), generator=generator, device=device)
    rows, cols, valid_slots = [], [], []
    for b, (n, c) in enumerate(zip(lens, counts, strict=True)):
        for i in range(c):
            rows.append(b)
            cols.append(i)
            valid_slots.append(min(page, n - i * page))
    used = perm[:total]
    table[torch.tensor(rows, device=device), torch.tensor(cols, device=device)] = used
    fill = torch.zeros(num_blocks, dtype=torch.long, device=device)
    fill[used] = torch.tensor(valid_slots, device=device)
    valid = torch.arange(page, device=device)[None, :] < fill[:, None]
    kv = torch.randn(num_blocks, page, Dk, generator=generator, device=device)
    kv = torch.where(valid[:, :, None], kv, float("nan")).to(dtype)
    q = torch.randn(B * q_len, H, Dk, generator=generator, device=device).to(dtype)
    return {"q": q, "kv_cache": kv, "block_table": table.to(torch.int32),
            "seq_lens": torch.tensor(lens, dtype=torch.int32, device=device)}
