"""Reads for the task pages: every query the views make lives here, counted by tests."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet

from leaderboard.models import Task, Workload


def task_list(*, include_retired: bool = False) -> QuerySet[Task]:
    """Tasks ordered by id, each annotated with ``workload_count`` (full-size workloads only)."""
    qs = Task.objects.annotate(workload_count=Count("workloads", filter=Q(workloads__smoke=False)))
    if not include_retired:
        qs = qs.filter(retired=False)
    return qs.order_by("task_id", "slug")


def task_detail(slug: str) -> Task | None:
    """One task (retired ones too: old links keep working) with its workloads in file order."""
    return (
        Task.objects.filter(slug=slug)
        .prefetch_related(Prefetch("workloads", queryset=Workload.objects.order_by("smoke", "position")))
        .first()
    )
