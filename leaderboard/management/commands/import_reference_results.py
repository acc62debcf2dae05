"""``python manage.py import_reference_results FILE.json [...]``: load engine bench results of the references.

Run ``sync_tasks`` first: timings attach to the synced workloads. Each file is imported in its own
transaction; re-importing a file is a no-op. ``--default`` imports the committed reference runs
under ``docs/results/``, the H200's and the H100's (what ``scripts/run-local.sh`` does on a fresh
install); each is its own hardware profile on the pages, never mixed.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.references import ReferenceImportError, import_file

#: The committed runs: the H200's first calls' merged files, then one file per task of the later
#: calls, on the H200 and on the H100 (all 26 tasks since session 13). Superseded per-task files
#: are kept as ``h100-runs/s11-*``/``s12-*`` and are not imported.
DEFAULT_GLOBS = ("docs/results/*-bench*.json", "docs/results/h200-runs/bench-*.json",
                 "docs/results/h100-runs/bench-*.json")


class Command(BaseCommand):
    help = "Import engine JSON results of the expert references (eager / torch.compile / expert timings)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="*", type=Path)
        parser.add_argument("--default", action="store_true", help=f"import {' and '.join(DEFAULT_GLOBS)} from the repository")
        parser.add_argument("--provenance", default="", help="how the results were measured (shown on the pages)")

    def handle(self, *args: object, files: list[Path], default: bool, provenance: str, **options: object) -> None:
        paths = list(files)
        if default:
            paths += [p for pattern in DEFAULT_GLOBS for p in sorted(Path(settings.D2K_TASKS_ROOT).glob(pattern))]
        if not paths:
            raise CommandError("no files: name engine JSON results, or pass --default")
        failed = 0
        for path in paths:
            try:
                report = import_file(path, provenance)
            except (OSError, ReferenceImportError) as exc:
                self.stderr.write(f"{path}: {exc}")
                failed += 1
                continue
            if not report.created:
                self.stdout.write(f"{path}: already imported (run {report.run.pk})")
                continue
            self.stdout.write(f"{path}: run {report.run.pk} ({report.run.hardware}), {report.timings} timings"
                              + (f"; skipped {len(report.skipped)} unknown workloads" if report.skipped else ""))
        if failed:
            raise CommandError(f"{failed} file(s) not imported")
