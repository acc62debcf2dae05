"""Hand-computed checks of evaluator.scoring: the one definition of every D2K-Bench number."""

from __future__ import annotations

import math

import pytest

from evaluator import scoring
from evaluator.scoring import (
    FAILURE_PENALTY_SPEEDUP,
    TaskScore,
    WorkloadOutcome,
    ablation_curve,
    eager_reference,
    effective_speedup,
    failed_task,
    geomean,
    paired_comparison,
    submission_score,
    task_score,
    workload_speedup,
)

SUITE26 = [f"task-{i:02d}" for i in range(26)]


def ok(s: float, sol: float | None = None) -> TaskScore:
    return TaskScore(True, s, sol)


# ---------------------------------------------------------------------------------------- geomean


@pytest.mark.parametrize(("values", "expected"), [
    pytest.param([1, 4], 2.0, id="1-and-4-is-2"),
    pytest.param([2.0], 2.0, id="single"),
    pytest.param([0.5, 2.0], 1.0, id="ratio-and-inverse-cancel"),
    pytest.param([1e-200] * 26, 1e-200, id="no-underflow"),
    pytest.param([1e200, 1e200], 1e200, id="no-overflow"),
])
def test_geomean(values, expected):
    assert geomean(values) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("values", [
    pytest.param([], id="empty"),
    pytest.param([1.0, 0.0], id="zero"),
    pytest.param([1.0, -2.0], id="negative"),
    pytest.param([1.0, math.nan], id="nan"),
    pytest.param([1.0, math.inf], id="inf"),
])
def test_geomean_rejects(values):
    with pytest.raises(ValueError):
        geomean(values)


# -------------------------------------------------------------------------------------- workloads


@pytest.mark.parametrize(("base", "cand", "sol", "expected"), [
    pytest.param(2.0, 1.0, None, 2.0, id="twice-as-fast"),
    pytest.param(1.0, 4.0, None, 0.25, id="slower"),
    pytest.param(2.0, 1.0, 0.5, 2.0, id="sol-bound-not-reached"),
    pytest.param(2.0, 0.1, 0.5, 4.0, id="clamped-at-sol-bound"),
    pytest.param(2.0, 1e-12, 0.5, 4.0, id="near-zero-time-clamped"),
])
def test_workload_speedup(base, cand, sol, expected):
    assert workload_speedup(base, cand, sol) == pytest.approx(expected)


@pytest.mark.parametrize(("base", "cand", "sol"), [
    pytest.param(0.0, 1.0, None, id="zero-baseline"),
    pytest.param(1.0, 0.0, None, id="zero-candidate"),
    pytest.param(math.nan, 1.0, None, id="nan-baseline"),
    pytest.param(1.0, math.nan, None, id="nan-candidate"),
    pytest.param(1.0, 1.0, 0.0, id="zero-sol"),
    pytest.param(1.0, -1.0, None, id="negative"),
])
def test_workload_speedup_rejects(base, cand, sol):
    with pytest.raises(ValueError):
        workload_speedup(base, cand, sol)


def test_sol_fraction():
    assert scoring.sol_fraction(0.25, 1.0) == 0.25


def test_correct_workload_without_times_is_an_error():
    with pytest.raises(ValueError, match="needs baseline_ms"):
        scoring.score_workload(WorkloadOutcome(True, 1.0, None))


def test_incorrect_workload_has_no_speedup():
    assert scoring.score_workload(WorkloadOutcome(False)).speedup is None


# ------------------------------------------------------------------------------------------ tasks


def test_task_speedup_is_geomean_of_workloads():
    t = task_score([WorkloadOutcome(True, 2.0, 1.0), WorkloadOutcome(True, 8.0, 1.0)])  # s = 2, 8
    assert t.correct and t.speedup == pytest.approx(4.0)
    assert t.sol_fraction is None and t.findings == ()


def test_one_incorrect_workload_fails_the_task():
    t = task_score([WorkloadOutcome(True, 2.0, 1.0), WorkloadOutcome(False, name="big")])
    assert not t.correct and t.speedup is None
    assert "big" in t.findings[0]


def test_task_sol_fraction_is_geomean():
    t = task_score([WorkloadOutcome(True, 2.0, 1.0, 0.25), WorkloadOutcome(True, 4.0, 1.0, 1.0)])  # 0.25, 1.0
    assert t.sol_fraction == pytest.approx(0.5)
    assert t.speedup == pytest.approx(math.sqrt(8))


def test_sol_fraction_above_one_is_a_finding_and_excluded():
    t = task_score([
        WorkloadOutcome(True, 2.0, 1.0, 0.5, name="a"),  # fraction 0.5, s = 2
        WorkloadOutcome(True, 2.0, 0.1, 0.5, name="b"),  # fraction 5 (impossible), s clamped 20 -> 4
    ])
    assert t.correct
    assert t.sol_fraction == pytest.approx(0.5)  # only workload a counts
    assert t.speedup == pytest.approx(math.sqrt(2 * 4))
    assert len(t.findings) == 1 and "'b'" in t.findings[0] and "speed of light" in t.findings[0]


def test_baseline_faster_than_sol_is_flagged():
    t = task_score([WorkloadOutcome(True, 0.5, 1.0, 0.8)])
    assert any("baseline" in f for f in t.findings)


def test_task_needs_workloads():
    with pytest.raises(ValueError):
        task_score([])


@pytest.mark.parametrize(("args", "match"), [
    pytest.param((True, None), "needs a speedup", id="correct-without-speedup"),
    pytest.param((False, 2.0), "no speedup", id="failed-with-speedup"),
    pytest.param((True, math.nan), "finite", id="nan-speedup"),
    pytest.param((True, 0.0), "finite", id="zero-speedup"),
])
def test_task_score_validation(args, match):
    with pytest.raises(ValueError, match=match):
        TaskScore(*args)


@pytest.mark.parametrize(("task", "expected"), [
    pytest.param(None, FAILURE_PENALTY_SPEEDUP, id="missing"),
    pytest.param(failed_task("crashed"), FAILURE_PENALTY_SPEEDUP, id="failed"),
    pytest.param(ok(2.0), 2.0, id="correct"),
    pytest.param(ok(0.01), FAILURE_PENALTY_SPEEDUP, id="correct-but-slower-than-penalty-floored"),
])
def test_effective_speedup(task, expected):
    assert effective_speedup(task) == expected


def test_penalty_is_below_eager_and_failing_never_pays():
    assert 0 < FAILURE_PENALTY_SPEEDUP < scoring.EAGER_SPEEDUP
    suite = ["a", "b"]
    for s in (1e-6, 0.05, 0.1, 0.5):
        slow = submission_score({"a": ok(2.0), "b": ok(s)}, suite).performance_score
        failed = submission_score({"a": ok(2.0), "b": failed_task()}, suite).performance_score
        assert slow >= failed


# ------------------------------------------------------------------------------------ submissions


def test_all_correct_performance_score_is_plain_geomean():
    sc = submission_score({"a": ok(1.0), "b": ok(4.0)}, ["a", "b"])
    assert sc.performance_score == pytest.approx(2.0)
    assert sc.geomean_correct == pytest.approx(2.0)
    assert (sc.correct_count, sc.attempted, sc.suite_size) == (2, 2, 2)
    assert sc.correctness_rate == 1.0 and sc.full_suite


def test_penalty_applied_to_failed_and_missing_tasks():
    suite = ["a", "b", "c"]
    sc = submission_score({"a": ok(10.0), "b": failed_task("wrong")}, suite)  # c missing
    assert sc.performance_score == pytest.approx((10.0 * 0.1 * 0.1) ** (1 / 3))
    assert sc.geomean_correct == pytest.approx(10.0)
    assert sc.correct_count == 1 and sc.attempted == 2
    assert sc.correctness_rate == pytest.approx(1 / 2)
    assert sc.suite_correctness_rate == pytest.approx(1 / 3)
    assert not sc.full_suite
    assert sc.findings == ("b: wrong",)


def test_skipping_a_task_does_not_help():
    suite = ["a", "b"]
    attempted = submission_score({"a": ok(3.0), "b": ok(0.5)}, suite).performance_score
    skipped = submission_score({"a": ok(3.0)}, suite).performance_score
    assert skipped < attempted


def test_nothing_attempted():
    sc = submission_score({}, ["a", "b"])
    assert sc.performance_score == pytest.approx(FAILURE_PENALTY_SPEEDUP)
    assert sc.correctness_rate == 0.0 and sc.geomean_correct is None and sc.mean_sol_fraction is None


def test_fast_p_uses_strict_threshold_over_suite():
    suite = ["a", "b", "c", "d", "e"]
    sc = submission_score({"a": ok(0.5), "b": ok(1.0), "c": ok(1.5), "d": ok(2.5), "e": failed_task()}, suite)
    assert sc.fast_p == {0.0: 4 / 5, 1.0: 2 / 5, 1.5: 1 / 5, 2.0: 1 / 5}


def test_submission_mean_sol_fraction():
    sc = submission_score({"a": ok(2.0, 0.2), "b": ok(2.0, 0.8), "c": ok(2.0)}, ["a", "b", "c"])
    assert sc.mean_sol_fraction == pytest.approx(0.4)


@pytest.mark.parametrize(("scores", "suite"), [
    pytest.param({}, [], id="empty-suite"),
    pytest.param({}, ["a", "a"], id="duplicate-slug"),
    pytest.param({"zzz": ok(1.0)}, ["a"], id="score-outside-suite"),
])
def test_submission_rejects(scores, suite):
    with pytest.raises(ValueError):
        submission_score(scores, suite)


def test_eager_reference_row():
    sc = eager_reference(SUITE26)
    assert sc.performance_score == 1.0 and sc.correctness_rate == 1.0 and sc.correct_count == 26
    assert sc.fast_p[0.0] == 1.0 and sc.fast_p[1.0] == 0.0  # strictly faster than eager: none


# ----------------------------------------------------------------------------------- paired delta


def test_guided_twice_as_fast_everywhere():
    unguided = {s: ok(1.0 + i / 10) for i, s in enumerate(SUITE26)}
    guided = {s: ok(2 * (1.0 + i / 10)) for i, s in enumerate(SUITE26)}
    pc = paired_comparison(unguided, guided, SUITE26, n_boot=2000)
    assert pc.score_ratio == pytest.approx(2.0)
    assert all(r == pytest.approx(2.0) for r in pc.per_task_ratios.values())
    assert pc.ci_low > 1 and pc.ci_low == pytest.approx(2.0) and pc.ci_high == pytest.approx(2.0)
    assert pc.wilcoxon_p < 1e-4 and pc.sign_test_p == pytest.approx(2 / 2**26)
    assert pc.n_tasks == 26 and pc.verdict == "guidance helped"


def test_guided_worse_everywhere():
    unguided = {s: ok(2.0) for s in SUITE26}
    guided = {s: ok(1.0 + (i % 3) / 10) for i, s in enumerate(SUITE26)}
    assert paired_comparison(unguided, guided, SUITE26, n_boot=2000).verdict == "guidance hurt"


def test_identical_pairs():
    scores = {s: ok(1.0 + i / 7) for i, s in enumerate(SUITE26)}
    pc = paired_comparison(scores, dict(scores), SUITE26, n_boot=500)
    assert pc.score_ratio == 1.0 and pc.ci_low == 1.0 and pc.ci_high == 1.0
    assert pc.wilcoxon_p == 1.0 and pc.sign_test_p == 1.0
    assert pc.verdict == "no significant difference"


def test_score_ratio_equals_ratio_of_performance_scores():
    suite = ["a", "b", "c", "d"]
    unguided = {"a": ok(1.0), "b": failed_task(), "c": ok(3.0)}
    guided = {"a": ok(2.0), "b": ok(1.5), "d": ok(0.8)}
    pc = paired_comparison(unguided, guided, suite, n_boot=500)
    expected = submission_score(guided, suite).performance_score / submission_score(unguided, suite).performance_score
    assert pc.score_ratio == pytest.approx(expected)
    assert pc.per_task_ratios == pytest.approx({"a": 2.0, "b": 15.0, "c": 0.1 / 3.0, "d": 8.0})


def test_mixed_noise_is_not_significant():
    ratios = [1.3, 0.8, 1.1, 0.9, 1.2, 0.85, 1.05, 0.95]
    suite = [f"t{i}" for i in range(len(ratios))]
    pc = paired_comparison({s: ok(1.0) for s in suite}, {s: ok(r) for s, r in zip(suite, ratios, strict=True)}, suite)
    assert pc.ci_low < 1 < pc.ci_high
    assert pc.verdict == "no significant difference"


def test_bootstrap_deterministic_and_contains_point_estimate():
    logs = [math.log(r) for r in (1.5, 0.9, 2.0, 1.1, 0.7, 1.3, 1.8, 1.0, 1.2, 0.95)]
    a = scoring.bootstrap_ci(logs, n_boot=10_000, seed=7)
    b = scoring.bootstrap_ci(logs, n_boot=10_000, seed=7)
    c = scoring.bootstrap_ci(logs, n_boot=10_000, seed=8)
    assert a == b and a != c
    point = math.exp(sum(logs) / len(logs))
    assert a[0] < point < a[1]
    wide = scoring.bootstrap_ci(logs, n_boot=10_000, seed=7, confidence=0.99)
    assert wide[0] <= a[0] and a[1] <= wide[1]


@pytest.mark.parametrize(("kwargs", "logs"), [
    pytest.param({"n_boot": 0}, [0.1], id="no-resamples"),
    pytest.param({"confidence": 1.0}, [0.1], id="confidence-1"),
    pytest.param({}, [], id="empty"),
    pytest.param({}, [math.nan], id="nan"),
])
def test_bootstrap_rejects(kwargs, logs):
    with pytest.raises(ValueError):
        scoring.bootstrap_ci(logs, **kwargs)


def test_paired_rejects_scores_outside_suite():
    with pytest.raises(ValueError):
        paired_comparison({"x": ok(1.0)}, {}, ["a"])


# ---------------------------------------------------------------------------------------- ablation


def test_ablation_curve_orders_conditions():
    curve = ablation_curve({"L1+L2+L3": 2.49, "none": 1.69, "L1+L2": 2.2, "L1": 1.9})
    assert curve == [("none", 1.69), ("L1", 1.9), ("L1+L2", 2.2), ("L1+L2+L3", 2.49)]


def test_ablation_curve_leaves_out_conditions_not_run():
    assert ablation_curve({"L1+L2+L3": 2.0, "none": 1.0}) == [("none", 1.0), ("L1+L2+L3", 2.0)]


@pytest.mark.parametrize("scores", [
    pytest.param({"L2": 1.0}, id="unknown-condition"),
    pytest.param({"l1": 1.0}, id="wrong-case"),
    pytest.param({}, id="empty"),
    pytest.param({"none": math.nan}, id="nan-score"),
])
def test_ablation_curve_rejects(scores):
    with pytest.raises(ValueError):
        ablation_curve(scores)
