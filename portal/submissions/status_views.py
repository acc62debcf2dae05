"""The public status page: queue depth per hardware profile, workers alive, last heartbeat."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.submissions.selectors import status_overview


def status(request: HttpRequest) -> HttpResponse:
    profiles, workers = status_overview()
    return render(request, "submissions/status.html", {"profiles": profiles, "workers": workers})
