"""The 500 handler: a database that cannot be reached answers 503 and says so, not a 500 page.

A request that loses its database (a failover, a restart, a cut link) raises ``OperationalError``
or ``InterfaceError`` wherever it was. Every such exception reaches Django's ``handler500``
(middleware included, with DEBUG off), so this one place turns it into ``503 Service
Unavailable`` with ``Retry-After``: the API's error body (code ``unavailable``) under ``/api/``,
a plain page elsewhere (rendering the site's templates needs the database). Nothing half-written
is left by such a failure: the transaction rolls back and the upload's files are removed
(:class:`portal.submissions.storage.BlobWriter`). A COMMIT whose answer was lost may still have
succeeded, which is why the message points at the Idempotency-Key. Other errors are a 500: the
API's error body (code ``server_error``) under ``/api/``, Django's 500 page elsewhere.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error

from portal.api.errors import error_body

RETRY_AFTER_S = 5
MESSAGE = ("The database could not be reached; try again in a moment. An upload may or may not have been "
           "stored: send it again with the same Idempotency-Key and it is stored exactly once.")
PAGE = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Temporarily unavailable"
        "</title></head><body><h1>Temporarily unavailable</h1><p>{message}</p></body></html>")


def database_unavailable(exc: BaseException | None) -> bool:
    return isinstance(exc, OperationalError | InterfaceError)


def handler500(request: HttpRequest) -> HttpResponse:
    if not database_unavailable(sys.exc_info()[1]):
        if request.path.startswith("/api/"):  # the API's one error shape, for every status
            return JsonResponse(error_body("server_error", "the server failed on this request; it is logged"),
                                status=500)
        return server_error(request)
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(error_body("unavailable", MESSAGE), status=503)
    else:
        response = HttpResponse(PAGE.format(message=MESSAGE), status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
