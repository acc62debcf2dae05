"""Reads about teams: who belongs where, which token is which."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from portal.teams.models import ApiToken, Membership, Team
from portal.teams.services import TOKEN_PREFIX, token_digest


def teams_of(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).order_by("name")


def team_for_user(user: AbstractBaseUser | AnonymousUser, slug: str | None = None) -> Team | None:
    """The user's team named ``slug``, or their first team; ``None`` if they have none."""
    qs = teams_of(user)
    if slug:
        qs = qs.filter(slug=slug)
    return qs.first()


def token_lookup(raw: str) -> ApiToken | None:
    """The active token whose secret is ``raw``; ``None`` for an expired or revoked one, and for
    one whose creator is deactivated or no longer in the token's team: a token acts as its
    creator, so it can carry no more than the creator still has."""
    if not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    member = Membership.objects.filter(team=OuterRef("team"), user=OuterRef("created_by"))
    return (ApiToken.objects.select_related("team", "created_by")
            .filter(digest=token_digest(raw), revoked_at__isnull=True, expires_at__gt=timezone.now(),
                    created_by__is_active=True)
            .filter(Exists(member)).first())


def team_tokens(team: Team) -> QuerySet[ApiToken]:
    return team.tokens.select_related("created_by").order_by("-created_at")
