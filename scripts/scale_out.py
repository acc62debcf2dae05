"""Scale-out proof (issue 11): judge N bundles with one pinned worker, then with one per GPU.

Runs the whole site on its embedded default (SQLite and the filesystem broker, under
``--workdir``) with the web server in a subprocess, creates a team and token, and submits
``--bundles`` full bundles (the expert kernel of every task, or ``--tasks``) through the REST API,
twice: first with one worker (``ops.gpu_workers`` pinned to the first GPU), then with one worker
per GPU. It measures the wall time to judge each batch and checks, from the database:

* every bundle judged exactly once (one attempt, no duplicate result rows);
* no worker node ran two judgements at once (attempt intervals per node do not overlap);
* results identical in correctness whichever GPU judged them, and timings within noise
  (per-workload candidate medians of the same kernel on different GPUs).

The figure is throughput(two workers) / throughput(one worker). Writes a Markdown report.
On a machine without GPUs ``--queue cpu.interpret`` runs the same flow in Triton's interpreter
(correctness only), which is how CI exercises it.

Usage: python scripts/scale_out.py --gpus 0,1 --bundles 4 --out docs/results/scale-out.md
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bundle(slugs: list[str], hardware: str, n: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("submission.toml", (
            f'model = "expert-{n}"\nprovider = "d2k"\nharness = "scale-out"\nguidance = "none"\n'
            f'hardware = "{hardware}"\ntasks = [{", ".join(json.dumps(s) for s in slugs)}]\n'))
        for s in slugs:
            zf.writestr(f"{s}/kernel.py", (ROOT / "references" / s / "expert.py").read_text())
    return buf.getvalue()


class Site:
    """The site and its workers as subprocesses sharing one environment."""

    def __init__(self, workdir: Path):
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        self.workdir = workdir
        self.port = _free_port()
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.dev", "D2K_VAR_DIR": str(workdir),
                    "DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}", "PYTHONUNBUFFERED": "1"}
        self.env.pop("CELERY_BROKER_URL", None)
        self.procs: list[subprocess.Popen[bytes]] = []

    def manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True,
                              capture_output=True, text=True).stdout

    def start_web(self) -> None:
        log = (self.workdir / "web.log").open("wb")
        self.procs.append(subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}",
                                            "--noreload"], cwd=ROOT, env=self.env, stdout=log, stderr=log))
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the web server did not start")

    def start_workers(self, gpus: list[str], queue: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"workers-{len(gpus)}.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "ops.gpu_workers", "--gpus", ",".join(gpus), "--queue", queue,
                                 "--", "--loglevel", "INFO"], cwd=ROOT, env=self.env, stdout=log, stderr=log,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                self.stop(p)


def run_batch(site: Site, client, slugs: list[str], hardware: str, n: int, first: int) -> tuple[list[int], float]:  # noqa: ANN001
    t0 = time.perf_counter()
    ids = []
    for i in range(n):
        path = site.workdir / f"bundle-{first + i}.zip"
        path.write_bytes(bundle(slugs, hardware, first + i))
        code, body = client.submit(path, hardware=hardware)
        ids.append(body["id"])
    while True:
        states = [client.submission(pk)["status"] for pk in ids]
        if all(s not in ("received", "validated", "queued", "running") for s in states):
            return ids, time.perf_counter() - t0
        time.sleep(1.0)


def analyse(site: Site, batches: dict[str, list[int]]) -> dict:
    """Read the database (through Django, in this process) for the checks."""
    os.environ.update({k: v for k, v in site.env.items() if k in ("DJANGO_SETTINGS_MODULE", "D2K_VAR_DIR",
                                                                 "DATABASE_URL")})
    import django

    django.setup()
    from portal.submissions.models import EvaluationAttempt, Submission, TaskResult

    out: dict = {"batches": {}}
    all_ids = [pk for ids in batches.values() for pk in ids]
    attempts = list(EvaluationAttempt.objects.filter(submission_id__in=all_ids).order_by("started_at"))
    out["attempts_per_submission"] = {pk: sum(a.submission_id == pk for a in attempts) for pk in all_ids}
    dup = TaskResult.objects.filter(attempt__in=attempts).values("attempt", "task").distinct().count()
    out["duplicate_results"] = TaskResult.objects.filter(attempt__in=attempts).count() - dup
    overlaps = []
    by_node: dict[str, list[EvaluationAttempt]] = {}
    for a in attempts:
        by_node.setdefault(a.worker.split("/")[0], []).append(a)
    for node, runs in by_node.items():
        for x, y in zip(runs, runs[1:], strict=False):
            if x.finished_at and y.started_at and y.started_at < x.finished_at:
                overlaps.append(f"{node}: attempt {x.pk} and {y.pk}")
    out["overlaps"] = overlaps
    out["nodes"] = {node: len(runs) for node, runs in by_node.items()}
    status = {pk: Submission.objects.get(pk=pk).status for pk in all_ids}
    out["statuses"] = status
    correctness: dict[str, set] = {}
    medians: dict[tuple[str, str], dict[str, list[float]]] = {}
    for a in attempts:
        for tr in a.task_results.select_related("task").prefetch_related("workloads"):
            correctness.setdefault(tr.task.slug, set()).add(tr.status)
            for w in tr.workloads.all():
                if w.candidate_ms:
                    medians.setdefault((tr.task.slug, w.name), {}).setdefault(a.worker.split("/")[0], []).append(
                        w.candidate_ms)
    out["correctness_identical"] = all(len(v) == 1 for v in correctness.values())
    spreads = []
    for key, per_node in medians.items():
        means = [statistics.fmean(v) for v in per_node.values()]
        if len(means) > 1:
            spreads.append((key, (max(means) - min(means)) / min(means)))
    out["max_cross_gpu_spread"] = max((s for _, s in spreads), default=None)
    out["spreads"] = {f"{k[0]}/{k[1]}": s for k, s in sorted(spreads, key=lambda t: -t[1])[:10]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--bundles", type=int, default=4)
    ap.add_argument("--queue", default="gpu.h200")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--tasks", default="", help="comma-separated slugs (default: every task)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/d2k-scale-out"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from d2k_cli.client import Client
    from tasks.registry import load_tasks

    slugs = [s for s in args.tasks.split(",") if s] or [t.slug for t in load_tasks().tasks]
    gpus = [g for g in args.gpus.split(",") if g]
    site = Site(args.workdir)
    try:
        site.manage("migrate", "--noinput")
        site.manage("sync_tasks")
        site.manage("create_team", "ScaleOut", "--owner", "so-owner", "--password", "so-pw-0123456789")
        token = site.manage("shell", "-c", (
            "from portal.teams.models import Team; from portal.teams.services import token_create; "
            "from django.contrib.auth import get_user_model; t = Team.objects.get(name='ScaleOut'); "
            "u = get_user_model().objects.get(username='so-owner'); "
            "print(token_create(t, name='so', actor=u).secret)")).strip().splitlines()[-1]
        site.start_web()
        client = Client(f"http://127.0.0.1:{site.port}", token)
        batches, walls = {}, {}
        for label, use in (("one worker", gpus[:1]), (f"{len(gpus)} workers", gpus)):
            workers = site.start_workers(use, args.queue)
            ids, wall = run_batch(site, client, slugs, args.hardware, args.bundles, len(batches) * args.bundles)
            site.stop(workers)
            batches[label], walls[label] = ids, wall
            print(f"{label}: {args.bundles} bundles in {wall:.1f} s", flush=True)
    finally:
        site.close()
    report = analyse(site, batches)
    labels = list(walls)
    ratio = walls[labels[0]] / walls[labels[1]]
    report.update({"walls_s": walls, "throughput_ratio": ratio, "gpus": gpus, "bundles": args.bundles,
                   "tasks": slugs, "queue": args.queue})
    spread = "n/a (untimed)" if report["max_cross_gpu_spread"] is None else f"{report['max_cross_gpu_spread']:.2%}"
    text = "\n".join([
        "# Scale-out: one Celery worker per GPU", "",
        f"Command: `python scripts/scale_out.py --gpus {args.gpus} --bundles {args.bundles} --queue {args.queue}`", "",
        f"{args.bundles} bundles of {len(slugs)} task(s) each, judged first by one worker, then by {len(gpus)}.", "",
        "| workers | wall time (s) | bundles/hour |", "|---|---|---|",
        *[f"| {k} | {v:.1f} | {3600 * args.bundles / v:.1f} |" for k, v in walls.items()], "",
        f"**Throughput ratio: {ratio:.2f}x.**", "",
        f"- each bundle judged once: {all(v == 1 for v in report['attempts_per_submission'].values())}; "
        f"duplicate result rows: {report['duplicate_results']}",
        f"- judgements per worker node: {report['nodes']}; overlapping judgements on one node: "
        f"{len(report['overlaps'])}",
        f"- correctness identical across GPUs: {report['correctness_identical']}; largest cross-GPU spread of a "
        f"kernel's median: {spread}",
        "", "```json", json.dumps(report, indent=1, default=str), "```", ""])
    if args.out:
        args.out.write_text(text)
    print(text)
    ok = (all(v == 1 for v in report["attempts_per_submission"].values()) and not report["overlaps"]
          and report["duplicate_results"] == 0 and report["correctness_identical"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
