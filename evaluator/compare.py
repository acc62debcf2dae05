"""The comparison rules, in one place, so CI, the CLI and the workers judge alike.

Each rule maps (output, reference) to an *error ratio*: the error divided by the error allowed,
so a ratio <= 1 passes. The allowed error follows the policy of TASKS.md 0.5: the dtype's
tolerance, or ``eager_slack`` times the eager baseline's own ratio against the same reference if
that is larger (we never demand more than eager PyTorch achieves).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from tasks.spec import Compare

#: Elementwise (atol, rtol) per dtype (TASKS.md 0.5): fp16 is half of bf16.
ALLCLOSE_DEFAULTS: dict[str, tuple[float, float]] = {
    "bf16": (1e-2, 1e-2), "fp16": (5e-3, 5e-3), "fp32": (1e-4, 1e-4), "fp64": (1e-7, 1e-7),
    "fp8e4m3": (1.25e-1, 1.25e-1), "fp8e5m2": (2.5e-1, 2.5e-1),
}
#: Normalized error max|out - ref| / max(1, max|ref|) per dtype, for long reductions.
NORMALIZED_DEFAULTS: dict[str, float] = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-4, "fp64": 1e-7}


@dataclass(frozen=True)
class Outcome:
    ratio: float  # error / allowed error; inf for a structural failure
    rule: str  # what decided it: "tolerance", "exact", "nan", ...
    message: str
    worst_index: tuple[int, ...] | None = None
    got: float = math.nan
    expected: float = math.nan


#: Most elements of an output compared at once (see ``error_ratio``): 2**24 elements make
#: temporaries of 64 MiB (fp32) or 128 MiB (fp64), whatever the size of the output.
CHUNK_ELEMENTS = 1 << 24


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return tuple(reversed(idx))


def _blocks(shape: tuple[int, ...], chunk: int,
            prefix: tuple[int | slice, ...] = ()) -> Iterator[tuple[int | slice, ...]]:
    """Indices that cut a tensor of ``shape`` (no zero dim) into blocks of at most ``chunk``
    elements, in row-major order: whole rows of the leading dim while they fit, else one row at a
    time, recursively. A block of a contiguous tensor is contiguous, so flattening it is a view."""
    if not shape:
        yield prefix
        return
    inner = math.prod(shape[1:])
    step = chunk // inner
    if step:
        for start in range(0, shape[0], step):
            yield (*prefix, slice(start, start + step))
    else:
        for i in range(shape[0]):
            yield from _blocks(shape[1:], chunk, (*prefix, i))


def _chunks(got: torch.Tensor, ref: torch.Tensor,
            chunk: int) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """(flat offset, got block, ref block), the blocks flattened: views where the tensors are
    contiguous, copies of at most ``chunk`` elements where they are not."""
    offset = 0
    for index in _blocks(tuple(got.shape), chunk):
        g, r = got[index].reshape(-1), ref[index].reshape(-1)
        yield offset, g, r
        offset += g.numel()


class _Worst:
    """Running max and argmax over the chunks, as ``torch.argmax`` of the whole flattened tensor
    gives them: the first NaN if any, else the first occurrence of the maximum (an earlier chunk
    keeps a tie)."""

    def __init__(self) -> None:
        self.value: float | None = None
        self.flat = 0
        self.got = math.nan
        self.expected = math.nan

    def update(self, values: torch.Tensor, offset: int, g: torch.Tensor, r: torch.Tensor) -> None:
        i = int(values.argmax())
        v = float(values[i])
        if self.value is None or v > self.value or (math.isnan(v) and not math.isnan(self.value)):
            self.value, self.flat, self.got, self.expected = v, offset + i, float(g[i]), float(r[i])


def _exact(got: torch.Tensor, ref: torch.Tensor, chunk: int) -> Outcome:
    bad = 0
    first: tuple[int, float, float] | None = None
    for offset, g, r in _chunks(got, ref, chunk):
        r_c = r.to(g.dtype) if r.dtype != g.dtype else r
        neq = g != r_c
        if g.is_floating_point():
            neq &= ~(torch.isnan(g) & torch.isnan(r_c))
        n = int(neq.sum())
        if n and first is None:
            i = int(torch.nonzero(neq)[0])
            first = (offset + i, float(g[i]), float(r_c[i]))
        bad += n
    if first is None:
        return Outcome(0.0, "exact", "bit-exact")
    flat, g_val, r_val = first
    return Outcome(math.inf, "exact", f"{bad} of {got.numel()} elements differ", _unravel(flat, got.shape), g_val, r_val)


def error_ratio(got: torch.Tensor, ref: torch.Tensor, dtype: str, rule: Compare, *,
                chunk: int | None = None) -> Outcome:
    """Compare one output with its reference; ``dtype`` is the output's declared dtype name.

    The tensors are walked in flattened blocks of at most ``chunk`` elements (default
    ``CHUNK_ELEMENTS``) with running reductions, so the temporaries (float copies, masks,
    differences, per-element ratios) are a few blocks in size whatever the output's size: built
    whole, they ran an 80 GB card's judge out of memory on FLCE's dW (128256 x 8192, 3.9 GiB per
    fp32 temporary). The outcome is the one the whole-tensor computation gives, to the bit.
    ``ref`` must have ``got``'s shape or broadcast to it.
    """
    chunk = CHUNK_ELEMENTS if chunk is None else chunk
    if chunk < 1:
        raise ValueError(f"chunk must be positive, not {chunk}")
    if got.numel() == 0:
        return Outcome(0.0, rule.rule, "empty output")
    if ref.shape != got.shape:
        ref = ref.expand_as(got)
    if rule.rule == "exact":
        return _exact(got, ref, chunk)

    on_cpu = got.device.type == "cpu"
    normalized, match_rate = rule.rule == "normalized", rule.rule == "match_rate"
    atol_d, rtol_d = ALLCLOSE_DEFAULTS.get(dtype, (1e-2, 1e-2))
    atol, rtol = rule.atol.get(dtype, atol_d), rule.rtol.get(dtype, rtol_d)
    n_nonfinite = 0
    nonfinite: tuple[int, float, float] | None = None  # first non-finite got where ref is finite
    unmatched: tuple[int, float, float] | None = None  # first non-finite ref not reproduced
    ref_max = 0.0  # max |r| over finite r
    n_off = 0  # match_rate: elements outside atol + rtol * |ref|
    worst = _Worst()  # of the difference (normalized) or of the per-element ratio
    for offset, got_c, ref_c in _chunks(got, ref, chunk):
        g = got_c.double() if on_cpu else got_c.float()
        r = ref_c.to(g.dtype)
        ref_finite = torch.isfinite(r)
        bad_nan = ~torch.isfinite(g) & ref_finite
        n = int(bad_nan.sum())
        if n and nonfinite is None:
            i = int(torch.nonzero(bad_nan)[0])
            nonfinite = (offset + i, float(g[i]), float(r[i]))
        n_nonfinite += n
        if nonfinite is None and unmatched is None:
            # A NaN reproduces a NaN (NaN != NaN, so equality alone would fail it); an inf its own sign.
            mismatch_inf = ~ref_finite & (g != r) & ~(torch.isnan(g) & torch.isnan(r))
            if bool(mismatch_inf.any()):
                i = int(torch.nonzero(mismatch_inf)[0])
                unmatched = (offset + i, float(g[i]), float(r[i]))
        if nonfinite is not None or unmatched is not None:
            continue  # the outcome is "nan"; only the count of non-finite values is still needed
        diff = torch.where(ref_finite, (g - r).abs(), 0.0)
        if normalized:
            ref_max = max(ref_max, float(torch.where(ref_finite, r.abs(), 0.0).max()))
            worst.update(diff, offset, g, r)
            continue
        allowed = atol + rtol * r.abs().nan_to_num(0.0)
        # An exact match is error 0 even where the allowance is 0 (atol 0 at a zero reference): 0/0 would
        # be NaN, and argmax would then report a matching element as the worst one.
        per_elem = torch.where(diff == 0, 0.0, diff / allowed)
        worst.update(per_elem, offset, g, r)
        if match_rate:
            n_off += int((per_elem > 1.0).sum())

    if nonfinite is not None:
        flat, g_val, r_val = nonfinite
        return Outcome(math.inf, "nan", f"{n_nonfinite} non-finite values where the reference is finite",
                       _unravel(flat, got.shape), g_val, r_val)
    if unmatched is not None:
        flat, g_val, r_val = unmatched
        return Outcome(math.inf, "nan", "a non-finite reference value is not reproduced",
                       _unravel(flat, got.shape), g_val, r_val)
    assert worst.value is not None
    where = _unravel(worst.flat, got.shape)
    if normalized:
        tol = rule.tol.get(dtype, NORMALIZED_DEFAULTS.get(dtype, 2e-2))
        err = worst.value / max(1.0, ref_max)
        return Outcome(err / tol, "tolerance", f"normalized error {err:.3g} (allowed {tol:g})",
                       where, worst.got, worst.expected)
    if match_rate:
        numel = got.numel()
        miss = n_off / numel
        allowed_miss = 1.0 - rule.min_match
        ratio = miss / allowed_miss if allowed_miss > 0 else (0.0 if miss == 0 else math.inf)
        return Outcome(ratio, "match-rate",
                       f"{n_off} of {numel} elements ({miss:.3%}) outside atol {atol:g} + rtol {rtol:g}; "
                       f"at most {allowed_miss:.3%} may be",
                       where, worst.got, worst.expected)
    ratio = worst.value
    return Outcome(ratio, "tolerance", f"max |got - ref| / (atol + rtol*|ref|) = {ratio:.3g} (atol {atol:g}, rtol {rtol:g})",
                   where, worst.got, worst.expected)


def allowed_ratio(rule: Compare, baseline_ratio: float | None) -> float:
    """1.0, or eager_slack x the baseline's own ratio when eager itself is further off."""
    if baseline_ratio is None or not math.isfinite(baseline_ratio):
        return 1.0
    return max(1.0, rule.eager_slack * baseline_ratio)
