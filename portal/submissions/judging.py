"""Design-only submissions: the LLM judge scores each task's design document (AGENTS.md, Judge).

The judge itself is :func:`agents.judge.judge` (rubric from the task's guidance, strict JSON,
retries on malformed answers, scores computed from the items, never invented). This module only
builds the provider from the ``D2K_JUDGE_*`` settings (shared with the judging of published
submissions, :mod:`portal.scores.judging`) and reports through the actions, like the engine's worker job.
A provider failure, or a judge that gives no valid answer, is our side's fault: the attempt is
retried and then shown as ``error``; it never becomes a score.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from agents.judge import judge
from agents.providers import ProviderError, make_provider
from portal.scores.judging import judge_configured, provider_config
from portal.submissions import actions
from portal.submissions.models import SubmissionTask
from tasks.registry import TaskLoadError, get_task

INFRA_JUDGE = "portal:infra:judge"


__all__ = ["judge_attempt", "judge_configured"]


def judge_attempt(rows: list[SubmissionTask], attempt_id: int, claim: str, progress: dict) -> str:
    """Judge every task's design document; returns what happened (for the log)."""
    try:
        provider = make_provider(provider_config())
        root = Path(settings.D2K_TASKS_ROOT)
        for i, row in enumerate(rows):
            progress.update(task_index=i, task=row.task.slug, phase="judging")
            result = judge(provider, get_task(row.task.slug, root), row.design_source, "design")
            if not actions.do_record_judge_score(attempt_id, claim, row.task.slug, result):
                return "stopped: the attempt was cancelled or handed to another delivery"
    except (ProviderError, ValueError, TaskLoadError) as exc:
        outcome = actions.do_record_infra_error(attempt_id, claim, INFRA_JUDGE, f"{type(exc).__name__}: {exc}")
        return f"infrastructure error: {outcome}"
    outcome = actions.do_finish_judging(attempt_id, claim)
    return f"finished: {outcome}" if outcome else "stopped: the attempt was taken away before the end"
