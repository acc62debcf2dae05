"""Compute and store the scores of a published submission (the only writer of :mod:`portal.scores.models`).

Called by the moderation service when a result is published (and again on un-publishing, to
remove them). The engine's per-workload JSON is turned back into :class:`evaluator.result.TaskResult`
and scored by :func:`evaluator.score_result.score_task_result`; the suite is the live catalogue
(every non-retired task), so a submission that skipped a task is scored with the failure penalty
for it, exactly as :func:`evaluator.scoring.submission_score` defines.
"""

from __future__ import annotations

from collections import defaultdict

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q

from agents.judge import PROMPT_VERSION
from evaluator.scoring import TaskScore as Score
from evaluator.scoring import submission_score
from leaderboard.models import Task
from portal.scores.models import ALL, JudgeScore, SubmissionScore, TaskScore
from portal.submissions.models import EvaluationAttempt, Submission
from portal.submissions.selectors import task_score


def attempt_task_scores(attempt: EvaluationAttempt) -> dict[str, Score]:
    rows = attempt.task_results.select_related("task").prefetch_related("workloads")
    return {row.task.slug: task_score(row) for row in rows}


def suites() -> dict[str, list[str]]:
    """``all`` -> every live task; each category -> its live tasks (ordered by task id)."""
    out: dict[str, list[str]] = defaultdict(list)
    for slug, category in Task.objects.filter(retired=False).order_by("task_id").values_list("slug", "category"):
        out[ALL].append(slug)
        out[category].append(slug)
    return dict(out)


def _group(submission: Submission) -> dict[str, object]:
    return {"hardware": submission.hardware, "guidance": submission.guidance, "mode": submission.mode,
            "budget": submission.budget, "team_name": submission.team.name, "model_name": str(submission.model),
            "harness_name": str(submission.harness)}


@transaction.atomic
def record_scores(submission: Submission) -> list[SubmissionScore]:
    """(Re)compute every score row of a published submission; marks it the latest of its group."""
    attempt = submission.published_attempt
    if attempt is None or submission.published_at is None:
        raise ValueError(f"submission {submission.pk} is not published")
    scores = attempt_task_scores(attempt)
    tasks = {t.slug: t for t in Task.objects.filter(slug__in=scores)}
    TaskScore.objects.filter(submission=submission).delete()
    TaskScore.objects.bulk_create([
        TaskScore(submission=submission, task=tasks[slug], correct=s.correct, speedup=s.speedup,
                  sol_fraction=s.sol_fraction, findings=list(s.findings)) for slug, s in scores.items()])
    turns = dict(submission.tasks.select_related("task").values_list("task__slug", "turns_used"))
    group = _group(submission)
    judged = judge_means(submission)  # a design-only submission is judged before it is published
    SubmissionScore.objects.filter(submission=submission).delete()
    rows = []
    for scope, suite in suites().items():
        attempted = {slug: s for slug, s in scores.items() if slug in suite}
        if scope != ALL and not attempted:
            continue
        sc = submission_score(attempted, suite)
        used = [turns[s] for s in attempted if turns.get(s) is not None]
        rows.append(SubmissionScore(
            submission=submission, attempt=attempt, scope=scope, published_at=submission.published_at, **group,
            performance_score=sc.performance_score, correctness_rate=sc.correctness_rate,
            suite_correctness_rate=sc.suite_correctness_rate, correct_count=sc.correct_count, attempted=sc.attempted,
            suite_size=sc.suite_size, geomean_correct=sc.geomean_correct,
            fast_p={str(p): v for p, v in sc.fast_p.items()}, mean_sol_fraction=sc.mean_sol_fraction,
            turns_used=round(sum(used) / len(used)) if used else None, **judged))
    SubmissionScore.objects.bulk_create(rows)
    _refresh_latest(group)
    transaction.on_commit(new_board_generation)
    return rows


def judge_means(submission: Submission) -> dict[str, float | None]:
    """The board's judge columns: the mean judge score of the submission's tasks, per kind, under
    the current prompt version (None where nothing is judged).

    Each task counts once: its newest judgement (of the published attempt, for a design-only
    submission) by the configured judge model (``D2K_JUDGE_MODEL``,
    which publication judges with), or its newest by any model where none is configured. Averaging
    every stored row would count a task twice once the judge model changed between evaluation and
    publication, and mix two judges' scales in one number.
    """
    scores = JudgeScore.objects.filter(submission_task__submission=submission, prompt_version=PROMPT_VERSION)
    if submission.published_attempt_id is not None:  # a re-run's judgements count once it is published
        scores = scores.filter(Q(attempt__isnull=True) | Q(attempt_id=submission.published_attempt_id))
    if settings.D2K_JUDGE_MODEL:
        scores = scores.filter(judge_model=settings.D2K_JUDGE_MODEL)
    newest: dict[tuple[int, str], float] = {}
    for task_id, kind, score in scores.order_by("-created_at", "-pk").values_list("submission_task_id", "kind", "score"):
        newest.setdefault((task_id, kind), score)
    means: dict[str, float | None] = {}
    for kind in ("design", "implementation"):
        values = [v for (_, k), v in newest.items() if k == kind]
        means[f"{kind}_score"] = sum(values) / len(values) if values else None
    return means


@transaction.atomic
def remove_scores(submission: Submission) -> None:
    """A result that is no longer published leaves the board; its group's latest row is recomputed."""
    group = _group(submission)
    SubmissionScore.objects.filter(submission=submission).delete()
    TaskScore.objects.filter(submission=submission).delete()
    _refresh_latest(group)
    transaction.on_commit(new_board_generation)


def new_board_generation() -> None:
    """The board's cached charts and menus are stale (a publication, or an imported reference
    run): a shared cache drops them at once, a per-process one within ``BOARD_CACHE_S``."""
    try:
        cache.incr("board:generation")
    except ValueError:
        cache.set("board:generation", 1, None)
    cache.delete("board:profiles")


def _refresh_latest(group: dict[str, object]) -> None:
    rows = SubmissionScore.objects.filter(**group)
    rows.update(is_latest=False)
    newest = rows.order_by("-published_at", "-submission_id").values_list("submission_id", flat=True).first()
    if newest is not None:
        rows.filter(submission_id=newest).update(is_latest=True)
