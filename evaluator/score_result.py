"""Turn the engine's recorded results into scores: the one bridge from ``result.py`` to ``scoring.py``.

The CLI, the Celery workers and the leaderboard import engine JSON; all of them go through this
module so a task's score is computed from a :class:`~evaluator.result.TaskResult` exactly one way.
Smoke workloads are never scored (they exist for the interpreter), and a task the engine did not
mark ``correct`` (incorrect, crashed, timed out, rejected as a cheat) scores as a failure whatever
its per-workload flags say.
"""

from __future__ import annotations

import math

from evaluator.result import RunResult, TaskResult
from evaluator.scoring import TaskScore, WorkloadOutcome, failed_task, task_score

BASELINE = "baseline"
CANDIDATE = "candidate"


def workload_outcomes(task: TaskResult, provider: str = CANDIDATE) -> list[WorkloadOutcome]:
    """The scored (non-smoke) workloads of ``task`` as seen by ``provider`` against the eager baseline.

    The candidate's correctness is the engine's verdict on it. A trusted provider (torch.compile
    of the baseline) runs our own code and is not checked against the reference, so a workload is
    correct for it when it was timed: ``w.correct`` is the candidate's, and must not make
    torch.compile fail where only the expert did.
    """
    outcomes = []
    for w in task.workloads:
        if w.smoke:
            continue
        base = w.timings.get(BASELINE)
        cand = w.timings.get(provider)
        outcomes.append(WorkloadOutcome(
            correct=w.correct if provider == CANDIDATE else cand is not None,
            baseline_ms=base.median_ms if base else None,
            candidate_ms=cand.median_ms if cand else None,
            sol_ms=w.sol_ms,
            name=w.name,
        ))
    return outcomes


def measured(task: TaskResult, provider: str) -> bool:
    """Whether the run says how ``provider`` did on ``task``: every scored workload has its time or
    the reason it has none (torch.compile failing on the baseline is an outcome; a run that did not
    ask for torch.compile says nothing about it)."""
    scored = [w for w in task.workloads if not w.smoke]
    return bool(scored) and all(provider in w.timings or provider in w.untimed for w in scored)


def score_task_result(task: TaskResult, provider: str = CANDIDATE) -> TaskScore:
    """The task's :class:`TaskScore`; a failure when the engine failed it, was not timed, or has no workloads.

    An untimed run (``check``, or the interpreter) proves correctness but carries no speedup, so it
    cannot be scored: that is an error of the caller, reported as a failure with the reason. The
    task's status and verdict are the candidate's; a trusted provider fails only by its own
    failures (``untimed`` names them).
    """
    if provider == CANDIDATE and (task.status != "correct" or task.verdict == "rejected-cheat"):
        why = task.error_code or task.status
        if task.verdict == "rejected-cheat":
            why = f"rejected as a cheat: {task.reason or why}"
        return failed_task(f"{task.slug}: {why}")
    outcomes = workload_outcomes(task, provider)
    if not outcomes:
        return failed_task(f"{task.slug}: no scored workloads (smoke-only run)")
    if provider != CANDIDATE:
        failures = [f"{w.name}: {w.untimed[provider]}" for w in task.workloads
                    if not w.smoke and provider not in w.timings and provider in w.untimed]
        if failures:
            return failed_task(f"{task.slug}: {failures[0]}")
    untimed = [o.name for o in outcomes if o.baseline_ms is None or o.candidate_ms is None]
    if untimed:
        return failed_task(f"{task.slug}: not timed for {provider!r}: {', '.join(untimed)}")
    # No call takes no time: a zero or non-finite median is a broken timing, which scores as a
    # failure with its reason instead of stopping the whole suite's scoring.
    broken = [o.name for o in outcomes if not (_usable(o.baseline_ms) and _usable(o.candidate_ms))
              or (o.sol_ms is not None and not _usable(o.sol_ms))]
    if broken:
        return failed_task(f"{task.slug}: a zero or non-finite time for {provider!r}: {', '.join(broken)}")
    return task_score(outcomes)


def _usable(ms: float | None) -> bool:
    return ms is not None and math.isfinite(ms) and ms > 0


def score_run(run: RunResult, provider: str = CANDIDATE) -> dict[str, TaskScore]:
    """Slug → score for every task in a run, ready for :func:`evaluator.scoring.submission_score`."""
    return {t.slug: score_task_result(t, provider) for t in run.tasks}
