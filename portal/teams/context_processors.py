"""Puts the signed-in user's teams and moderator flag in every template (for the header)."""

from __future__ import annotations

from django.http import HttpRequest

from portal.moderation.permissions import is_moderator


def membership(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"is_moderator": False}
    return {"is_moderator": is_moderator(user)}
