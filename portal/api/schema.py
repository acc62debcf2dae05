"""The OpenAPI schema class: drf-spectacular's, plus the error responses each operation can give.

Every API error has the one body of :mod:`portal.api.errors`. drf-spectacular documents success
responses only, so a client (or the schema fuzz test, ``tests/portal/test_api_fuzz.py``) could not
tell a documented 404 from a surprise. The generic codes follow from the operation itself (its
parameters, body, security and throttles); codes only some views give (409, 413, quota 429s) are
declared on those views with :data:`ERROR`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

from portal.api.serializers import ErrorSerializer

#: For ``@extend_schema(responses={409: ERROR, ...})`` on views that raise those codes themselves.
ERROR = OpenApiResponse(ErrorSerializer, description="see the error code table in docs/api.md")


def generic_error_codes(operation: dict[str, Any], *, throttled: bool) -> dict[str, str]:
    """The error statuses any operation of this shape can answer, with why."""
    params = operation.get("parameters", [])
    codes = {"401": "an unknown, expired or revoked token (on any endpoint), or none where one is needed"}
    if "requestBody" in operation or any(p["in"] == "query" for p in params):
        codes["400"] = "a malformed field or parameter (details name it)"
    if {} not in operation.get("security", [{}]):
        codes["403"] = "signed in, but not allowed (not a moderator, not in the team)"
    if any(p["in"] == "path" or p["name"] == "cursor" for p in params):
        codes["404"] = "no such object, one the caller may not see, or an invalid cursor"
    if throttled:
        codes["429"] = "rate limited; Retry-After says how many seconds to wait"
    return codes


class ApiAutoSchema(AutoSchema):
    """``DEFAULT_SCHEMA_CLASS``: adds the generic error responses to every operation."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):  # noqa: ANN001, ANN201
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        schema = self.resolve_serializer(ErrorSerializer, "response").ref
        throttled = bool(getattr(self.view, "throttle_classes", ()))
        for code, description in generic_error_codes(operation, throttled=throttled).items():
            operation["responses"].setdefault(code, {"content": {"application/json": {"schema": schema}},
                                                     "description": description})
        return operation
