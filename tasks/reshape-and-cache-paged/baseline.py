"""PyTorch-eager baseline, reference, input generator and canonical form for T20
``reshape-and-cache-paged``.

The baseline is what a user writes around ``index_copy_``: a boolean mask of the valid tokens (the
compaction forces a device-to-host sync for its size), gather the valid key and value rows, for an
fp8 cache divide by the scale, clamp to the e4m3 range and cast, then scatter each into the flat
[num_blocks * block_size, Hk, D] view of its cache.
"""

from __future__ import annotations

from typing import Any

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8e4m3": torch.float8_e4m3fn}
FP8_MAX = 448.0


def _store(cache: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor) -> None:
    _, _, Hk, D = cache.shape
    if cache.dtype == torch.float8_e4m3fn:
        codes = (rows.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        cache.view(torch.uint8).view(-1, Hk, D).index_copy_(0, idx, codes.view(torch.uint8))
    else:
        cache.view(-1, Hk, D).index_copy_(0, idx, rows.to(cache.dtype))


def reshape_and_cache(
    key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor, key_cache: torch.Tensor,
    value_cache: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """key, value: [T, Hk, D]; slot_mapping: [T] int64 (-1 = padding); caches: [num_blocks, bs, Hk, D];
    k_scale, v_scale: [1] fp32. Writes the valid tokens into the caches in place; returns the caches."""
    valid = slot_mapping >= 0
    idx = slot_mapping[valid]
    _store(key_cache, idx, key[valid], k_scale)
    _store(value_cache, idx, value[valid], v_scale)
    return key_cache, value_cache


def reference(
    key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor, key_cache: torch.Tensor,
    value_cache: torch.Tensor, k_scale: torch.Tensor, v_scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth: a per-token loop-free scatter with IEEE fp32 division and RNE to e4m3 (saturating)."""
    kc, vc = key_cache.clone(), value_cache.clone()
    valid = slot_mapping >= 0
    idx = slot_mapping[valid]
    _store(kc, idx, key[valid], k_scale)
    _store(vc, idx, value[valid], v_scale)
    return kc, vc


def make_inputs(params: dict[str, Any], generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    """Valid tokens fill `nseq` sequences, each starting on a fresh block; blocks are a random
    permutation of a cache twice the size needed; a fraction `pad` of tokens (at random places) has
    slot -1. Both caches are pre-filled with a random finite pattern that must survive outside the
    written slots. Keys and values are N(0, 1) with 0.1% outliers of 30x (saturating in fp8)."""
    T, Hk, D, bs, NB = (int(params[k]) for k in ("T", "Hk", "D", "bs", "NB"))
    nseq = int(params["nseq"])
    dtype, cache_dtype = DTYPES[params["dtype"]], DTYPES[params["cache_dtype"]]

    def rows() -> torch.Tensor:
        x = torch.randn(T, Hk, D, generator=generator, device=device)
        outlier = torch.rand(T, Hk, D, generator=generator, device=device) < 1e-3
        return torch.where(outlier, 30.0 * x, x).to(dtype)

    key, value = rows(), rows()
    n_pad = int(round(float(params["pad"]) * T))
    pad_pos = torch.randperm(T, generator=generator, device=device)[:n_pad]
    is_pad = torch.zeros(T, dtype=torch.bool, device=device)
    is_pad[pad_pos] = True
    n_valid = T - n_pad
    perm = torch.randperm(NB, generator=generator, device=device)
    # Sequence j holds valid tokens [bounds[j], bounds[j+1]); each sequence starts on a new block.
    bounds = [n_valid * j // nseq for j in range(nseq + 1)]
    logical = torch.empty(n_valid, dtype=torch.int64, device=device)
    block_base = 0
    for j in range(nseq):
        n = bounds[j + 1] - bounds[j]
        local = torch.arange(n, device=device)
        logical[bounds[j]:bounds[j + 1]] = (block_base + local // bs) * bs + local % bs
        block_base += -(-n // bs)
    if block_base > NB:
        raise ValueError(f"NB={NB} blocks cannot hold {n_valid} tokens in {nseq} sequences")
    slots = perm[logical // bs] * bs + logical % bs
    slot_mapping = torch.full((T,), -1, dtype=torch.int64, device=device)
    slot_mapping[~is_pad] = slots

    def cache() -> torch.Tensor:
        shape = (NB, bs, Hk, D)
        if cache_dtype == torch.float8_e4m3fn:
            bits = torch.randint(0, 256, shape, generator=generator, device=device, dtype=torch.int32)
            bits = torch.where((bits & 0x7F) == 0x7F, bits - 1, bits)  # no NaN codes
            return bits.to(torch.uint8).view(torch.float8_e4m3fn)
        return (100.0 * torch.randn(shape, generator=generator, device=device)).to(cache_dtype)

    k_scale = torch.tensor([float(params["k_scale"])], dtype=torch.float32, device=device)
    v_scale = torch.tensor([float(params["v_scale"])], dtype=torch.float32, device=device)
    return {"key": key, "value": value, "slot_mapping": slot_mapping, "key_cache": cache(),
            "value_cache": cache(), "k_scale": k_scale, "v_scale": v_scale}


def _signed_code(q: torch.Tensor) -> torch.Tensor:
    """fp8 e4m3 codes on one integer line: adjacent representable values differ by one, +0 == -0."""
    bits = q.contiguous().view(torch.uint8).to(torch.int32)
    mag = bits & 0x7F
    return torch.where(bits >= 0x80, -mag, mag)


def _bits(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    return x.view(torch.uint8).view(*x.shape, x.element_size())


def canonicalize(outputs: tuple[Any, ...], inputs: dict[str, Any], params: dict[str, Any]) -> tuple[Any, ...]:
    """Both caches as fp32 values, after the exactness checks (computed here from the pristine inputs).

    A bf16/fp16/fp32 cache must equal the expected cache bit for bit (written slots and the sentinel
    everywhere else). An fp8 cache must keep every unwritten entry bit-identical, and every written
    code within one e4m3 step of the correctly rounded code (division vs reciprocal); anything else
    raises, which fails the trial. The remaining one-step flips are counted by the match rate.
    """
    expected = reference(**inputs)
    written = torch.zeros(inputs["key_cache"].shape[:2], dtype=torch.bool, device=outputs[0].device).view(-1)
    sm = inputs["slot_mapping"].to(outputs[0].device)
    written[sm[sm >= 0]] = True
    written = written.view(inputs["key_cache"].shape[:2])
    res = []
    for name, got, want in zip(("key_cache", "value_cache"), outputs, expected, strict=True):
        want = want.to(got.device)
        if got.dtype != want.dtype:  # the reference side: nothing to check against itself
            res.append(got.float())
            continue
        if got.dtype == torch.float8_e4m3fn:
            same = (_bits(got) == _bits(want)).all(-1)
            bad_untouched = ~same & ~written[:, :, None, None]
            far = ((_signed_code(got) - _signed_code(want)).abs() > 1) & written[:, :, None, None]
            bad = bad_untouched | far
        else:
            bad = ~(_bits(got) == _bits(want)).all(-1)
        if bool(bad.any()):
            idx = torch.nonzero(bad)[0].tolist()
            where = "an unwritten slot" if not bool(written[idx[0], idx[1]]) else "a written slot"
            raise ValueError(
                f"{name}: {int(bad.sum())} of {got.numel()} entries wrong (first at {idx}, {where}: "
                f"got {float(got[tuple(idx)].float()):g}, expected {float(want[tuple(idx)].float()):g})")
        res.append(got.float())
    return tuple(res)
