"""Celery tasks of the judge, on their own ``judge`` queue (an LLM call must never hold a GPU worker)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import transaction

from agents.providers import ProviderError
from portal.scores.judging import judge_configured, judge_submission_task
from portal.submissions.models import Submission

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=5)
def judge_task(self, submission_task_id: int) -> str:  # noqa: ANN001 - Celery's bound task
    """Judge one task of a published submission; transient provider failures are retried later."""
    try:
        scores = judge_submission_task(submission_task_id)
    except ProviderError as exc:
        if exc.transient:
            raise self.retry(exc=exc, countdown=min(600, 30 * 2 ** self.request.retries)) from exc
        log.error("judge: submission task %s: %s", submission_task_id, exc)
        return f"provider error: {exc}"
    except ValueError as exc:  # no valid answer after the judge's own retries: no score, said loudly
        log.error("judge: submission task %s: %s", submission_task_id, exc)
        return f"no valid judgement: {exc}"
    return ", ".join(f"{s.kind} {s.score:.0f}" for s in scores) or "nothing to judge"


def queue_judging(submission: Submission) -> int:
    """After publication commits: one judge task per task of the submission, if a judge is configured."""
    if not judge_configured():
        return 0
    ids = list(submission.tasks.values_list("pk", flat=True))
    transaction.on_commit(lambda: [judge_task.apply_async((pk,), queue="judge") for pk in ids])
    return len(ids)
