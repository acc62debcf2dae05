"""Celery tasks of the leaderboard: thin shells that load by key and call services.

``verify_reference_task`` runs on the ``cpu.interpret`` queue (see ``CELERY_TASK_ROUTES``).
It is safe to run twice: the outcome overwrites the task row's verification fields.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from leaderboard.services import VerificationOutcome, task_record_verification
from leaderboard.tree import task_content_sha256
from leaderboard.verification import run_reference_check
from tasks.registry import TaskLoadError, get_task

log = logging.getLogger(__name__)


@shared_task(acks_late=True, time_limit=settings.D2K_VERIFY_TIMEOUT_S + 120,
             soft_time_limit=settings.D2K_VERIFY_TIMEOUT_S + 60)
def verify_reference_task(slug: str, **kwargs: object) -> str:
    """Check the expert kernel of ``slug`` with the engine and store the verdict on its row.

    Unknown keyword arguments are logged and ignored, so that a producer newer than this worker
    (a rolling deploy) does not make the task fail.
    """
    if kwargs:
        log.warning("verify_reference_task(%s): ignoring unexpected arguments %s", slug, sorted(kwargs))
    root = settings.D2K_TASKS_ROOT
    try:
        task = get_task(slug, root)
    except TaskLoadError as exc:
        outcome = VerificationOutcome("error", reason=f"task does not load: {exc}")
    else:
        outcome = run_reference_check(slug, task.expert_path, cwd=settings.BASE_DIR,
                                      timeout_s=settings.D2K_VERIFY_TIMEOUT_S,
                                      content_sha256=task_content_sha256(task))
    task_record_verification(slug, outcome)
    log.info("verify_reference_task(%s): %s %s", slug, outcome.status, outcome.reason[:200])
    return outcome.status
