"""Teams own submissions; members act for them; API tokens let a harness act for them.

A token's secret is shown once, at creation, and only its sha256 is stored: a database leak does
not leak working tokens. Tokens are named (so a team knows which harness holds which), expire,
and are revoked by setting ``revoked_at`` (the row stays, for the audit trail).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Team(models.Model):
    name = models.CharField(max_length=80, unique=True)
    slug = models.SlugField(max_length=80, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    daily_quota = models.PositiveIntegerField(null=True, blank=True, help_text="empty: D2K_QUOTA_PER_DAY")
    concurrent_quota = models.PositiveIntegerField(null=True, blank=True, help_text="empty: D2K_QUOTA_CONCURRENT")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def quota_per_day(self) -> int:
        return self.daily_quota if self.daily_quota is not None else settings.D2K_QUOTA_PER_DAY

    @property
    def quota_concurrent(self) -> int:
        return self.concurrent_quota if self.concurrent_quota is not None else settings.D2K_QUOTA_CONCURRENT


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "owner"
        MEMBER = "member", "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "user"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="unique_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tokens")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=80)
    prefix = models.CharField(max_length=16, help_text="the token's first characters, to tell tokens apart")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the whole token")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], condition=models.Q(revoked_at__isnull=True),
                                    name="unique_live_token_name"),
        ]

    def __str__(self) -> str:
        return f"{self.team}:{self.name} ({self.prefix}...)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "active" if self.expires_at > timezone.now() else "expired"
