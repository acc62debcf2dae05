"""A moderator's decision on an evaluation attempt; the ``moderate`` permission gates them all."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from portal.submissions.models import EvaluationAttempt


class Decision(models.TextChoices):
    APPROVE = "approve", "approve"
    REJECT = "reject", "reject"
    RERUN = "rerun", "request a re-run"
    CANCEL = "cancel", "cancel"


class ModerationDecision(models.Model):
    attempt = models.ForeignKey(EvaluationAttempt, on_delete=models.PROTECT, related_name="decisions")
    moderator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField(blank=True, help_text="shown to the team (required to reject)")
    hardware = models.CharField(max_length=32, blank=True, help_text="re-run on this profile (empty: the same)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("moderate", "Can approve, reject and request re-runs of submissions")]

    def __str__(self) -> str:
        return f"{self.decision} {self.attempt} by {self.moderator}"
