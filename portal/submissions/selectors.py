"""Reads of submissions, attempts and results; the views and the API query nothing else.

:func:`engine_task_result` rebuilds the engine's own :class:`evaluator.result.TaskResult` from
the stored rows, so scores are always computed by :mod:`evaluator.score_result` (never here).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Max, Prefetch, Q, QuerySet
from django.utils import timezone

from evaluator.result import Finding
from evaluator.result import TaskResult as EngineTaskResult
from evaluator.result import WorkloadResult as EngineWorkload
from evaluator.score_result import score_task_result
from evaluator.scoring import TaskScore
from portal.moderation.permissions import is_moderator
from portal.scores.models import JudgeScore
from portal.submissions.constants import Status
from portal.submissions.models import (
    EvaluationAttempt,
    Submission,
    SubmissionTask,
    TaskResult,
    WorkerBeacon,
    WorkloadResult,
)

_SUBMISSION_RELATED = ("team", "model", "harness", "bundle", "current_attempt", "published_attempt")


def submissions_base() -> QuerySet[Submission]:
    return Submission.objects.select_related(*_SUBMISSION_RELATED)


def submissions_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Submission]:
    """Published ones for everybody; a team's own for its members; everything for moderators."""
    qs = submissions_base()
    if is_moderator(user):
        return qs
    if user.is_authenticated:
        return qs.filter(Q(published_attempt__isnull=False) | Q(team__memberships__user=user)).distinct()
    return qs.filter(published_attempt__isnull=False)


def submissions_of_teams(user: AbstractBaseUser) -> QuerySet[Submission]:
    return submissions_base().filter(team__memberships__user=user).order_by("-created_at", "-id")


def submission_get(pk: int) -> Submission | None:
    return (submissions_base().prefetch_related(
        Prefetch("tasks", queryset=SubmissionTask.objects.select_related("task").order_by("position")))
        .filter(pk=pk).first())


def attempts_of(submission: Submission) -> list[EvaluationAttempt]:
    return list(submission.attempts.order_by("-number").prefetch_related("decisions__moderator"))


def attempt_results(attempt: EvaluationAttempt | None) -> list[TaskResult]:
    if attempt is None:
        return []
    return list(TaskResult.objects.filter(attempt=attempt).select_related("task")
                .prefetch_related(Prefetch("workloads", queryset=WorkloadResult.objects.order_by("smoke", "position")))
                .order_by("task__task_id"))


def judge_scores(submission: Submission, *, private: bool = True) -> list[JudgeScore]:
    """The judge's scores of a submission's tasks (design documents and, once published, kernels).

    Outsiders (``private=False``) see only what is published: the judgement made at publication
    (no attempt) and the published attempt's; a moderator's re-run of a design-only submission
    is judged again, and that judgement stays with the team and moderators until it is approved.
    """
    rows = JudgeScore.objects.filter(submission_task__submission=submission)
    if not private:
        rows = rows.filter(Q(attempt__isnull=True) | Q(attempt_id=submission.published_attempt_id))
    return list(rows.select_related("submission_task__task")
                .order_by("submission_task__position", "kind", "-created_at"))


def judge_scores_by_task(scores: list[JudgeScore]) -> dict[int, list[JudgeScore]]:
    """The scores grouped by submission task id, for a page's per-task column."""
    out: dict[int, list[JudgeScore]] = {}
    for row in scores:
        out.setdefault(row.submission_task_id, []).append(row)
    return out


def engine_task_result(row: TaskResult) -> EngineTaskResult:
    """The stored result as the engine's model (workloads prefetched or not)."""
    return EngineTaskResult(
        slug=row.task.slug, status=row.status, error_code=row.error_code, reason=row.reason, verdict=row.verdict,
        workloads=[EngineWorkload.model_validate(w.data) for w in row.workloads.all()],
        findings=[Finding.model_validate(f) for f in row.findings], aten_ops=row.aten_ops, autotune=row.autotune,
        wall_s=row.wall_s)


def task_score(row: TaskResult) -> TaskScore:
    return score_task_result(engine_task_result(row))


def published_newest_first() -> QuerySet[Submission]:
    return submissions_base().filter(published_attempt__isnull=False).order_by("-published_at", "-id")


def latest_published(limit: int = 10) -> list[Submission]:
    return list(published_newest_first()[:limit])


def progress_of(submission: Submission) -> dict[str, object]:
    """What the detail page polls: status, attempt, progress, heartbeat."""
    attempt = submission.current_attempt
    return {
        "id": submission.pk, "status": submission.status,
        "final": submission.status not in (Status.QUEUED, Status.RUNNING, Status.RECEIVED, Status.VALIDATED),
        "attempt": attempt.number if attempt else None,
        "progress": attempt.progress if attempt else {},
        "heartbeat_at": attempt.heartbeat_at.isoformat() if attempt and attempt.heartbeat_at else None,
        "results": _result_count(submission, attempt),
    }


def _result_count(submission: Submission, attempt: EvaluationAttempt | None) -> int:
    annotated = getattr(submission, "result_count", None)  # lists annotate it: no query per row
    if annotated is not None:
        return annotated
    return TaskResult.objects.filter(attempt=attempt).count() if attempt else 0


def with_result_counts(qs: QuerySet[Submission]) -> QuerySet[Submission]:
    return qs.annotate(result_count=Count("current_attempt__task_results", distinct=True))


def previous_published_kernel(submission: Submission, slug: str) -> SubmissionTask | None:
    """The team's latest published kernel for ``slug`` before this submission (moderation diff)."""
    return (SubmissionTask.objects.select_related("submission")
            .filter(submission__team_id=submission.team_id, task__slug=slug, submission__published_attempt__isnull=False,
                    submission__created_at__lt=submission.created_at)
            .order_by("-submission__created_at").first())


@dataclass(frozen=True)
class ProfileStatus:
    hardware: str
    queue: str
    queued: int
    running: int
    workers_alive: int
    last_heartbeat: object


def status_overview() -> tuple[list[ProfileStatus], list[WorkerBeacon]]:
    """Queue depth per hardware profile, and the workers seen recently (public status page)."""
    counts = {(row["hardware"], row["status"]): row["n"] for row in Submission.objects.filter(
        status__in=[Status.QUEUED, Status.RUNNING]).values("hardware", "status").annotate(n=Count("id"))}
    beats = dict(EvaluationAttempt.objects.filter(status=Status.RUNNING).values("queue")
                 .annotate(last=Max("heartbeat_at")).values_list("queue", "last"))
    alive_after = timezone.now() - timedelta(seconds=max(30, settings.D2K_HEARTBEAT_S * 6))
    workers = list(WorkerBeacon.objects.filter(last_seen__gte=alive_after).order_by("hostname"))
    rows = []
    for hardware, queue in sorted(settings.D2K_HARDWARE_QUEUES.items()):
        rows.append(ProfileStatus(hardware=hardware, queue=queue, queued=counts.get((hardware, Status.QUEUED), 0),
                                  running=counts.get((hardware, Status.RUNNING), 0),
                                  workers_alive=sum(1 for w in workers if queue in w.queues),
                                  last_heartbeat=beats.get(queue)))
    return rows, workers
