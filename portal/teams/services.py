"""Writes for teams, memberships and tokens; each one audited."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from portal.audit.services import audit_record
from portal.teams.models import ApiToken, Membership, Team

TOKEN_PREFIX = "d2k_"


class TokenError(ValueError):
    """A token request that cannot be honoured; the message says why."""


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@transaction.atomic
def team_create(name: str, *, owner: AbstractBaseUser) -> Team:
    team = Team.objects.create(name=name, slug=slugify(name)[:80] or secrets.token_hex(4))
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    audit_record("team.create", team, actor=owner)
    return team


@transaction.atomic
def membership_add(team: Team, user: AbstractBaseUser, *, actor: AbstractBaseUser | None = None,
                   role: str = Membership.Role.MEMBER) -> Membership:
    membership, _ = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
    audit_record("team.member.add", team, actor=actor, data={"user": user.get_username(), "role": role})
    return membership


@dataclass(frozen=True)
class IssuedToken:
    """A new token; ``secret`` exists only here, never in the database."""

    token: ApiToken
    secret: str


@transaction.atomic
def token_create(team: Team, *, name: str, actor: AbstractBaseUser, days: int | None = None,
                 not_after: datetime | None = None) -> IssuedToken:
    """A new token for ``team``. ``not_after`` caps its expiry: a token made with another token
    (``POST /api/v1/tokens/`` from a harness) must not outlive the one that made it, or a leaked
    token could renew itself past its own expiry."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name")
    days = settings.D2K_TOKEN_DEFAULT_DAYS if days is None else days
    if not 1 <= days <= 366:
        raise TokenError("a token lives between 1 and 366 days")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            expires_at = timezone.now() + timedelta(days=days)
            if not_after is not None:
                expires_at = min(expires_at, not_after)
            token = ApiToken.objects.create(team=team, created_by=actor, name=name[:80], prefix=secret[:12],
                                            digest=token_digest(secret), expires_at=expires_at)
    except IntegrityError:
        raise TokenError(f"the team already has an active token named {name!r}") from None
    audit_record("token.create", token, actor=actor, data={"team": team.slug, "name": token.name, "days": days})
    return IssuedToken(token=token, secret=secret)


@transaction.atomic
def token_revoke(token: ApiToken, *, actor: AbstractBaseUser) -> ApiToken:
    token = ApiToken.objects.select_for_update().get(pk=token.pk)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record("token.revoke", token, actor=actor, data={"team": token.team.slug, "name": token.name})
    return token


def token_touch(token: ApiToken) -> None:
    """Record use at most once a minute, so authentication does not write on every request."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
