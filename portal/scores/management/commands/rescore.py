"""``python manage.py rescore``: recompute every published submission's scores against today's
catalogue (roofline formulas and suite); see :mod:`portal.scores.rescore`. ``sync_tasks`` runs it
itself after a sync that changed something."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.scores.rescore import rescore_published
from tasks.registry import load_tasks


class Command(BaseCommand):
    help = "Re-roofline the stored workloads of every published submission and rewrite its score rows."

    def handle(self, *args: object, **options: object) -> None:
        report = load_tasks(Path(settings.D2K_TASKS_ROOT))
        if report.problems:
            raise CommandError(f"{len(report.problems)} problem(s) in the task tree; run sync_tasks to see them")
        done = rescore_published(report.tasks)
        for line in done.workloads_changed:
            self.stdout.write(line)
        self.stdout.write(self.style.SUCCESS(
            f"{done.submissions} published submission(s) rescored; {len(done.workloads_changed)} workload SOL(s) changed"))
