"""Which queue runs a hardware profile, and sending an attempt there once the transaction commits."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction


def queue_for(hardware: str, mode: str = "kernel") -> str:
    """Kernels run on their hardware profile's queue; design documents go to the judge's."""
    return settings.D2K_JUDGE_QUEUE if mode == "design" else settings.D2K_HARDWARE_QUEUES[hardware]


def dispatch_on_commit(submission_id: int, number: int, queue: str) -> None:
    """Queue ``evaluate_submission_task`` after commit, so a worker never reads a row that may roll back.

    A broker that cannot be reached then does not fail the request that already committed (an
    upload would answer 500 for a submission it stored): the error is logged, and the sweep
    (:mod:`portal.submissions.sweep`) sends the message once the broker is back.
    """
    from portal.submissions.tasks import evaluate_submission_task  # the task module imports actions

    transaction.on_commit(lambda: evaluate_submission_task.apply_async(args=[submission_id, number], queue=queue),
                          robust=True)
