"""The comparison rules, in one place, so CI, the CLI and the workers judge alike.

Each rule maps (output, reference) to an *error ratio*: the error divided by the error allowed,
so a ratio <= 1 passes. The allowed error follows the policy of TASKS.md 0.5: the dtype's
tolerance, or ``eager_slack`` times the eager baseline's own ratio against the same reference if
that is larger (we never demand more than eager PyTorch achieves).
"""

from __future__ import annotations

import math
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


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return tuple(reversed(idx))


def error_ratio(got: torch.Tensor, ref: torch.Tensor, dtype: str, rule: Compare) -> Outcome:
    """Compare one output with its reference; ``dtype`` is the output's declared dtype name."""
    if got.numel() == 0:
        return Outcome(0.0, rule.rule, "empty output")
    if rule.rule == "exact":
        ref_c = ref.to(got.dtype) if ref.dtype != got.dtype else ref
        neq = got != ref_c
        if got.is_floating_point():
            neq &= ~(torch.isnan(got) & torch.isnan(ref_c))
        bad = int(neq.sum())
        if not bad:
            return Outcome(0.0, "exact", "bit-exact")
        flat = int(torch.nonzero(neq.flatten())[0])
        return Outcome(math.inf, "exact", f"{bad} of {got.numel()} elements differ",
                       _unravel(flat, got.shape), float(got.flatten()[flat]), float(ref_c.flatten()[flat]))

    g = got.double() if got.device.type == "cpu" else got.float()
    r = ref.to(g.dtype)
    ref_finite = torch.isfinite(r)
    bad_nan = ~torch.isfinite(g) & ref_finite
    if bool(bad_nan.any()):
        flat = int(torch.nonzero(bad_nan.flatten())[0])
        return Outcome(math.inf, "nan", f"{int(bad_nan.sum())} non-finite values where the reference is finite",
                       _unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    mismatch_inf = ~ref_finite & (g != r)
    if bool(mismatch_inf.any()):
        flat = int(torch.nonzero(mismatch_inf.flatten())[0])
        return Outcome(math.inf, "nan", "a non-finite reference value is not reproduced",
                       _unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    diff = torch.where(ref_finite, (g - r).abs(), torch.zeros_like(g))
    if rule.rule == "normalized":
        tol = rule.tol.get(dtype, NORMALIZED_DEFAULTS.get(dtype, 2e-2))
        scale = max(1.0, float(torch.where(ref_finite, r.abs(), torch.zeros_like(r)).max()))
        flat = int(diff.flatten().argmax())
        err = float(diff.flatten()[flat]) / scale
        return Outcome(err / tol, "tolerance", f"normalized error {err:.3g} (allowed {tol:g})",
                       _unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    atol_d, rtol_d = ALLCLOSE_DEFAULTS.get(dtype, (1e-2, 1e-2))
    atol, rtol = rule.atol.get(dtype, atol_d), rule.rtol.get(dtype, rtol_d)
    allowed = atol + rtol * r.abs().nan_to_num(0.0)
    # An exact match is error 0 even where the allowance is 0 (atol 0 at a zero reference): 0/0 would
    # be NaN, and argmax would then report a matching element as the worst one.
    per_elem = torch.where(diff == 0, torch.zeros_like(diff), diff / allowed)
    if rule.rule == "match_rate":
        off = per_elem > 1.0
        miss = float(off.double().mean())
        allowed_miss = 1.0 - rule.min_match
        ratio = miss / allowed_miss if allowed_miss > 0 else (0.0 if miss == 0 else math.inf)
        flat = int(per_elem.flatten().argmax())
        return Outcome(ratio, "match-rate",
                       f"{int(off.sum())} of {got.numel()} elements ({miss:.3%}) outside atol {atol:g} + rtol {rtol:g}; "
                       f"at most {allowed_miss:.3%} may be",
                       _unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    flat = int(per_elem.flatten().argmax())
    ratio = float(per_elem.flatten()[flat])
    return Outcome(ratio, "tolerance", f"max |got - ref| / (atol + rtol*|ref|) = {ratio:.3g} (atol {atol:g}, rtol {rtol:g})",
                   _unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))


def allowed_ratio(rule: Compare, baseline_ratio: float | None) -> float:
    """1.0, or eager_slack x the baseline's own ratio when eager itself is further off."""
    if baseline_ratio is None or not math.isfinite(baseline_ratio):
        return 1.0
    return max(1.0, rule.eager_slack * baseline_ratio)
