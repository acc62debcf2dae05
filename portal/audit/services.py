"""The one writer of audit rows."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from portal.audit.models import AuditLog


def actor_label(actor: AbstractBaseUser | AnonymousUser | None, system: str = "system") -> str:
    if actor is None or not getattr(actor, "is_authenticated", False):
        return system if system.startswith("system") else f"system:{system}"
    return actor.get_username()


def audit_record(action: str, obj: models.Model, *, actor: AbstractBaseUser | None = None, system: str = "system",
                 from_status: str = "", to_status: str = "", reason: str = "", submission_id: int | None = None,
                 data: dict[str, Any] | None = None) -> AuditLog:
    """Append one row; call it inside the transaction that makes the change it describes."""
    user = actor if actor is not None and getattr(actor, "is_authenticated", False) else None
    return AuditLog.objects.create(
        actor=user, actor_label=actor_label(actor, system), action=action, object_type=obj._meta.label_lower,
        object_id=str(obj.pk), submission_id=submission_id, from_status=from_status, to_status=to_status,
        reason=reason[:4000], data=data or {},
    )
