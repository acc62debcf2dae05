"""Who may moderate: holders of ``moderation.moderate`` (the ``moderators`` group has it)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

MODERATORS_GROUP = "moderators"
MODERATE_PERMISSION = "moderation.moderate"


def is_moderator(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.has_perm(MODERATE_PERMISSION))
