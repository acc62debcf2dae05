"""Per-object rules: who may see and act on a submission. Views and the API both ask here.

A submission is visible to its team's members and to moderators, and to everyone once an
attempt of it is published (then only the published attempt's results are shown to outsiders).
Acting on it (cancel, re-run) is for its team's members; moderators act through moderation.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from portal.moderation.permissions import is_moderator
from portal.submissions.models import Submission
from portal.teams.models import Membership

User = AbstractBaseUser | AnonymousUser


def is_member(user: User, team_id: int) -> bool:
    return bool(user.is_authenticated and Membership.objects.filter(user=user, team_id=team_id).exists())


def can_see_private(user: User, submission: Submission) -> bool:
    """The team's own view (every attempt, unpublished results, logs)."""
    return is_member(user, submission.team_id) or is_moderator(user)


def can_see(user: User, submission: Submission) -> bool:
    return submission.is_public or can_see_private(user, submission)


def can_act(user: User, submission: Submission) -> bool:
    return is_member(user, submission.team_id)
