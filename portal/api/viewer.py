"""Who is calling: the teams a request acts for, and whether it may moderate.

A token acts for its one team, even when its creator belongs to several; a signed-in browser
session acts for all of the user's teams and picks one with ``team=<slug>`` when it must.
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.request import Request

from portal.api.errors import ApiError
from portal.moderation.permissions import is_moderator
from portal.teams.models import ApiToken, Team
from portal.teams.selectors import teams_of


@dataclass(frozen=True)
class Viewer:
    team_ids: frozenset[int]
    moderator: bool

    def context(self) -> dict[str, object]:
        return {"team_ids": self.team_ids, "moderator": self.moderator}


def may_moderate(request: Request) -> bool:
    """Moderation is a person's right, signed in: never a team token's, even one a moderator made,
    since a token is handed to a team's harness and must carry only that team's rights."""
    return not isinstance(request.auth, ApiToken) and is_moderator(request.user)


def viewer_of(request: Request) -> Viewer:
    if isinstance(request.auth, ApiToken):
        return Viewer(frozenset({request.auth.team_id}), moderator=False)
    ids = frozenset(teams_of(request.user).values_list("pk", flat=True)) if request.user.is_authenticated else frozenset()
    return Viewer(ids, may_moderate(request))


def acting_team(request: Request, slug: str | None = None) -> Team:
    """The team a write acts for; a token's own team, or the session user's (chosen by slug)."""
    if isinstance(request.auth, ApiToken):
        if slug and slug != request.auth.team.slug:
            raise ApiError("this token belongs to another team", code="permission_denied", status_code=403)
        return request.auth.team
    teams = teams_of(request.user)
    if slug:
        teams = teams.filter(slug=slug)
    choices = list(teams[:2])
    if not choices:
        raise ApiError("you are not a member of that team" if slug else "you are not in any team",
                       code="permission_denied", status_code=403)
    if len(choices) > 1:
        raise ApiError("you are in several teams: say which with team=<slug>", code="team_required")
    return choices[0]
