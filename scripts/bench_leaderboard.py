"""Time the leaderboard pages with many published submissions in PostgreSQL (issue 8's figure).

Creates (or reuses) the database named by ``--database`` on the local PostgreSQL, migrates it,
syncs the task tree, imports the committed reference runs, seeds ``--submissions`` synthetic
published submissions (skipped when already there), then requests each page ``--requests``
times through Django's test client (in process: this measures the view and its queries, not a
network) and prints median, p95 and p99 in ms, with the number of queries per request.

Usage: python scripts/bench_leaderboard.py --submissions 10000 --requests 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _q(sorted_values: list[float], f: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(f * len(sorted_values)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--database", default="d2k_bench")
    ap.add_argument("--submissions", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tc",
                    f"SELECT 1 FROM pg_database WHERE datname = '{args.database}'"], check=True,
                   capture_output=True)
    exists = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc",
                             f"SELECT 1 FROM pg_database WHERE datname = '{args.database}'"],
                            capture_output=True, text=True).stdout.strip() == "1"
    if not exists:
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", args.database], check=True)
    os.environ["DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:5432/{args.database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.submissions.models import Submission

    call_command("migrate", verbosity=0)
    call_command("sync_tasks", verbosity=0)
    call_command("import_reference_results", "--default", verbosity=0)
    have = Submission.objects.filter(filename="seed.zip", status="published").count()
    if have < args.submissions:
        t0 = time.perf_counter()
        call_command("seed_leaderboard", submissions=args.submissions - have, seed=have, teams=50, models=25)
        print(f"seeded {args.submissions - have} submissions in {time.perf_counter() - t0:.0f} s")
    print(f"published submissions: {Submission.objects.filter(status='published').count()}")
    client = Client(HTTP_HOST="localhost")
    pages = ["/leaderboard/?hardware=h200", "/leaderboard/?hardware=h200&category=attention",
             "/leaderboard/?hardware=h200&format=json", "/api/v1/leaderboard/?hardware=h200",
             "/leaderboard/pairs/?hardware=h200", "/tasks/fused-moe-mlp/"]
    print("| page | requests | median ms | p95 ms | p99 ms | queries |")
    print("|---|---|---|---|---|---|")
    for url in pages:
        n = args.requests if "pairs" not in url else max(10, args.requests // 10)
        client.get(url)  # warm
        times = []
        with CaptureQueriesContext(connection) as q:
            client.get(url)
        for _ in range(n):
            t0 = time.perf_counter()
            resp = client.get(url)
            times.append((time.perf_counter() - t0) * 1e3)
            assert resp.status_code == 200, (url, resp.status_code)
        times.sort()
        print(f"| `{url}` | {n} | {statistics.median(times):.1f} | {_q(times, 0.95):.1f} | {_q(times, 0.99):.1f} | "
              f"{len(q.captured_queries)} |")


if __name__ == "__main__":
    main()
