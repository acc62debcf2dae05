"""The bridge from engine results to scores: smoke workloads ignored, failures and untimed runs fail."""

from __future__ import annotations

import math

import pytest

from evaluator.result import TaskResult, Timing, WorkloadResult
from evaluator.score_result import score_task_result, workload_outcomes


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, mean_ms=ms, min_ms=ms, count=20, rel_stderr=0.001,
                  host_over_device=1.0, compile_s=0.0)


def _workload(name: str, base: float | None, cand: float | None, *, smoke: bool = False,
              correct: bool = True, sol: float | None = None) -> WorkloadResult:
    timings = {}
    if base is not None:
        timings["baseline"] = _timing(base)
    if cand is not None:
        timings["candidate"] = _timing(cand)
    return WorkloadResult(name=name, smoke=smoke, params={}, flops=0.0, bytes=0.0, correct=correct, trials=[],
                          timings=timings, sol_ms=sol)


def _task(*workloads: WorkloadResult, status: str = "correct", verdict: str = "unjudged") -> TaskResult:
    return TaskResult(slug="t", status=status, verdict=verdict, workloads=list(workloads))


def test_geomean_of_real_workloads_ignores_smoke() -> None:
    task = _task(_workload("W1", 4.0, 1.0), _workload("W2", 9.0, 1.0), _workload("S1", 1.0, 100.0, smoke=True))
    assert [o.name for o in workload_outcomes(task)] == ["W1", "W2"]
    score = score_task_result(task)
    assert score.correct and math.isclose(score.speedup, 6.0)


def test_sol_clamp_and_fraction_flow_through() -> None:
    score = score_task_result(_task(_workload("W1", 10.0, 0.5, sol=1.0)))
    assert math.isclose(score.speedup, 10.0)  # clamped at t_base / t_SOL
    assert score.sol_fraction is None and any("speed of light" in f for f in score.findings)


@pytest.mark.parametrize(("status", "verdict", "needle"), [
    ("incorrect", "unjudged", "incorrect"),
    ("timeout", "unjudged", "timeout"),
    ("correct", "rejected-cheat", "cheat"),
])
def test_engine_failures_score_as_failures(status: str, verdict: str, needle: str) -> None:
    score = score_task_result(_task(_workload("W1", 4.0, 1.0), status=status, verdict=verdict))
    assert not score.correct and score.speedup is None and needle in score.findings[0]


def test_untimed_or_smoke_only_runs_cannot_be_scored() -> None:
    untimed = score_task_result(_task(_workload("W1", None, None)))
    assert not untimed.correct and "not timed" in untimed.findings[0]
    smoke_only = score_task_result(_task(_workload("S1", 1.0, 1.0, smoke=True)))
    assert not smoke_only.correct and "smoke-only" in smoke_only.findings[0]


def test_torch_compile_is_scored_by_its_own_outcome_not_the_candidates() -> None:
    """The torch.compile reference row: a workload the expert got wrong is still torch.compile's
    timed run; torch.compile failing on the baseline fails its task with that reason; a run that
    never asked for torch.compile does not measure it."""
    from evaluator.score_result import measured

    def with_compile(w: WorkloadResult, ms: float | None, why: str = "") -> WorkloadResult:
        timings = dict(w.timings)
        if ms is not None:
            timings["compile"] = _timing(ms)
        return w.model_copy(update={"timings": timings, "untimed": {"compile": why} if why else {}})

    expert_wrong = _task(with_compile(_workload("W1", 4.0, 1.0, correct=False), 2.0), status="incorrect")
    assert not score_task_result(expert_wrong).correct
    compiled = score_task_result(expert_wrong, "compile")
    assert compiled.correct and math.isclose(compiled.speedup, 2.0)

    failed = _task(with_compile(_workload("W1", 4.0, 1.0), 2.0),
                   with_compile(_workload("W2", 4.0, 1.0), None, "torch.compile of the baseline failed: InductorError"))
    score = score_task_result(failed, "compile")
    assert not score.correct and "W2: torch.compile of the baseline failed" in score.findings[0]
    assert measured(failed, "compile")

    not_asked = _task(_workload("W1", 4.0, 1.0))
    assert not measured(not_asked, "compile") and measured(not_asked, "candidate")


@pytest.mark.parametrize("times", [(4.0, 0.0), (0.0, 1.0), (4.0, float("nan"))])
def test_a_zero_or_non_finite_time_fails_the_task_instead_of_stopping_the_scoring(times) -> None:
    score = score_task_result(_task(_workload("W1", 4.0, 1.0), _workload("W2", *times)))
    assert not score.correct and "zero or non-finite time" in score.findings[0] and "W2" in score.findings[0]
