"""Quotas, counted in the database under the team's row lock (PORTAL.md, REST API).

The caller holds ``select_for_update`` on the team, so two concurrent submits of one team are
serialized and cannot both see room for one more. ``error`` submissions (our fault) are not
counted against the daily quota.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from portal.submissions.constants import ACTIVE_STATUSES, Status
from portal.submissions.models import Submission
from portal.teams.models import Team

WINDOW = timedelta(days=1)
#: When the concurrency quota is hit, how long a client should wait before trying again.
CONCURRENT_RETRY_AFTER_S = 60


@dataclass(frozen=True)
class QuotaExceeded(Exception):
    kind: str  # "daily" or "concurrent"
    limit: int
    retry_after_s: int

    def __str__(self) -> str:
        if self.kind == "daily":
            return f"the team has used its {self.limit} submissions of the last 24 hours"
        return f"the team already has {self.limit} submissions queued or running"


def quota_check_locked(team: Team, *, new_submission: bool = True) -> None:
    """Raise :class:`QuotaExceeded` if one more run is over a quota; the team row must be locked."""
    active = Submission.objects.filter(team=team, status__in=ACTIVE_STATUSES).count()
    if active >= team.quota_concurrent:
        raise QuotaExceeded("concurrent", team.quota_concurrent, CONCURRENT_RETRY_AFTER_S)
    if not new_submission:
        return
    since = timezone.now() - WINDOW
    window = Submission.objects.filter(team=team, created_at__gte=since).exclude(status=Status.ERROR)
    if window.count() >= team.quota_per_day:
        oldest = window.order_by("created_at").values_list("created_at", flat=True).first()
        wait = (oldest + WINDOW - timezone.now()).total_seconds() if oldest else WINDOW.total_seconds()
        raise QuotaExceeded("daily", team.quota_per_day, max(1, math.ceil(wait)))
