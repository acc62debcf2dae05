"""Small helpers shared by the portal tests."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from django.core.management import call_command

from leaderboard.models import Task, Workload


def sync(root: Path | None = None, *args: str) -> str:
    """Run ``manage.py sync_tasks`` and return its standard output."""
    out = StringIO()
    extra = ["--root", str(root)] if root is not None else []
    call_command("sync_tasks", *extra, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def snapshot() -> tuple[list[dict], list[dict]]:
    """Every column of every task and workload row, ordered: equal snapshots mean no write."""
    tasks = list(Task.objects.order_by("id").values())
    workloads = list(Workload.objects.order_by("id").values())
    return tasks, workloads
