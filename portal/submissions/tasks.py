"""Celery tasks of the submission side: thin shells that load by id and call the actions.

``evaluate_submission_task(submission_id, number)`` is sent to the queue of the submission's
hardware profile (:func:`portal.submissions.dispatch.dispatch_on_commit`). It is keyed by
(submission, attempt number): a duplicate delivery finds the attempt claimed or finished and
does nothing; an attempt a moderator asked to run on another node is handed back to the queue by
the worker it avoids (``_hand_back``). Late acks, prefetch 1 and reject-on-worker-lost come from the app configuration
(``portal/settings/base.py``). ``reap_stale_runs_task`` (runs whose worker went quiet) and
``requeue_lost_task`` (queued runs whose broker message was lost) run on the beat schedule.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from portal.audit.services import audit_record
from portal.submissions import actions
from portal.submissions.constants import Status
from portal.submissions.evaluation import evaluate_attempt
from portal.submissions.models import EvaluationAttempt
from portal.submissions.sweep import do_requeue_lost

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True)
def evaluate_submission_task(self, submission_id: int, number: int, **kwargs: object) -> str:  # noqa: ANN001
    """Judge attempt ``number`` of submission ``submission_id`` with the engine.

    Unknown keyword arguments are logged and ignored, so a producer newer than this worker (a
    rolling deploy) does not break it.
    """
    if kwargs:
        log.warning("evaluate_submission_task(%s, %s): ignoring %s", submission_id, number, sorted(kwargs))
    worker = self.request.hostname or "worker"
    if _hand_back(self, submission_id, number, worker):
        raise self.retry(countdown=settings.D2K_OTHER_NODE_WAIT_S, max_retries=settings.D2K_OTHER_NODE_TRIES)
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    try:
        outcome = evaluate_attempt(submission_id, number, worker=worker, delivery=self.request.id or "",
                                   redelivered=redelivered)
    except SoftTimeLimitExceeded:
        attempt = EvaluationAttempt.objects.filter(submission_id=submission_id, number=number).first()
        outcome = "soft time limit"
        if attempt is not None:
            actions.do_record_infra_error(attempt.pk, None, "portal:infra:time-limit",
                                          "the evaluation ran past the worker's time limit")
    log.info("evaluate_submission_task(%s, %s): %s", submission_id, number, outcome)
    return outcome


def _hand_back(task, submission_id: int, number: int, worker: str) -> bool:  # noqa: ANN001
    """Whether this worker should hand the attempt back to its queue: a moderator asked for it to
    run on another node than ``worker``. After ``D2K_OTHER_NODE_TRIES`` hand-backs (no other
    worker took it) it runs here, and the audit log says so."""
    attempt = (EvaluationAttempt.objects.filter(submission_id=submission_id, number=number, status=Status.QUEUED)
               .select_related("submission").first())
    if attempt is None or not attempt.avoid_worker or attempt.avoid_worker != worker:
        return False
    if task.request.retries < settings.D2K_OTHER_NODE_TRIES:
        log.info("evaluate_submission_task(%s, %s): asked to run on another node than %s; handed back (%d)",
                 submission_id, number, worker, task.request.retries + 1)
        return True
    audit_record("attempt.node", attempt, system=worker, submission_id=submission_id,
                 reason=f"no other node took attempt {number} after {settings.D2K_OTHER_NODE_TRIES} hand-backs; "
                        f"it ran on {worker}, the node it was to avoid",
                 data={"attempt": number, "avoid_worker": worker})
    return False


@shared_task(acks_late=True)
def reap_stale_runs_task(**kwargs: object) -> int:
    """Requeue (or fail) running attempts whose heartbeat went quiet; safe to run concurrently."""
    reaped = actions.do_reap_stale_runs()
    for pk, outcome in reaped:
        log.warning("reaped attempt %s: %s", pk, outcome)
    return len(reaped)


@shared_task(acks_late=True)
def requeue_lost_task(**kwargs: object) -> int:
    """Re-send the messages of queued attempts that the broker no longer holds; safe to run concurrently."""
    sent = do_requeue_lost()
    return len(sent)
