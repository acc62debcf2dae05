"""A moderator's decision: the decision row and the transition it causes, in one transaction."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from portal.moderation.models import Decision, ModerationDecision
from portal.moderation.permissions import is_moderator
from portal.submissions import actions
from portal.submissions.constants import Status
from portal.submissions.models import Submission


@transaction.atomic(durable=True)
def do_moderate(submission: Submission, *, moderator: AbstractBaseUser, decision: str, reason: str = "",
                hardware: str | None = None, other_node: bool = False) -> ModerationDecision:
    """Approve (publish), reject (with a reason the team reads), request a re-run, or cancel.

    Approve and reject apply to an ``evaluated`` submission's current attempt, and reject also
    takes a ``published`` one down (off the board and the public pages); a re-run may be asked of
    any finished submission, on the same node or (``other_node``) another; a cancel stops a queued
    or running one. Raises :class:`PermissionDenied` for a non-moderator and
    :class:`~portal.submissions.actions.InvalidTransition` for a move the state machine refuses.
    """
    if not is_moderator(moderator):
        raise PermissionDenied("only moderators may decide on submissions")
    sub = Submission.objects.select_for_update().get(pk=submission.pk)
    attempt = sub.current_attempt
    if attempt is None:
        raise actions.InvalidTransition(sub.status, Status.PUBLISHED, "the submission has no evaluation attempt")
    if decision == Decision.APPROVE:
        actions.do_publish(sub, user=moderator, reason=reason)
    elif decision == Decision.REJECT:
        actions.do_reject(sub, user=moderator, reason=reason)
    elif decision == Decision.RERUN:
        actions.do_rerun(sub, user=moderator, reason=reason or "re-run requested by a moderator", by_moderator=True,
                         hardware=hardware, other_node=other_node)
    elif decision == Decision.CANCEL:
        actions.do_cancel(sub, user=moderator, reason=reason or "cancelled by a moderator", by_moderator=True)
    else:
        raise ValueError(f"unknown decision {decision!r}")
    return ModerationDecision.objects.create(attempt=attempt, moderator=moderator, decision=decision, reason=reason,
                                             hardware=hardware or "")
