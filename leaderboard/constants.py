"""Named statuses of a task's reference verification.

The values of the engine's per-task status (``correct``, ``incorrect``, ``error``, ``timeout``,
``crashed``) are used as they are, so a stored status can be compared with the engine's JSON.
"""

from django.db import models


class VerificationStatus(models.TextChoices):
    UNVERIFIED = "unverified", "not verified"
    QUEUED = "queued", "queued"
    CORRECT = "correct", "correct"
    INCORRECT = "incorrect", "incorrect"
    ERROR = "error", "error"
    TIMEOUT = "timeout", "timeout"
    CRASHED = "crashed", "crashed"


#: Statuses that end a verification run.
FINAL_VERIFICATION_STATUSES = (
    VerificationStatus.CORRECT,
    VerificationStatus.INCORRECT,
    VerificationStatus.ERROR,
    VerificationStatus.TIMEOUT,
    VerificationStatus.CRASHED,
)

#: Engine statuses we accept from its JSON; anything else is recorded as an error.
ENGINE_STATUSES = frozenset(s.value for s in FINAL_VERIFICATION_STATUSES)
