"""PyTorch-eager baseline, reference and input generator for T04 ``paged-attn-decode-gqa``.

The baseline is what a user writes without a paged-attention kernel: gather every sequence's
pages through the block table into a contiguous [B, Lmax, Hkv, D] tensor (``index_select``),
``repeat_interleave`` the K/V heads up to Hq, then scores, a length mask, softmax and the
weighted sum of values. It copies the cache, expands it g-fold and keeps fp32 scores.
"""

from __future__ import annotations

from typing import Any

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def paged_attn_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    """q: [B, Hq, D]; k_cache, v_cache: [num_blocks, page, Hkv, D]; block_table: [B, max_blocks] int32;
    seq_lens: [B] int32. Returns o [B, Hq, D]."""
    B, Hq, D = q.shape
    _, page, Hkv, _ = k_cache.shape
    g = Hq // Hkv
    n_pages = -(-int(seq_lens.max()) // page)
    # Entries past a sequence's last page are garbage: point them at block 0 and mask later.
    logical = torch.arange(n_pages, device=q.device)
    needed = (seq_lens.long() + page - 1) // page
    pages = torch.where(logical[None, :] < needed[:, None], block_table[:, :n_pages].long(), 0)
    L = n_pages * page
    k = k_cache.index_select(0, pages.flatten()).view(B, L, Hkv, D)
    v = v_cache.index_select(0, pages.flatten()).view(B, L, Hkv, D)
    valid = torch.arange(L, device=q.device)[None, :] < seq_lens.long()[:, None]  # [B, L]
    v = torch.where(valid[:, :, None, None], v, 0)  # slots past the end are not ours (garbage)
    k = k.repeat_interleave(g, dim=2)  # [B, L, Hq, D]
    v = v.repeat_interleave(g, dim=2)
    s = torch.einsum("bhd,blhd->bhl", q, k).float() * scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhl,blhd->bhd", p.to(v.dtype), v)
    return o


def reference(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
    seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    """Ground truth in fp32, one sequence at a time (no g-fold expansion, no padding)."""
    B, Hq, D = q.shape
    _, page, Hkv, _ = k_cache.shape
    g = Hq // Hkv
    out = torch.empty(B, Hq, D, dtype=torch.float32, device=q.device)
    for b, n in enumerate(seq_lens.tolist()):
        pages = block_table[b, : -(-n // page)].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:n].float()  # [n, Hkv, D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:n].float()
        qb = q[b].float().view(Hkv, g, D)
        s = torch.einsum("kgd,nkd->kgn", qb, k) * scale
        p = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("kgn,nkd->kgd", p, v).reshape(Hq, D)
    return out


def parse_lens(spec: str, B: int) -> list[int]:
    """``const:N``, ``mod:a:b:c`` (a + (b*i mod c)) or ``list:l0,l1,...``."""
    kind, _, rest = spec.partition(":")
    if kind == "const":
        return [int(rest)] * B
    if kind == "mod":
        a, b, c = (int(x) for x in rest.split(":"))
        return [a + (b * i) % c for i in range(B)]
    if kind == "list":
        lens = [int(x) for x in rest.split(",")]
        if len(lens) != B:
            raise ValueError(f"lens lists {len(lens)} lengths for B = {B}")
        return lens
    raise ValueError(f"unknown lens spec {spec!r}")


def make_paged_cache(lens: list[int], page: int, num_blocks: int, max_blocks: int, row_shape: tuple[int, ...],
                     dtype: torch.dtype, generator: torch.Generator, device: torch.device,
                     n_caches: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Caches [num_blocks, page, *row_shape] with N(0, 1) rows inside the sequences and NaN
    everywhere else, and a block table mapping each sequence's pages to a random permutation of
    the physical blocks; entries past each sequence's last page are out-of-range garbage."""
    counts = [-(-n // page) for n in lens]
    total = sum(counts)
    if total > num_blocks or max(counts) > max_blocks:
        raise ValueError("num_blocks / max_blocks too small for these lengths")
    perm = torch.randperm(num_blocks, generator=generator, device=device)
    B = len(lens)
    table = torch.randint(num_blocks, 2**30, (B, max_blocks), generator=generator, device=device)
    fill = torch.zeros(num_blocks, dtype=torch.long, device=device)  # valid slots per physical block
    used = perm[:total]
    valid_per_page, row_of, col_of = [], [], []
    for b, (n, c) in enumerate(zip(lens, counts, strict=True)):
        for j in range(c):
            valid_per_page.append(min(page, n - j * page))
            row_of.append(b)
            col_of.append(j)
    rows = torch.tensor(row_of, device=device)
    cols = torch.tensor(col_of, device=device)
    table[rows, cols] = used
    fill[used] = torch.tensor(valid_per_page, device=device)
    valid = torch.arange(page, device=device)[None, :] < fill[:, None]  # [num_blocks, page]
    valid = valid.view(num_blocks, page, *([1] * len(row_shape)))
    caches = []
    for _ in range(n_caches):
        x = torch.randn(num_blocks, page, *row_shape, generator=generator, device=device)
        caches.append(torch.where(valid, x, float("nan")).to(dtype))
    return caches, table.to(torch.int32)


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, torch.Tensor]:
    B, Hq, Hkv, D = (int(params[k]) for k in ("B", "Hq", "Hkv", "D"))
    page, num_blocks, max_blocks = int(params["page"]), int(params["num_blocks"]), int(params["max_blocks"])
    dtype = _DTYPES[params["dtype"]]
    lens = parse_lens(str(params["lens"]), B)
    (k_cache, v_cache), table = make_paged_cache(lens, page, num_blocks, max_blocks, (Hkv, D), dtype,
                                                 generator, device, n_caches=2)
    q = torch.randn(B, Hq, D, generator=generator, device=device).to(dtype)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    return {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_table": table, "seq_lens": seq_lens}
