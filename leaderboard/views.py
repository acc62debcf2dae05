"""Server-rendered task pages and the home page; no JavaScript needed."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from leaderboard import board_queries, selectors
from leaderboard.board_views import default_profile
from leaderboard.guidance_versions import versions_of
from portal.submissions.selectors import latest_published

#: The home page's headline: the top rows of the default board, and the newest published runs.
HOME_BOARD_ROWS, HOME_LATEST_RUNS = 10, 5


def home(request: HttpRequest) -> HttpResponse:
    """The front page: what the benchmark is, the headline leaderboard (the default profile's
    reference rows and top published rows, all tasks), the latest published runs, the task table."""
    hardware = default_profile(board_queries.hardware_profiles())
    board = board_queries.Filters(hardware=hardware)
    context = {
        "tasks": selectors.task_list(), "is_home": True, "f": board,
        "rows": list(board_queries.rows(board)[:HOME_BOARD_ROWS]),
        "references": board_queries.board_references(board),
        "latest": latest_published(HOME_LATEST_RUNS),
    }
    return render(request, "leaderboard/task_list.html", context)


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
        "best_kernels": selectors.best_published_kernels(task),
        "scalars": task.spec_json.get("scalars", []),
        "guidance_levels": [
            ("L1", "algorithm", task.guidance_l1),
            ("L2", "dataflow", task.guidance_l2),
            ("L3", "low-level technique", task.guidance_l3),
        ],
        "guidance_versions": versions_of(task),
    }
    return render(request, "leaderboard/task_detail.html", context)


def guidance_version(request: HttpRequest, slug: str, sha256: str) -> HttpResponse:
    """One kept version of a task's guidance, as a run that states its digest was given it."""
    task = selectors.task_detail(slug)
    if task is None:
        raise Http404(f"no task {slug!r}")
    version = task.guidance_versions.filter(sha256=sha256).first()
    if version is None:
        raise Http404(f"task {slug!r} has published no guidance with digest {sha256[:64]!r}")
    context = {"task": task, "version": version,
               "current": version.sha256 == task.guidance_sha256(version.condition)}
    return render(request, "leaderboard/guidance_version.html", context)
