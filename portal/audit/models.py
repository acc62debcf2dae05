"""``AuditLog``: one row per state transition or security-relevant action, never changed afterwards.

Rows are written only by :func:`portal.audit.services.audit_record`, called inside the same
transaction as the change it describes, so a rolled-back change leaves no audit row and a
committed one always has its row. The model refuses updates and deletes (instance and queryset)
so that no code path can rewrite history by accident.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AppendOnlyError(Exception):
    """Something tried to change or delete an audit row."""


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit rows are append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit rows are append-only")


class AuditLog(models.Model):
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+", help_text="empty for the system (workers, the reaper)")
    actor_label = models.CharField(max_length=150, help_text="username, or system:<component>")
    action = models.CharField(max_length=64, db_index=True, help_text="transition, token.create, ...")
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=40)
    submission_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16, blank=True)
    reason = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        change = f" {self.from_status}->{self.to_status}" if self.to_status else ""
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action} {self.object_type}#{self.object_id}{change}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise AppendOnlyError("audit rows are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("audit rows are append-only")
