"""Turn the engine's recorded results into scores: the one bridge from ``result.py`` to ``scoring.py``.

The CLI, the Celery workers and the leaderboard import engine JSON; all of them go through this
module so a task's score is computed from a :class:`~evaluator.result.TaskResult` exactly one way.
Smoke workloads are never scored (they exist for the interpreter), and a task the engine did not
mark ``correct`` (incorrect, crashed, timed out, rejected as a cheat) scores as a failure whatever
its per-workload flags say.
"""

from __future__ import annotations

from evaluator.result import RunResult, TaskResult
from evaluator.scoring import TaskScore, WorkloadOutcome, failed_task, task_score

BASELINE = "baseline"
CANDIDATE = "candidate"


def workload_outcomes(task: TaskResult, provider: str = CANDIDATE) -> list[WorkloadOutcome]:
    """The scored (non-smoke) workloads of ``task`` as seen by ``provider`` against the eager baseline."""
    outcomes = []
    for w in task.workloads:
        if w.smoke:
            continue
        base = w.timings.get(BASELINE)
        cand = w.timings.get(provider)
        outcomes.append(WorkloadOutcome(
            correct=w.correct,
            baseline_ms=base.median_ms if base else None,
            candidate_ms=cand.median_ms if cand else None,
            sol_ms=w.sol_ms,
            name=w.name,
        ))
    return outcomes


def score_task_result(task: TaskResult, provider: str = CANDIDATE) -> TaskScore:
    """The task's :class:`TaskScore`; a failure when the engine failed it, was not timed, or has no workloads.

    An untimed run (``check``, or the interpreter) proves correctness but carries no speedup, so it
    cannot be scored: that is an error of the caller, reported as a failure with the reason.
    """
    if task.status != "correct" or task.verdict == "rejected-cheat":
        why = task.error_code or task.status
        if task.verdict == "rejected-cheat":
            why = f"rejected as a cheat: {task.reason or why}"
        return failed_task(f"{task.slug}: {why}")
    outcomes = workload_outcomes(task, provider)
    if not outcomes:
        return failed_task(f"{task.slug}: no scored workloads (smoke-only run)")
    untimed = [o.name for o in outcomes if o.baseline_ms is None or o.candidate_ms is None]
    if untimed:
        return failed_task(f"{task.slug}: not timed for {provider!r}: {', '.join(untimed)}")
    return task_score(outcomes)


def score_run(run: RunResult, provider: str = CANDIDATE) -> dict[str, TaskScore]:
    """Slug → score for every task in a run, ready for :func:`evaluator.scoring.submission_score`."""
    return {t.slug: score_task_result(t, provider) for t in run.tasks}
