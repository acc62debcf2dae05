"""Who may moderate: holders of ``moderation.moderate`` (the ``moderators`` group has it)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

MODERATORS_GROUP = "moderators"
MODERATE_PERMISSION = "moderation.moderate"


def is_moderator(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.has_perm(MODERATE_PERMISSION))


def moderators_group():  # noqa: ANN201 - a Group; imported lazily so this module loads before apps
    """The ``moderators`` group with its permission (made by a migration; recreated if it was removed)."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=MODERATORS_GROUP)
    group.permissions.add(Permission.objects.get(codename="moderate", content_type__app_label="moderation"))
    return group
