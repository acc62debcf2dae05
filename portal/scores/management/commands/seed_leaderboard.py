"""``python manage.py seed_leaderboard --submissions N``: synthetic published submissions (tests, load runs).

Refuses to run against a database that holds real (non-seed) submissions unless ``--force``.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.scores.seed import SeedSpec, seed
from portal.submissions.models import Submission


class Command(BaseCommand):
    help = "Create N synthetic published submissions with complete engine results and scores."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--submissions", type=int, default=100)
        parser.add_argument("--hardware", default="h200")
        parser.add_argument("--teams", type=int, default=20)
        parser.add_argument("--models", type=int, default=8)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--batch", type=int, default=200, help="submissions per transaction")
        parser.add_argument("--force", action="store_true", help="even if real submissions exist")

    def handle(self, *args: object, **o: object) -> None:
        if not o["force"] and Submission.objects.exclude(filename="seed.zip").exists():
            raise CommandError("this database holds real submissions; pass --force to seed it anyway")
        t0, done = time.perf_counter(), 0
        while done < o["submissions"]:
            n = min(o["batch"], o["submissions"] - done)
            seed(SeedSpec(submissions=n, hardware=o["hardware"], teams=o["teams"], models=o["models"],
                          seed=o["seed"] + done))
            done += n
            self.stdout.write(f"{done}/{o['submissions']} submissions ({time.perf_counter() - t0:.0f} s)")
