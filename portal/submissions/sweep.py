"""Re-send the evaluations whose broker message was lost; run on the beat schedule.

An attempt stays ``queued`` until a worker claims it, and only a broker message makes a worker
do so. That message can be lost without the database knowing: Redis restarted without its data
(no persistence, a replaced host, a failover to an empty replica), or the broker was down when
the upload committed (the publish after commit failed, see
:func:`portal.submissions.dispatch.dispatch_on_commit`). The sweep compares the attempts that
have been ``queued`` longer than ``D2K_REQUEUE_GRACE_S`` with the messages the broker holds
(waiting or unacknowledged, :func:`portal.broker.held_task_args`) and sends one message for each
attempt that has none. A message sent twice is harmless (the task is keyed by (submission,
attempt) and a second delivery finds the attempt claimed or finished), but the comparison keeps
it from happening in the normal case, so a long queue is not inflated by every sweep.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from portal import broker
from portal.audit.services import audit_record
from portal.celery import app
from portal.submissions.constants import Status
from portal.submissions.dispatch import dispatch_on_commit
from portal.submissions.models import EvaluationAttempt

log = logging.getLogger(__name__)

TASK = "portal.submissions.tasks.evaluate_submission_task"


def do_requeue_lost(grace_s: float | None = None) -> list[tuple[int, int]]:
    """Send a message for every queued attempt the broker holds none for; returns (submission, number) pairs.

    The database is read before the broker, so an attempt claimed meanwhile is seen running when
    its row is locked and is left alone.
    """
    grace = settings.D2K_REQUEUE_GRACE_S if grace_s is None else grace_s
    cutoff = timezone.now() - timedelta(seconds=grace)
    waiting = list(EvaluationAttempt.objects.filter(status=Status.QUEUED, submission__current_attempt=F("pk"),
                                                    submission__updated_at__lt=cutoff)
                   .values_list("pk", "submission_id", "number", "queue"))
    if not waiting:
        return []
    with app.connection_for_write() as conn:
        held = {(queue, *args) for queue in {row[3] for row in waiting}
                for args in broker.held_task_args(conn, queue, TASK)}
    sent = []
    for pk, submission_id, number, queue in waiting:
        if (queue, submission_id, number) in held:
            continue
        with transaction.atomic():
            attempt = EvaluationAttempt.objects.select_for_update().filter(pk=pk, status=Status.QUEUED).first()
            if attempt is None:  # claimed (or cancelled) since it was read
                continue
            audit_record("attempt.redispatch", attempt, system="system:sweep", submission_id=submission_id,
                         reason=f"queued since before {cutoff:%Y-%m-%d %H:%M:%S} and no message on {queue}")
            dispatch_on_commit(submission_id, number, queue)
        log.warning("re-sent the lost message of attempt %s.%s to %s", submission_id, number, queue)
        sent.append((submission_id, number))
    return sent
