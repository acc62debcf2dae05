"""Named states of a submission (PORTAL.md, State machine) and the groups the code asks about.

``received → validated → queued → running → evaluated → published | rejected``, plus ``failed``
(the submission's fault), ``error`` (ours: retried, then shown, and it uses no quota) and
``cancelled``. The allowed moves are in :mod:`portal.submissions.actions`, the only module that
changes a status.
"""

from django.db import models

from evaluator.manifest import DEFAULT_BUDGET as DEFAULT_BUDGET  # the manifest's default, defined once


class Status(models.TextChoices):
    RECEIVED = "received", "received"
    VALIDATED = "validated", "validated"
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    EVALUATED = "evaluated", "evaluated"
    PUBLISHED = "published", "published"
    REJECTED = "rejected", "rejected"
    FAILED = "failed", "failed"
    ERROR = "error", "error"
    CANCELLED = "cancelled", "cancelled"


#: A run is pending or under way: counts against the concurrency quota, shows live progress.
ACTIVE_STATUSES = (Status.RECEIVED, Status.VALIDATED, Status.QUEUED, Status.RUNNING)
#: No worker will touch the submission again unless someone asks for a re-run.
FINAL_STATUSES = (Status.PUBLISHED, Status.REJECTED, Status.FAILED, Status.ERROR, Status.CANCELLED)
#: States that end an evaluation attempt (the attempt's own status).
ATTEMPT_FINAL_STATUSES = (Status.EVALUATED, Status.PUBLISHED, Status.REJECTED, Status.FAILED, Status.ERROR,
                          Status.CANCELLED)


class Guidance(models.TextChoices):
    NONE = "none", "none"
    L1 = "L1", "L1"
    L1_L2 = "L1+L2", "L1+L2"
    L1_L2_L3 = "L1+L2+L3", "L1+L2+L3"


class Mode(models.TextChoices):
    KERNEL = "kernel", "kernel"
    DESIGN = "design", "design only"


#: Stable codes of our own failures (the engine's are in evaluator.errors).
INFRA_LOST = "portal:infra:heartbeat-lost"
INFRA_WORKER = "portal:infra:worker"
INFRA_HARDWARE = "portal:infra:wrong-hardware"
