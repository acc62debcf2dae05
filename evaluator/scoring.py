"""Every D2K-Bench score, in one place: the CLI, the Celery workers and the leaderboard all call this.

A number means the same thing everywhere only if one piece of code computes it, so nothing
here imports Django or torch: the inputs are plain medians in milliseconds and the outputs are
frozen dataclasses. The definitions follow SCORING.md:

* workload speedup ``s = t_baseline / t_candidate`` (eager baseline, same run, same GPU), clamped
  at the speed-of-light bound ``t_baseline / t_SOL`` when the SOL time is known;
* task speedup ``S`` = geometric mean of ``s`` over the task's workloads, if all are correct;
* Performance Score = geometric mean of ``S`` over the whole suite, a failed or missing task
  counting as :data:`FAILURE_PENALTY_SPEEDUP`;
* fast_p, SOL fractions, the paired (unguided, guided) delta and the layer-ablation curve.

Geometric means are taken in log space, so 26 tiny or huge factors neither underflow nor
overflow, and a ratio and its inverse weigh the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

FAILURE_PENALTY_SPEEDUP: float = 0.1
"""The speedup a failed or missing task counts as in the Performance Score and in paired deltas.

0.1 is a kernel ten times slower than PyTorch eager (which is 1.0 by definition). Correct
kernels, even naive ones, rarely fall below ~0.2, so a failure costs more than any plausible
correct answer. To make "failing never pays" a guarantee rather than a hope, a correct task's
contribution is floored at this same value (:func:`effective_speedup`): a correct kernel slower
than 10x eager scores exactly like a failure, never worse. Per failure out of 26 tasks the score
drops by a factor ``0.1 ** (1/26) ~= 0.915`` relative to an eager-speed answer.
"""

EAGER_SPEEDUP: float = 1.0
"""The PyTorch-eager reference row: its speedup over itself, on every task, by definition."""

FAST_P_THRESHOLDS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)
"""The p of fast_p: fraction of suite tasks that are correct with ``S > p`` (strictly)."""

ABLATION_CONDITIONS: tuple[str, ...] = ("none", "L1", "L1+L2", "L1+L2+L3")
"""Guidance layers in the order the ablation curve is drawn."""


def _check_positive(name: str, value: float) -> float:
    """A time or factor that must be a finite number > 0; anything else is a bug upstream."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def geomean(values: Iterable[float]) -> float:
    """Geometric mean, in log space; raises ValueError on no values or any non-positive/non-finite one.

    A zero or NaN would silently turn the mean into 0 or NaN, so it is refused rather than scored.
    """
    logs = [math.log(_check_positive("geomean value", v)) for v in values]
    if not logs:
        raise ValueError("geomean of no values")
    return math.exp(math.fsum(logs) / len(logs))


# --------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class WorkloadOutcome:
    """One workload as the engine measured it; times are medians in ms (None when not timed)."""

    correct: bool
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    sol_ms: float | None = None
    name: str = ""


@dataclass(frozen=True)
class WorkloadScore:
    speedup: float | None  # None for an incorrect workload
    sol_fraction: float | None  # SOL time / candidate time; None if unknown or physically impossible
    findings: tuple[str, ...] = ()


def workload_speedup(baseline_ms: float, candidate_ms: float, sol_ms: float | None = None) -> float:
    """``t_baseline / t_candidate``, clamped at ``t_baseline / t_SOL`` when SOL is known.

    The clamp stops a time driven to ~0 (a skipped computation, a timer glitch) from dominating
    the geometric mean: no kernel can honestly beat the speed of light.
    """
    s = _check_positive("baseline_ms", baseline_ms) / _check_positive("candidate_ms", candidate_ms)
    if sol_ms is not None:
        s = min(s, baseline_ms / _check_positive("sol_ms", sol_ms))
    return s


def sol_fraction(sol_ms: float, measured_ms: float) -> float:
    """SOL time / measured time: 1.0 is the hardware ceiling; above 1 is impossible (a finding)."""
    return _check_positive("sol_ms", sol_ms) / _check_positive("measured_ms", measured_ms)


def score_workload(w: WorkloadOutcome) -> WorkloadScore:
    """Speedup, SOL fraction and physics findings of one workload; an incorrect one has no speedup."""
    if not w.correct:
        return WorkloadScore(None, None)
    if w.baseline_ms is None or w.candidate_ms is None:
        raise ValueError(f"correct workload {w.name!r} needs baseline_ms and candidate_ms")
    s = workload_speedup(w.baseline_ms, w.candidate_ms, w.sol_ms)
    if w.sol_ms is None:
        return WorkloadScore(s, None)
    label = f"workload {w.name!r}" if w.name else "a workload"
    findings = []
    frac: float | None = sol_fraction(w.sol_ms, w.candidate_ms)
    if frac > 1.0:
        findings.append(f"{label}: candidate ran faster than the speed of light ({frac:.2f}x SOL): "
                        "impossible, so not a score; speedup clamped at the SOL bound")
        frac = None
    if sol_fraction(w.sol_ms, w.baseline_ms) > 1.0:
        findings.append(f"{label}: baseline ran faster than the speed of light: the SOL figure is suspect")
    return WorkloadScore(s, frac, tuple(findings))


# ------------------------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskScore:
    """A task's result: ``speedup`` (S) is set exactly when every workload was correct."""

    correct: bool
    speedup: float | None
    sol_fraction: float | None = None  # geomean over workloads with a valid SOL fraction
    findings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.correct:
            if self.speedup is None:
                raise ValueError("a correct task needs a speedup")
            _check_positive("speedup of a correct task", self.speedup)
        elif self.speedup is not None:
            raise ValueError("a failed task has no speedup")
        if self.sol_fraction is not None:
            _check_positive("sol_fraction", self.sol_fraction)


def failed_task(reason: str = "") -> TaskScore:
    """A task that did not pass (incorrect, crashed, timed out, rejected)."""
    return TaskScore(False, None, None, (reason,) if reason else ())


def task_score(workloads: Sequence[WorkloadOutcome]) -> TaskScore:
    """S = geomean of workload speedups if every workload is correct; otherwise the task failed.

    One wrong workload fails the task: a kernel that is fast on some shapes and wrong on others
    is not a kernel anyone can ship.
    """
    if not workloads:
        raise ValueError("a task needs at least one workload")
    scores = [score_workload(w) for w in workloads]
    findings = tuple(f for sc in scores for f in sc.findings)
    if not all(w.correct for w in workloads):
        wrong = [w.name or str(i) for i, w in enumerate(workloads) if not w.correct]
        return TaskScore(False, None, None, (f"incorrect workload(s): {', '.join(wrong)}", *findings))
    speedups = [sc.speedup for sc in scores if sc.speedup is not None]
    fracs = [sc.sol_fraction for sc in scores if sc.sol_fraction is not None]
    return TaskScore(True, geomean(speedups), geomean(fracs) if fracs else None, findings)


def effective_speedup(task: TaskScore | None) -> float:
    """What a task contributes to the Performance Score: S, floored at the penalty; failures get the penalty."""
    if task is None or task.speedup is None:
        return FAILURE_PENALTY_SPEEDUP
    return max(task.speedup, FAILURE_PENALTY_SPEEDUP)


# ------------------------------------------------------------------------------------- submissions


@dataclass(frozen=True)
class SubmissionScore:
    performance_score: float  # geomean over the suite, failed/missing tasks at the penalty
    correctness_rate: float  # correct / attempted (0.0 when nothing was attempted)
    suite_correctness_rate: float  # correct / suite size (the full-suite figure, / 26)
    correct_count: int
    attempted: int
    suite_size: int
    geomean_correct: float | None  # plain geomean of S over correct tasks only (see correct_count)
    fast_p: dict[float, float]  # p -> fraction of suite tasks correct with S > p
    mean_sol_fraction: float | None  # geomean of the correct tasks' SOL fractions
    findings: tuple[str, ...] = field(default=())

    @property
    def full_suite(self) -> bool:
        return self.attempted == self.suite_size


def _check_suite(task_scores: Mapping[str, TaskScore | None], suite: Sequence[str]) -> None:
    if not suite:
        raise ValueError("empty suite")
    if len(set(suite)) != len(suite):
        raise ValueError("suite lists a task twice")
    extra = set(task_scores) - set(suite)
    if extra:
        raise ValueError(f"scores for tasks outside the suite: {sorted(extra)}")


def submission_score(task_scores: Mapping[str, TaskScore | None], suite: Sequence[str]) -> SubmissionScore:
    """Score a submission over a suite; tasks absent from ``task_scores`` (or None) are missing.

    The Performance Score always spans the whole suite, so skipping a hard task cannot raise it.
    """
    _check_suite(task_scores, suite)
    tasks = [task_scores.get(slug) for slug in suite]
    attempted = sum(t is not None for t in tasks)
    correct = [t for t in tasks if t is not None and t.correct]
    speedups = [t.speedup for t in correct if t.speedup is not None]
    fracs = [t.sol_fraction for t in correct if t.sol_fraction is not None]
    n = len(suite)
    return SubmissionScore(
        performance_score=geomean(effective_speedup(t) for t in tasks),
        correctness_rate=len(correct) / attempted if attempted else 0.0,
        suite_correctness_rate=len(correct) / n,
        correct_count=len(correct),
        attempted=attempted,
        suite_size=n,
        geomean_correct=geomean(speedups) if speedups else None,
        fast_p={p: sum(s > p for s in speedups) / n for p in FAST_P_THRESHOLDS},
        mean_sol_fraction=geomean(fracs) if fracs else None,
        findings=tuple(f"{slug}: {f}" for slug, t in zip(suite, tasks, strict=True) if t for f in t.findings),
    )


def eager_reference(suite: Sequence[str]) -> SubmissionScore:
    """The PyTorch-eager reference row: every task correct at speedup 1.0, so its score is 1.0."""
    return submission_score({slug: TaskScore(True, EAGER_SPEEDUP) for slug in suite}, suite)


# ------------------------------------------------------------------------------------ paired delta


@dataclass(frozen=True)
class PairedComparison:
    score_ratio: float  # Performance Score guided / unguided (= geomean of per-task ratios)
    ci_low: float
    ci_high: float
    confidence: float
    per_task_ratios: dict[str, float]  # slug -> effective S guided / effective S unguided
    wilcoxon_p: float  # Wilcoxon signed-rank on log ratios (two-sided; 1.0 when all ratios are 1)
    sign_test_p: float  # exact two-sided binomial sign test on the ratios' directions
    n_tasks: int
    verdict: str  # "guidance helped" / "guidance hurt" / "no significant difference"


def bootstrap_ci(log_ratios: Sequence[float], n_boot: int = 10_000, seed: int = 0,
                 confidence: float = 0.95) -> tuple[float, float]:
    """Percentile-bootstrap CI of ``exp(mean(log_ratios))``, resampling tasks with replacement.

    Tasks are the unit of resampling because the suite, not the workload, is what a reader
    generalises over. Deterministic for a given seed.
    """
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    logs = np.asarray(log_ratios, dtype=float)
    if logs.size == 0 or not np.all(np.isfinite(logs)):
        raise ValueError("bootstrap needs finite log ratios")
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, logs.size, size=(n_boot, logs.size))].mean(axis=1)
    alpha = 1 - confidence
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return math.exp(lo), math.exp(hi)


def paired_tests(log_ratios: Sequence[float]) -> tuple[float, float]:
    """(Wilcoxon signed-rank p, exact sign-test p), two-sided; tasks with ratio exactly 1 carry no sign."""
    logs = np.asarray(log_ratios, dtype=float)
    nonzero = logs[logs != 0]
    if nonzero.size == 0:
        return 1.0, 1.0
    # Imported here: scipy.stats takes about 1.4 s to import, and every engine CLI run imports this
    # module for the per-task score, which needs no scipy (the CLI's import: 1.9 s -> 0.5 s).
    from scipy import stats

    wilcoxon_p = float(stats.wilcoxon(nonzero).pvalue)
    sign_p = float(stats.binomtest(int((nonzero > 0).sum()), int(nonzero.size), 0.5).pvalue)
    return wilcoxon_p, sign_p


def paired_comparison(unguided: Mapping[str, TaskScore | None], guided: Mapping[str, TaskScore | None],
                      suite: Sequence[str], n_boot: int = 10_000, seed: int = 0,
                      confidence: float = 0.95) -> PairedComparison:
    """Did guidance help the same model beyond noise? Failed/missing tasks count at the penalty.

    The verdict needs both the bootstrap CI to exclude 1 and the Wilcoxon test to reject at
    ``1 - confidence``: a conservative rule, so the page only claims what both agree on.
    """
    _check_suite(unguided, suite)
    _check_suite(guided, suite)
    ratios = {slug: effective_speedup(guided.get(slug)) / effective_speedup(unguided.get(slug)) for slug in suite}
    logs = [math.log(r) for r in ratios.values()]
    ci_low, ci_high = bootstrap_ci(logs, n_boot, seed, confidence)
    wilcoxon_p, sign_p = paired_tests(logs)
    alpha = 1 - confidence
    if ci_low > 1 and wilcoxon_p < alpha:
        verdict = "guidance helped"
    elif ci_high < 1 and wilcoxon_p < alpha:
        verdict = "guidance hurt"
    else:
        verdict = "no significant difference"
    return PairedComparison(score_ratio=geomean(ratios.values()), ci_low=ci_low, ci_high=ci_high,
                            confidence=confidence, per_task_ratios=ratios, wilcoxon_p=wilcoxon_p,
                            sign_test_p=sign_p, n_tasks=len(suite), verdict=verdict)


# ---------------------------------------------------------------------------------------- ablation


def ablation_curve(scores_by_condition: Mapping[str, float]) -> list[tuple[str, float]]:
    """Performance Scores of one model ordered none, L1, L1+L2, L1+L2+L3 (conditions not run are left out).

    An unknown condition name is an error, not a silently dropped point: it is almost always a typo.
    """
    if not scores_by_condition:
        raise ValueError("no conditions")
    unknown = set(scores_by_condition) - set(ABLATION_CONDITIONS)
    if unknown:
        raise ValueError(f"unknown ablation condition(s) {sorted(unknown)}; expected {list(ABLATION_CONDITIONS)}")
    return [(c, _check_positive(f"score of {c}", scores_by_condition[c]))
            for c in ABLATION_CONDITIONS if c in scores_by_condition]
