"""``python manage.py sync_tasks [--root DIR] [--verify]``: mirror the task tree into the database.

Every problem of the tree is printed as ``file: field: message`` and the command exits with
status 1 without writing anything, so a broken task can never half-replace a good one.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.services import task_sync
from portal.scores.rescore import rescore_published
from tasks.registry import load_tasks


class Command(BaseCommand):
    help = "Load tasks/, references/ and guidance/ and upsert Task and Workload rows (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--root", type=Path, default=None,
                            help="tree holding tasks/, references/, guidance/ (default: D2K_TASKS_ROOT)")
        parser.add_argument("--verify", action="store_true",
                            help="queue a check of every expert kernel on cpu.interpret after the sync commits")

    def handle(self, *args: object, root: Path | None = None, verify: bool = False, **options: object) -> None:
        root = (root or settings.D2K_TASKS_ROOT).resolve()
        if not (root / "tasks").is_dir():
            raise CommandError(f"{root} has no tasks/ folder")
        report = load_tasks(root)
        if report.problems:
            for problem in report.problems:
                self.stderr.write(f"{problem.file}: {problem.field or '(file)'}: {problem.message}")
            raise CommandError(f"{len(report.problems)} problem(s) in the task tree under {root}; nothing was synced")
        result = task_sync(report, queue_verification=verify)
        lines = [
            ("created", result.created), ("updated", result.updated), ("unchanged", result.unchanged),
            ("retired", result.retired), ("restored", result.restored),
            ("workloads created", result.workloads_created), ("workloads updated", result.workloads_updated),
            ("workloads deleted", result.workloads_deleted), ("verification queued", result.verification_queued),
        ]
        for label, items in lines:
            if items:
                self.stdout.write(f"{label} ({len(items)}): {', '.join(items)}")
        if result.changed:  # published scores follow the catalogue: its formulas and its suite
            done = rescore_published(report.tasks)
            if done.submissions:
                self.stdout.write(f"rescored {done.submissions} published submission(s); "
                                  f"{len(done.workloads_changed)} workload SOL(s) changed")
        summary = f"{len(report.tasks)} task(s) in the tree; " + ("changes written" if result.changed else "nothing changed")
        self.stdout.write(self.style.SUCCESS(summary))
