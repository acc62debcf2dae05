"""``Authorization: Bearer d2k_...``: a team's API token, looked up by its sha256."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.teams.models import ApiToken
from portal.teams.selectors import token_lookup
from portal.teams.services import token_touch


class TeamTokenAuthentication(authentication.BaseAuthentication):
    """The request acts for the token's team, as the member who created the token."""

    keywords = ("Bearer", "Token")

    def authenticate(self, request: Request) -> tuple[object, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <token>'")
        token = token_lookup(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed("the token is unknown, expired or revoked")
        token_touch(token)
        return token.created_by, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class TeamTokenScheme(OpenApiAuthenticationExtension):
    """Describes the token scheme in the OpenAPI schema (drf-spectacular finds it by import)."""

    target_class = "portal.api.authentication.TeamTokenAuthentication"
    name = "teamToken"

    def get_security_definition(self, auto_schema):  # noqa: ANN001, ANN201
        return {"type": "http", "scheme": "bearer", "bearerFormat": "d2k_<secret>",
                "description": "a team's API token, created on the team's token page or POST /api/v1/tokens/"}
