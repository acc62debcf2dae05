"""One error body for every API failure: ``{"error": {"code", "message", "details"}}``.

DRF's own shapes vary (``{"detail": ...}`` for some, field maps for others); clients and the CLI
read one shape instead. ``details`` keeps DRF's field errors, and for upload refusals the list of
``{file, rule, message}`` problems.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApiError(exceptions.APIException):
    """An error with a stable code and optional structured details."""

    def __init__(self, message: str, *, code: str, status_code: int = 400, details: Any = None,
                 headers: dict[str, str] | None = None):
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.details = details
        self.headers = headers or {}


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details if details is not None else {}}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, BadRequest):  # Django's, from code shared with the pages (the leaderboard's filters)
        exc = ApiError(str(exc), code="invalid")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        response.data = error_body(exc.error_code, str(exc.detail), exc.details)
        for name, value in exc.headers.items():
            response[name] = value
        return response
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid", "the request is invalid", exc.detail)
        return response
    code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
    code = code if isinstance(code, str) else "error"
    message = response.data.get("detail", "") if isinstance(response.data, dict) else str(response.data)
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        response["Retry-After"] = str(int(exc.wait) + 1)
    if response.status_code == status.HTTP_404_NOT_FOUND:
        code = "not_found"
    response.data = error_body(code, str(message))
    return response


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: under ``/api/`` the error body, since a malformed id (``/submissions/0.5/``)
    matches no route and never reaches a view; elsewhere the site's own page."""
    if request.path_info.startswith("/api/"):
        return JsonResponse(error_body("not_found", f"nothing at {request.path_info}: no such endpoint or object"),
                            status=404)
    return page_not_found(request, exception)
