"""Server-rendered task pages; no JavaScript needed."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from leaderboard import selectors


def home(request: HttpRequest) -> HttpResponse:
    """The front page: what the benchmark is, then the task table."""
    return render(request, "leaderboard/task_list.html", {"tasks": selectors.task_list(), "is_home": True})


def task_list(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/task_list.html", {"tasks": selectors.task_list(), "is_home": False})


def task_detail(request: HttpRequest, slug: str) -> HttpResponse:
    task = selectors.task_detail(slug)
    if task is None:
        raise Http404(f"no task {slug!r}")
    workloads = list(task.workloads.all())
    context = {
        "task": task,
        "workloads": [w for w in workloads if not w.smoke],
        "smoke_workloads": [w for w in workloads if w.smoke],
        "origins": task.spec_json.get("origin", []),
        "reference_profiles": selectors.reference_times(task),
        "scalars": task.spec_json.get("scalars", []),
        "guidance_levels": [
            ("L1", "algorithm", task.guidance_l1),
            ("L2", "dataflow", task.guidance_l2),
            ("L3", "low-level technique", task.guidance_l3),
        ],
    }
    return render(request, "leaderboard/task_detail.html", context)
