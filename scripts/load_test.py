"""Load test: gunicorn over loopback, driven by wrk, with 10,000 published submissions (issue 10).

End to end, every step idempotent so a second run reuses the seeded database:

1. creates the PostgreSQL database ``--database`` if missing, migrates it, syncs the task tree,
   imports the committed reference runs and seeds ``--submissions`` published submissions
   (``manage.py seed_leaderboard``: 50 teams x 25 models, the four guidance conditions in turn,
   so every (team, model) has guided and unguided runs and the pairs page has pairs);
2. runs ``collectstatic`` (production settings serve hashed static files through WhiteNoise);
3. creates a team member and an API token for the team of a real published submission;
4. starts ``gunicorn -c deploy/gunicorn.conf.py portal.wsgi`` under ``portal.settings.prod``
   (DEBUG off, JSON access log to ``var/load/gunicorn.log``) with ``--workers`` sync workers;
5. checks that each endpoint answers 200, then drives it with ``wrk`` (one thread, ``--duration``
   seconds per concurrency level after a short warm-up) and collects throughput, p50/p95/p99 and
   the responses outside 2xx through ``scripts/wrk_report.lua``;
6. prints a markdown table and, with ``--output``, appends it as a dated section to that file.

The proxy header ``X-Forwarded-Proto: https`` is sent as the TLS-terminating proxy of a real
deployment would (production settings redirect plain HTTP otherwise).

``--profile URL`` instead profiles one request in process under the same settings: query count
and time (the five slowest queries with ``EXPLAIN ANALYZE``) and the top of a cProfile.

Not part of CI. Usage::

    python scripts/load_test.py --workers 5 --duration 20 --concurrency 4,16 --output docs/results/load.md
    python scripts/load_test.py --profile /leaderboard/pairs/
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
LOAD_DIR = ROOT / "var" / "load"
LUA = ROOT / "scripts" / "wrk_report.lua"
PROXY_HEADER = "X-Forwarded-Proto: https"
SEED_CHUNK = 1000


@dataclass(frozen=True)
class Endpoint:
    key: str  # for --only
    name: str
    path: str
    auth: bool = False


@dataclass(frozen=True)
class Result:
    endpoint: Endpoint
    concurrency: int
    requests: int
    seconds: float
    non2xx: int
    socket_errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def environment(database: str, broker: str) -> dict[str, str]:
    """The process environment of every step: production settings on the load database."""
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{database}",
        "CELERY_BROKER_URL": broker,
        "DJANGO_SETTINGS_MODULE": "portal.settings.prod",
        "SECRET_KEY": env.get("LOAD_SECRET_KEY") or secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
    })
    return env


def psql(sql: str) -> str:
    return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def manage(env: dict[str, str], *args: str) -> None:
    print("+ manage.py", " ".join(args), flush=True)
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, env=env, cwd=ROOT)


def prepare(database: str, submissions: int, env: dict[str, str]) -> None:
    if psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}'") != "1":
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "sync_tasks", "-v0")
    manage(env, "import_reference_results", "--default", "-v0")
    have = int(psql_in(database, "SELECT count(*) FROM submissions_submission "
                                 "WHERE filename = 'seed.zip' AND status = 'published'"))
    t0, start = time.perf_counter(), have
    while have < submissions:
        # In chunks with ANALYZE between them: where autovacuum is off (as on this machine), the
        # planner would otherwise keep its empty-table plans and seed-scan growing tables.
        n = min(SEED_CHUNK, submissions - have)
        manage(env, "seed_leaderboard", f"--submissions={n}", f"--seed={have}", "--teams=50", "--models=25")
        psql_in(database, "ANALYZE")
        have += n
    if have > start:
        print(f"seeded {have - start} submissions in {time.perf_counter() - t0:.0f} s", flush=True)
    manage(env, "collectstatic", "--noinput", "-v0")
    psql_in(database, "VACUUM ANALYZE")


def psql_in(database: str, sql: str) -> str:
    return subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-tAc", sql], check=True,
                          capture_output=True, text=True).stdout.strip()


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def status_target() -> tuple[int, str]:
    """(id, token): the newest published submission and a fresh API token of a member of its team."""
    from django.contrib.auth import get_user_model

    from portal.submissions.models import Submission
    from portal.teams.models import Membership
    from portal.teams.services import token_create

    sub = Submission.objects.filter(status="published").order_by("-published_at").first()
    if sub is None:
        raise SystemExit("no published submission to poll")
    user, _ = get_user_model().objects.get_or_create(username="load-test-member")
    Membership.objects.get_or_create(team=sub.team, user=user)
    issued = token_create(sub.team, name=f"load test {secrets.token_hex(4)}", actor=user, days=1)
    return sub.pk, issued.secret


def endpoints(submission_id: int) -> list[Endpoint]:
    return [
        Endpoint("board", "leaderboard page", "/leaderboard/"),
        Endpoint("pairs", "pairs page", "/leaderboard/pairs/"),
        Endpoint("task", "task page", "/tasks/fused-moe-mlp/"),
        Endpoint("api-board", "leaderboard API (its largest page)", "/api/v1/leaderboard/?limit=1000"),
        Endpoint("status", "submission status API (token)", f"/api/v1/submissions/{submission_id}/", auth=True),
    ]


def start_gunicorn(env: dict[str, str], workers: int, port: int) -> subprocess.Popen[bytes]:
    LOAD_DIR.mkdir(parents=True, exist_ok=True)
    log = open(LOAD_DIR / "gunicorn.log", "ab")  # noqa: SIM115 - lives as long as the server
    genv = {**env, "WEB_CONCURRENCY": str(workers), "GUNICORN_BIND": f"127.0.0.1:{port}"}
    proc = subprocess.Popen([str(VENV_BIN / "gunicorn"), "-c", "deploy/gunicorn.conf.py", "portal.wsgi"],
                            cwd=ROOT, env=genv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}; see {LOAD_DIR / 'gunicorn.log'}")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/healthz")
            req.add_header(*PROXY_HEADER.split(": ", 1))  # plain HTTP would be redirected to https
            urllib.request.urlopen(req, timeout=10)
            return proc
        except OSError:  # refused while booting, or a slow first answer
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("gunicorn did not answer /healthz within 60 s")


def headers_for(ep: Endpoint, token: str) -> list[str]:
    out = [PROXY_HEADER]
    if ep.auth:
        out.append(f"Authorization: Bearer {token}")
    return out


def preflight(base: str, ep: Endpoint, token: str) -> int:
    """One request that must answer 200 (a redirect or an error page would make the figures meaningless)."""
    req = urllib.request.Request(base + ep.path)
    for h in headers_for(ep, token):
        k, v = h.split(": ", 1)
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            body = resp.read()
            if resp.status != 200:
                raise SystemExit(f"{ep.path}: status {resp.status}")
            return len(body)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{ep.path}: status {exc.code}: {exc.read()[:300]!r}") from None


def wrk(base: str, ep: Endpoint, token: str, concurrency: int, seconds: int) -> dict[str, object]:
    cmd = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--timeout", "30s", "-s", str(LUA)]
    for h in headers_for(ep, token):
        cmd += ["-H", h]
    out = subprocess.run([*cmd, base + ep.path], check=True, capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK_JSON "))
    return json.loads(line.removeprefix("WRK_JSON "))


def measure(base: str, ep: Endpoint, token: str, concurrency: int, seconds: int, warmup: int) -> Result:
    if warmup:
        wrk(base, ep, token, concurrency, warmup)
    d = wrk(base, ep, token, concurrency, seconds)
    errors = d["errors"]
    assert isinstance(errors, dict)
    return Result(ep, concurrency, int(d["requests"]), int(d["duration_us"]) / 1e6, int(d["non2xx"]),
                  sum(int(v) for k, v in errors.items() if k != "status"),
                  int(d["p50_us"]) / 1e3, int(d["p95_us"]) / 1e3, int(d["p99_us"]) / 1e3, int(d["max_us"]) / 1e3)


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):  # no /proc/cpuinfo (not Linux): the CPU stays unnamed
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    pg = psql("SHOW server_version")
    wrk_v = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}; "
            f"PostgreSQL {pg} on the same host; Python {platform.python_version()}; {wrk_v.strip()}")


def table(results: list[Result], sizes: dict[str, int]) -> str:
    lines = ["| endpoint | conc. | requests | req/s | p50 ms | p95 ms | p99 ms | max ms | non-2xx | socket errors "
             "| body bytes |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.endpoint.name} `{r.endpoint.path}` | {r.concurrency} | {r.requests} | {r.rps:.1f} | "
                     f"{r.p50_ms:.1f} | {r.p95_ms:.1f} | {r.p99_ms:.1f} | {r.max_ms:.0f} | {r.non2xx} | "
                     f"{r.socket_errors} | {sizes[r.endpoint.path]:,} |")
    return "\n".join(lines)


def git_head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def run_load(args: argparse.Namespace, env: dict[str, str]) -> None:
    django_setup(env)
    from portal.submissions.models import Submission

    published = Submission.objects.filter(status="published").count()
    sub_id, token = status_target()
    eps = [e for e in endpoints(sub_id) if not args.only or e.key in args.only.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    base = f"http://127.0.0.1:{args.port}"
    server = start_gunicorn(env, args.workers, args.port)
    load_before = os.getloadavg()[0]
    results, sizes = [], {}
    try:
        for ep in eps:
            sizes[ep.path] = preflight(base, ep, token)
            for c in levels:
                r = measure(base, ep, token, c, args.duration, args.warmup)
                print(f"{ep.path} c={c}: {r.rps:.1f} req/s p50 {r.p50_ms:.1f} p95 {r.p95_ms:.1f} "
                      f"p99 {r.p99_ms:.1f} ms non-2xx {r.non2xx} errors {r.socket_errors}", flush=True)
                results.append(r)
    finally:
        server.terminate()
        server.wait(timeout=60)
    load_after = os.getloadavg()[0]
    md = table(results, sizes)
    print(md)
    if args.output:
        cmd = "python scripts/load_test.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        section = (f"\n## {args.label}\n\n"
                   f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit {git_head()}, {published:,} published "
                   f"submissions, gunicorn {args.workers} sync workers, wrk 1 thread, {args.duration} s per row "
                   f"after a {args.warmup} s warm-up.\nMachine: {machine()}; 1-minute load average "
                   f"{load_before:.1f} at the start, {load_after:.1f} at the end (other processes share the cores)."
                   f"\n\n```\n{cmd}\n```\n\n{md}\n")
        with open(args.output, "a") as fh:
            fh.write(section)
        print(f"appended to {args.output}")


def run_profile(url: str, env: dict[str, str], submission_token: bool) -> None:
    """One request in process: its queries (count, time, the slowest EXPLAIN ANALYZEd) and a cProfile."""
    django_setup(env)
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    headers = {"HTTP_X_FORWARDED_PROTO": "https"}
    if submission_token:
        _, token = status_target()
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    client = Client(HTTP_HOST="localhost", **headers)
    assert client.get(url).status_code == 200  # warm: imports, per-process caches
    with CaptureQueriesContext(connection) as q:
        t0 = time.perf_counter()
        resp = client.get(url)
        wall = (time.perf_counter() - t0) * 1e3
    assert resp.status_code == 200, resp.status_code
    total = sum(float(x["time"]) for x in q.captured_queries) * 1e3
    print(f"{url}: {wall:.1f} ms, {len(q.captured_queries)} queries, {total:.1f} ms in the database")
    for x in sorted(q.captured_queries, key=lambda x: -float(x["time"]))[:5]:
        print(f"\n-- {float(x['time']) * 1e3:.1f} ms: {x['sql'][:400]}")
        if x["sql"].lstrip().upper().startswith("SELECT"):
            with connection.cursor() as cur:
                cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + x["sql"])
                print("\n".join(r[0] for r in cur.fetchall()))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3):
        client.get(url)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(35)
    print(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database", default="d2k_load")
    ap.add_argument("--broker", default="redis://127.0.0.1:6379/10")
    ap.add_argument("--submissions", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=5, help="gunicorn sync workers")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--duration", type=int, default=20, help="seconds per endpoint and concurrency level")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--concurrency", default="4,16")
    ap.add_argument("--only", default="", help="comma-separated endpoints: board,pairs,task,api-board,status")
    ap.add_argument("--skip-prepare", action="store_true", help="the database is already seeded")
    ap.add_argument("--prepare-only", action="store_true", help="create, migrate and seed the database, then stop")
    ap.add_argument("--output", default="", help="append the table as a section of this markdown file")
    ap.add_argument("--label", default="Run")
    ap.add_argument("--profile", default="", help="profile one request to this path instead of a load run")
    args = ap.parse_args()
    if shutil.which("wrk") is None and not args.profile:
        raise SystemExit("wrk is not installed (apt-get install -y wrk)")
    env = environment(args.database, args.broker)
    if not args.skip_prepare:
        prepare(args.database, args.submissions, env)
    if args.prepare_only:
        return
    if args.profile:
        run_profile(args.profile, env, submission_token="/api/v1/submissions/" in args.profile)
    else:
        run_load(args, env)


if __name__ == "__main__":
    main()
