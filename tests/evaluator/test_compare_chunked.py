"""evaluator/compare.py's chunked error_ratio gives, to the bit, the outcome of the whole-tensor
computation it replaced, and its temporaries stay a few chunks in size whatever the output's size."""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from evaluator import compare
from evaluator.compare import ALLCLOSE_DEFAULTS, NORMALIZED_DEFAULTS, Outcome
from tasks.spec import Compare

# --- Frozen copy of error_ratio before chunking (it built whole-tensor temporaries), kept only as
# --- the oracle of the equivalence tests below: do not "fix" or update it with compare.py.
# It shares compare._unravel, which chunking left unchanged.
_reference_unravel = compare._unravel


def _reference_error_ratio(got: torch.Tensor, ref: torch.Tensor, dtype: str, rule: Compare) -> Outcome:
    """evaluator/compare.py's error_ratio before chunking, verbatim but for the names."""
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
                       _reference_unravel(flat, got.shape), float(got.flatten()[flat]), float(ref_c.flatten()[flat]))

    g = got.double() if got.device.type == "cpu" else got.float()
    r = ref.to(g.dtype)
    ref_finite = torch.isfinite(r)
    bad_nan = ~torch.isfinite(g) & ref_finite
    if bool(bad_nan.any()):
        flat = int(torch.nonzero(bad_nan.flatten())[0])
        return Outcome(math.inf, "nan", f"{int(bad_nan.sum())} non-finite values where the reference is finite",
                       _reference_unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    mismatch_inf = ~ref_finite & (g != r) & ~(torch.isnan(g) & torch.isnan(r))  # a NaN reproduces a NaN
    if bool(mismatch_inf.any()):
        flat = int(torch.nonzero(mismatch_inf.flatten())[0])
        return Outcome(math.inf, "nan", "a non-finite reference value is not reproduced",
                       _reference_unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    diff = torch.where(ref_finite, (g - r).abs(), torch.zeros_like(g))
    if rule.rule == "normalized":
        tol = rule.tol.get(dtype, NORMALIZED_DEFAULTS.get(dtype, 2e-2))
        scale = max(1.0, float(torch.where(ref_finite, r.abs(), torch.zeros_like(r)).max()))
        flat = int(diff.flatten().argmax())
        err = float(diff.flatten()[flat]) / scale
        return Outcome(err / tol, "tolerance", f"normalized error {err:.3g} (allowed {tol:g})",
                       _reference_unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
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
                       _reference_unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))
    flat = int(per_elem.flatten().argmax())
    ratio = float(per_elem.flatten()[flat])
    return Outcome(ratio, "tolerance", f"max |got - ref| / (atol + rtol*|ref|) = {ratio:.3g} (atol {atol:g}, rtol {rtol:g})",
                   _reference_unravel(flat, got.shape), float(g.flatten()[flat]), float(r.flatten()[flat]))


# --- End of the frozen copy.

# The judge compares on the GPU in production; CI has only the CPU, where these run.
DEVICES = ["cpu"]
CHUNKS = [1, 7, 64, 10**9]
FLOATS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}


def _rules(dtype: str) -> list[Compare]:
    return [
        Compare(),  # allclose, the dtype's defaults
        Compare(rule="allclose", atol={dtype: 1e-3}, rtol={dtype: 2e-3}),
        Compare(rule="allclose", atol={dtype: 0.0}, rtol={dtype: 1e-5}),  # zero allowance at a zero reference
        Compare(rule="normalized"),
        Compare(rule="normalized", tol={dtype: 1e-3}),
        Compare(rule="match_rate", min_match=0.9, atol={dtype: 1e-3}, rtol={dtype: 1e-3}),
        Compare(rule="match_rate", min_match=1.0, atol={dtype: 0.0}, rtol={dtype: 1e-2}),
        Compare(rule="exact"),
    ]


def _assert_same(new: Outcome, old: Outcome) -> None:
    """Field by field, bit for bit (a NaN equals a NaN)."""
    for field in dataclasses.fields(Outcome):
        a, b = getattr(new, field.name), getattr(old, field.name)
        same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
        assert same, f"{field.name}: chunked {a!r} != whole-tensor {b!r}\n  chunked {new}\n  whole   {old}"


def _check_all_chunks(got: torch.Tensor, ref: torch.Tensor, dtype: str, rule: Compare) -> Outcome:
    old = _reference_error_ratio(got, ref, dtype, rule)
    for chunk in CHUNKS:
        _assert_same(compare.error_ratio(got, ref, dtype, rule, chunk=chunk), old)
    _assert_same(compare.error_ratio(got, ref, dtype, rule), old)
    return old


def _strided_like(t: torch.Tensor, rng: random.Random) -> torch.Tensor:
    """The same values in a non-contiguous layout: a transposed view, or every other element."""
    if t.dim() >= 2 and rng.random() < 0.5:
        out = t.transpose(0, -1).contiguous().transpose(0, -1)
    else:
        wide = torch.empty((*t.shape, 2), dtype=t.dtype, device=t.device)
        wide[..., 0] = t
        out = wide[..., 0]
    assert torch.equal(out.nan_to_num(), t.nan_to_num()) and (t.numel() == 1 or not out.is_contiguous())
    return out


def _random_case(seed: int, device: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """(got, ref, dtype): near-equal values with exact matches, zeros, a few large errors, maybe
    ties in the largest error, non-finite values, non-contiguous layouts."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    shape = rng.choice([(), (1,), (6,), (7,), (13,), (64,), (65,), (130,), (7, 9), (2, 70), (9, 8), (3, 5, 11),
                        (2, 3, 4, 5)])
    dtype = rng.choice(list(FLOATS))
    n = math.prod(shape)
    ref = torch.randn(n, generator=gen, dtype=torch.float64) * rng.choice([0.5, 1.0, 30.0])
    ref[torch.rand(n, generator=gen) < 0.1] = 0.0
    got = ref + torch.randn(n, generator=gen, dtype=torch.float64) * rng.choice([0.0, 1e-5, 1e-3, 3e-2])
    same = torch.rand(n, generator=gen) < 0.3
    got[same] = ref[same]
    for _ in range(rng.randint(0, 3)):
        got[rng.randrange(n)] += rng.choice([-1.0, 1.0]) * rng.uniform(0.05, 2.0)
    if n > 1 and rng.random() < 0.3:  # ties in the largest error, maybe in different chunks
        for p in rng.sample(range(n), min(n, rng.randint(2, 4))):
            ref[p], got[p] = 0.5, 8.5
    inf, nan = math.inf, math.nan
    for _ in range(rng.choice([0, 0, 0, 1, 2, 3])):  # non-finite values, some of them mismatched
        p = rng.randrange(n)
        kind = rng.choice(["got-nan", "got-inf", "both-inf", "both-ninf", "ref-inf", "ref-nan", "both-nan",
                           "inf-sign"])
        if kind == "got-nan":
            got[p] = nan
        elif kind == "got-inf":
            got[p] = -inf
        elif kind in ("both-inf", "both-ninf"):
            ref[p] = got[p] = inf if kind == "both-inf" else -inf
        elif kind == "ref-inf":
            ref[p] = inf
        elif kind == "ref-nan":
            ref[p] = nan
        elif kind == "both-nan":
            ref[p] = got[p] = nan
        else:
            ref[p], got[p] = inf, -inf
    got_t = got.reshape(shape).to(FLOATS[dtype]).to(device)
    # The reference usually in the output's dtype, sometimes more precise (as an fp32/fp64 oracle is).
    ref_t = ref.reshape(shape).to(rng.choice([FLOATS[dtype], torch.float64])).to(device)
    if rng.random() < 0.5:
        got_t = _strided_like(got_t, rng)
    if rng.random() < 0.25:
        ref_t = _strided_like(ref_t, rng)
    return got_t, ref_t, dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(120))
def test_chunked_outcome_equals_whole_tensor_outcome(seed: int, device: str) -> None:
    got, ref, dtype = _random_case(seed, device)
    for rule in _rules(dtype):
        _check_all_chunks(got, ref, dtype, rule)


@pytest.mark.parametrize("device", DEVICES)
def test_exact_rule_on_integers_and_matching_nans(device: str) -> None:
    gen = torch.Generator().manual_seed(0)
    ref = torch.randint(-50, 50, (11, 13), generator=gen, dtype=torch.int32).to(device)
    got = ref.clone()
    _check_all_chunks(got, ref, "int32", Compare(rule="exact"))  # bit-exact
    got[3, 4] += 1
    got[9, 0] -= 2
    out = _check_all_chunks(got.t().contiguous().t(), ref, "int32", Compare(rule="exact"))
    assert out.message == "2 of 143 elements differ" and out.worst_index == (3, 4)
    fref = torch.randn(150, generator=gen).to(device)
    fref[[5, 77, 149]] = math.nan
    assert _check_all_chunks(fref.clone(), fref, "fp32", Compare(rule="exact")).ratio == 0.0
    fgot = fref.clone()
    fgot[140] = math.nan
    assert _check_all_chunks(fgot, fref.double(), "fp32", Compare(rule="exact")).worst_index == (140,)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_checks_cover_the_whole_tensor_before_any_tolerance(device: str) -> None:
    """A non-reproduced infinity in an early chunk does not hide a NaN in a later one: the NaN
    rule is checked first over every element, and its count is over every element."""
    ref = torch.linspace(-3, 3, 200, dtype=torch.float32, device=device)
    got = ref.clone()
    got[10] += 5.0  # a tolerance failure, first chunk
    ref[20] = math.inf  # not reproduced, an early chunk
    got[150] = math.nan  # non-finite where the reference is finite, late chunks
    got[190] = math.inf
    for rule in _rules("fp32"):
        out = _check_all_chunks(got, ref, "fp32", rule)
        if rule.rule != "exact":
            assert (out.rule, out.worst_index) == ("nan", (150,)) and out.message.startswith("2 non-finite")
    got[150] = got[190] = 0.0
    out = _check_all_chunks(got, ref, "fp32", Compare())
    assert (out.rule, out.worst_index) == ("nan", (20,))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rule", ["allclose", "normalized", "match_rate"])
def test_ties_in_the_largest_error_name_the_first_one(device: str, rule: str) -> None:
    ref = torch.zeros(6, 50, device=device)
    got = ref.clone()
    for p in [(5, 49), (1, 3), (1, 4), (3, 0)]:
        got[p] = 2.0
    out = _check_all_chunks(got, ref, "fp32", Compare(rule=rule))  # type: ignore[arg-type]
    assert out.worst_index == (1, 3)
    out = _check_all_chunks(got.t(), ref.t(), "fp32", Compare(rule=rule))  # type: ignore[arg-type]
    assert out.worst_index == (0, 3)  # (3, 0) of the original comes first in the transposed order


@pytest.mark.parametrize("device", DEVICES)
def test_match_rate_reports_the_miss_as_the_count_over_the_size(device: str) -> None:
    """3 of 10 off: the miss is 3 / 10, as the whole-tensor mean on the CPU gave it."""
    ref = torch.arange(10, dtype=torch.float32, device=device)
    got = ref.clone()
    got[[2, 5, 8]] += 1.0
    rule = Compare(rule="match_rate", min_match=0.5, atol={"fp32": 0.0}, rtol={"fp32": 1e-6})
    out = _check_all_chunks(got, ref, "fp32", rule)
    assert out.message.startswith("3 of 10 elements (30.000%)")


def test_reference_broadcast_to_the_output_shape() -> None:
    """A reference that broadcasts to the output's shape is compared as its expansion (the
    whole-tensor code could index the unexpanded reference out of bounds)."""
    ref = torch.linspace(0, 1, 9)
    got = ref.expand(4, 9).clone()
    got[2, 7] += 0.5
    for rule in _rules("fp32"):
        old = _reference_error_ratio(got, ref.expand_as(got).contiguous(), "fp32", rule)
        for chunk in CHUNKS:
            _assert_same(compare.error_ratio(got, ref, "fp32", rule, chunk=chunk), old)


def test_empty_output() -> None:
    for rule in _rules("fp32"):
        _check_all_chunks(torch.empty(0, 3), torch.empty(0, 3), "fp32", rule)


class _LargestAllocation(TorchDispatchMode):
    """Records the most elements of any tensor an op allocates; a view (an output sharing an
    input's storage, as flattening a contiguous tensor does) allocates nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("rule", ["allclose", "normalized", "match_rate", "exact"])
def test_temporaries_stay_a_few_chunks_in_size(rule: str, layout: str) -> None:
    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(100, 100, generator=gen)
    got = ref + 1e-3 * torch.randn(100, 100, generator=gen)
    got[3, 3] = got[70, 2] = math.nan  # the NaN rule, over every chunk
    if layout == "transposed":  # blocks of a non-contiguous output are copied, a block at a time
        got = got.t().contiguous().t()
    chunk = 256
    for g in (got, got.nan_to_num()):  # failing on NaNs, then going through the tolerances
        with _LargestAllocation() as mode:
            compare.error_ratio(g, ref, "fp32", Compare(rule=rule), chunk=chunk)  # type: ignore[arg-type]
        assert 0 < mode.largest < 4 * chunk, mode.largest
        with _LargestAllocation() as whole:  # the measure sees the whole-tensor temporaries
            _reference_error_ratio(g, ref, "fp32", Compare(rule=rule))  # type: ignore[arg-type]
        assert whole.largest >= 10_000
