"""Quotas, counted in the database under the team's row lock (PORTAL.md, REST API).

The caller holds ``select_for_update`` on the team, so two concurrent submits of one team are
serialized and cannot both see room for one more. The daily quota counts GPU runs the team
asked for: each new submission and each re-run it requested (a moderator's re-run and the
automatic retry of an infrastructure fault are not the team's). ``error`` runs (our fault) are
not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from portal.submissions.constants import ACTIVE_STATUSES, Status
from portal.submissions.models import EvaluationAttempt, Submission
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
            return f"the team has used its {self.limit} runs (submissions and re-runs) of the last 24 hours"
        return f"the team already has {self.limit} submissions queued or running"


def quota_check_locked(team: Team) -> None:
    """Raise :class:`QuotaExceeded` if one more run is over a quota; the team row must be locked."""
    active = Submission.objects.filter(team=team, status__in=ACTIVE_STATUSES).count()
    if active >= team.quota_concurrent:
        raise QuotaExceeded("concurrent", team.quota_concurrent, CONCURRENT_RETRY_AFTER_S)
    since = timezone.now() - WINDOW
    created = list(Submission.objects.filter(team=team, created_at__gte=since).exclude(status=Status.ERROR)
                   .values_list("created_at", flat=True))
    reruns = list(EvaluationAttempt.objects.filter(submission__team=team, team_rerun=True, created_at__gte=since)
                  .exclude(status=Status.ERROR).values_list("created_at", flat=True))
    runs = sorted(created + reruns)
    if len(runs) >= team.quota_per_day:
        # Room comes back when the oldest run that holds the quota full leaves the window.
        if team.quota_per_day == 0:  # no runs at all for this team: a day is as good as any answer
            wait = WINDOW.total_seconds()
        else:
            oldest = runs[len(runs) - team.quota_per_day]
            wait = (oldest + WINDOW - timezone.now()).total_seconds()
        raise QuotaExceeded("daily", team.quota_per_day, max(1, math.ceil(wait)))
