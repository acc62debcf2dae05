"""The comparison rules of evaluator/compare.py on hand-made tensors."""

from __future__ import annotations

import math

import torch

from evaluator import compare
from tasks.spec import Compare


def test_allclose_ratio_and_worst_element():
    ref = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    got = ref.clone()
    got[1, 0] += 0.05
    out = compare.error_ratio(got, ref, "bf16", Compare(rule="allclose"))
    # allowed at 3.0: 1e-2 + 1e-2 * 3 = 0.04, error 0.05 -> ratio 1.25
    assert math.isclose(out.ratio, 1.25, rel_tol=1e-5)
    assert out.worst_index == (1, 0)


def test_per_dtype_tolerance_override():
    ref = torch.zeros(4)
    got = torch.full((4,), 0.02)
    assert compare.error_ratio(got, ref, "bf16", Compare()).ratio > 1
    assert compare.error_ratio(got, ref, "bf16", Compare(atol={"bf16": 0.05})).ratio < 1


def test_nan_where_reference_is_finite_fails():
    ref = torch.ones(3)
    got = torch.tensor([1.0, float("nan"), 1.0])
    out = compare.error_ratio(got, ref, "fp32", Compare())
    assert out.ratio == math.inf and out.rule == "nan" and out.worst_index == (1,)


def test_matching_inf_passes_and_mismatched_inf_fails():
    ref = torch.tensor([float("-inf"), 1.0])
    assert compare.error_ratio(ref.clone(), ref, "fp32", Compare()).ratio == 0
    assert compare.error_ratio(torch.tensor([0.0, 1.0]), ref, "fp32", Compare()).rule == "nan"


def test_a_nan_reproducing_a_nan_reference_passes_under_every_rule():
    ref = torch.tensor([float("nan"), 1.0, 2.0])
    for rule in ("allclose", "normalized", "match_rate", "exact"):
        assert compare.error_ratio(ref.clone(), ref, "fp32", Compare(rule=rule)).ratio == 0, rule
        missing = compare.error_ratio(torch.tensor([0.0, 1.0, 2.0]), ref, "fp32", Compare(rule=rule))
        assert missing.ratio > 1, rule  # a NaN the kernel does not reproduce still fails


def test_exact_rule_counts_mismatches():
    ref = torch.arange(10, dtype=torch.int32)
    got = ref.clone()
    got[7] = 0
    out = compare.error_ratio(got, ref, "int32", Compare(rule="exact"))
    assert out.ratio == math.inf and "1 of 10" in out.message and out.worst_index == (7,)
    assert compare.error_ratio(ref.clone(), ref, "int32", Compare(rule="exact")).ratio == 0


def test_normalized_error_scales_with_reference_magnitude():
    ref = torch.tensor([100.0, -50.0])
    got = ref + torch.tensor([1.0, 0.0])
    out = compare.error_ratio(got, ref, "bf16", Compare(rule="normalized"))
    assert math.isclose(out.ratio, (1.0 / 100.0) / 2e-2, rel_tol=1e-6)


def test_eager_slack_never_tightens():
    rule = Compare()
    assert compare.allowed_ratio(rule, None) == 1.0
    assert compare.allowed_ratio(rule, 0.2) == 1.0
    assert compare.allowed_ratio(rule, 0.8) == 1.6
    assert compare.allowed_ratio(rule, math.inf) == 1.0


def test_match_rate_allows_a_few_boundary_codes_and_no_more() -> None:
    from tasks.spec import Compare

    ref = torch.arange(1000, dtype=torch.float32)
    got = ref.clone()
    got[:5] += 10.0  # 0.5% off
    rule = Compare(rule="match_rate", min_match=0.99, atol={"fp32": 0.0}, rtol={"fp32": 1e-6})
    assert compare.error_ratio(got, ref, "fp32", rule).ratio <= 1.0
    got[:20] += 10.0  # 2% off
    worse = compare.error_ratio(got, ref, "fp32", rule)
    assert worse.ratio > 1.0 and worse.rule == "match-rate" and "20 of 1000" in worse.message


def test_zero_allowance_reports_a_real_mismatch_as_the_worst_element():
    """atol 0 at a zero reference: an exact zero is error 0, not 0/0, so the worst element named
    in the failure is one that differs (it was a matching zero, 'got 0, expected 0')."""
    ref = torch.tensor([0.0, 0.0, 1.0, 2.0])
    got = torch.tensor([0.0, 0.0, 1.5, 2.0])
    for rule in (Compare(rule="match_rate", min_match=0.9, atol={"fp32": 0.0}, rtol={"fp32": 1e-5}),
                 Compare(rule="allclose", atol={"fp32": 0.0}, rtol={"fp32": 1e-5})):
        out = compare.error_ratio(got, ref, "fp32", rule)
        assert out.worst_index == (2,), rule
        assert (out.got, out.expected) == (1.5, 1.0)
        assert out.ratio > 1
    # A nonzero error where nothing is allowed is an infinite ratio, not NaN.
    out = compare.error_ratio(torch.tensor([0.0, 1e-3]), torch.tensor([0.0, 0.0]), "fp32",
                              Compare(rule="allclose", atol={"fp32": 0.0}, rtol={"fp32": 1e-5}))
    assert out.ratio == math.inf and out.worst_index == (1,)
