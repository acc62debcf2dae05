"""Faults with real processes (issue 10; what they measured is in docs/results/reliability.md).

1. A worker killed mid-evaluation: first its pool process (the broker redelivers the message and
   the redelivery takes the run over), then the whole worker (the reaper run by a new worker's
   beat requeues the run). The submission ends ``evaluated`` with one result row per task.
2. Redis killed and restarted, with the persistence production runs (the append-only file), while
   a submission waits and no worker runs, plus an upload made while Redis was down: none is lost,
   the sweep re-sends only the message that never reached Redis, and a worker evaluates both.
3. PostgreSQL cut (through :mod:`tests.portal.tcp_proxy`) during an upload, before the
   submission's INSERT and during its COMMIT: the client gets a 503 that says what to do, no
   half-written row or orphan file remains, and the retry with the same Idempotency-Key stores
   the upload exactly once.
4. A device error in one task: the run of test 1 has a first task whose kernel raises CUDA's
   illegal-memory-access error; that task fails with ``eval:user:illegal-address``, is not retried,
   and the second task is still judged. (Crashes, hangs and plain exceptions of one task:
   tests/evaluator/test_runner_faults.py.)

Timings are printed with the ``FAULT`` prefix (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from kombu import Connection
from rest_framework.test import APIClient

from evaluator import errors
from leaderboard.models import Workload
from portal import broker
from portal.audit.models import AuditLog
from portal.submissions import actions
from portal.submissions.models import Bundle, EvaluationAttempt, Submission, SubmissionTask, TaskResult, WorkloadResult
from portal.submissions.sweep import TASK, do_requeue_lost
from portal.teams.services import token_create
from tests.portal.factories import expert_bundle, expert_source, make_team, make_zip, manifest_text, media_files
from tests.portal.tcp_proxy import TcpProxy
from tests.portal.worker import REPO, PortalWorker, database_url

FINAL = ("evaluated", "failed", "error", "published", "rejected", "cancelled")
QUEUE = "cpu.interpret"


def report(what: str, seconds: float) -> None:
    print(f"FAULT {what}: {seconds:.1f} s")


def wait_until(what: str, check: Callable[[], object], timeout_s: float, logs: Callable[[], str] = str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}\n{logs()[-6000:]}")


def free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


# --- processes ---------------------------------------------------------------------------------

def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (by parent links; the engine's children run in their own sessions)."""
    parents = {int(p.name): _ppid(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [child for child, pp in parents.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def engine_running_under(pid: int) -> bool:
    return any("evaluator.child" in cmdline(p) for p in descendants(pid))


class FaultWorkers:
    """Prefork workers (as production runs them), stopped after the test whatever happened."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.workers: list[PortalWorker] = []

    def start(self, queues: str = QUEUE, *, concurrency: int = 1, beat: bool = False, purge: bool = True,
              **env: str) -> PortalWorker:
        args: tuple[str, ...] = ("--pool", "prefork", "-c", str(concurrency))
        if beat:
            args += ("-B", "-s", str(self.tmp / f"beat-{len(self.workers)}"))
        worker = PortalWorker(self.tmp / f"fault-worker-{len(self.workers)}.log", queues, args=args, purge=purge,
                              **env)
        self.workers.append(worker)
        return worker.start()

    def logs(self) -> str:
        return "\n".join(f"--- {w.name}\n{w.log()[-3000:]}" for w in self.workers)

    def stop(self) -> None:
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                tree = descendants(worker.proc.pid)
                worker.stop()
                kill_all(tree)


@pytest.fixture
def fault_workers(tmp_path: Path) -> Iterator[FaultWorkers]:
    workers = FaultWorkers(tmp_path)
    yield workers
    workers.stop()


class RedisServer:
    """A private redis-server with production's persistence: the append-only file, fsync every second."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port(6391)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until("redis-server", self.ping, 20, lambda: (self.folder / "redis.log").read_text())
        return self

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.kill()


def held(url: str) -> list[tuple[int, int]]:
    """(submission, attempt) of every evaluation message the broker at ``url`` holds."""
    with Connection(url) as conn:
        return sorted(tuple(args) for args in broker.held_task_args(conn, QUEUE, TASK))


class Site:
    """The site under gunicorn with the deployment's configuration, in a subprocess."""

    def __init__(self, log_path: Path, **env: str):
        self.port = free_port(0)
        self.log_path = log_path
        self.env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test", "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "D2K_TASKS_ROOT": str(settings.D2K_TASKS_ROOT),
            "D2K_MEDIA_ROOT": str(settings.MEDIA_ROOT), "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": "1", "ALLOWED_HOSTS": "127.0.0.1,localhost", "PYTHONUNBUFFERED": "1", **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> Site:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "portal.wsgi"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

        def up() -> bool:
            try:
                return self.request("GET", "/healthz")[0] == 200
            except OSError:
                return self.proc is not None and self.proc.poll() is not None and pytest.fail(self.log())

        wait_until("gunicorn", up, 60, self.log)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers={"Host": "localhost", **(headers or {})})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def upload(self, token: str, blob: bytes, key: str) -> tuple[int, dict[str, str], dict]:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.zip\"\r\n"
                f"Content-Type: application/zip\r\n\r\n").encode() + blob + f"\r\n--{boundary}--\r\n".encode()
        status, headers, raw = self.request("POST", "/api/v1/submissions/", body, {
            "Authorization": f"Bearer {token}", "Idempotency-Key": key,
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        return status, headers, json.loads(raw) if raw.startswith(b"{") else {"raw": raw.decode(errors="replace")}


@pytest.fixture
def start_site(tmp_path: Path) -> Iterator[Callable[..., Site]]:
    sites: list[Site] = []

    def start(**env: str) -> Site:
        site = Site(tmp_path / f"site-{len(sites)}.log", **env)
        sites.append(site)
        return site.start()

    yield start
    for site in sites:
        site.stop()


def status_of(pk: int) -> str:
    return Submission.objects.values_list("status", flat=True).get(pk=pk)


def transitions(pk: int) -> list[str]:
    return list(AuditLog.objects.filter(submission_id=pk, action="submission.transition")
                .order_by("id").values_list("to_status", flat=True))


def drop_unacked(url: str, pairs: set[tuple[int, int]]) -> None:
    """Remove the dead worker's unacknowledged message, which Redis would hand out again only after
    the visibility timeout (hours), so it cannot reach another test's worker."""
    with Connection(url) as conn:
        channel = conn.default_channel
        client = channel.client
        for tag, raw in client.hgetall(channel.unacked_key).items():
            payload = json.loads(raw)[0]
            args = channel.Message(payload, channel=channel).decode()[0]
            if tuple(args) in pairs:
                client.hdel(channel.unacked_key, tag)
                client.zrem(channel.unacked_index_key, tag)


# --- 1. a worker killed mid-evaluation -------------------------------------------------------------

DEVICE_ERROR = """import torch
import triton


@triton.jit
def _k(x):
    pass


def fused_add_rmsnorm(*args, **kwargs):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


@pytest.mark.integration
@pytest.mark.interpreter
@pytest.mark.timeout(300)
def test_worker_killed_mid_evaluation_is_retried_and_finishes_once(transactional_db, catalogue, media,
                                                                    fault_workers):
    """Faults 1 and 4 in one run: its first task's kernel raises a CUDA device error, its second is
    an expert kernel; the worker is killed twice while the second task is being judged."""
    team, owner = make_team("Faults")
    client = APIClient(HTTP_HOST="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(team, name='ci', actor=owner).secret}")
    # A long stale threshold: the first recovery must come from the redelivery, not the heartbeat.
    w1 = fault_workers.start(D2K_HEARTBEAT_STALE_S="600")
    slugs = ("fused-add-rmsnorm", "silu-and-mul")
    blob = make_zip({"submission.toml": manifest_text(list(slugs)), "fused-add-rmsnorm/kernel.py": DEVICE_ERROR,
                     "silu-and-mul/kernel.py": expert_source("silu-and-mul")})
    response = client.post("/api/v1/submissions/", {"bundle": SimpleUploadedFile("b.zip", blob)}, format="multipart")
    assert response.status_code == 201, response.json()
    pk = response.json()["id"]
    attempt = EvaluationAttempt.objects.get(submission_id=pk)

    def pool_judging_task_two() -> list[int]:
        if not TaskResult.objects.filter(attempt=attempt).exists():
            return []
        return [p for p in descendants(w1.proc.pid) if _ppid(p) == w1.proc.pid and engine_running_under(p)]

    # (a) The pool process dies (an OOM kill) after the first task's result was stored.
    (pool,) = wait_until("the second task to be judged", pool_judging_task_two, 120, fault_workers.logs)
    killed = time.monotonic()
    kill_all([pool, *descendants(pool)])
    wait_until("the redelivery to take the run over",
               lambda: AuditLog.objects.filter(submission_id=pk, action="attempt.takeover").exists(), 60,
               fault_workers.logs)
    report("pool process killed -> run taken over by the redelivered message", time.monotonic() - killed)
    takeover = AuditLog.objects.get(submission_id=pk, action="attempt.takeover")
    assert "redelivered" in takeover.reason and status_of(pk) == "running"
    wait_until("the engine to run again", lambda: engine_running_under(w1.proc.pid), 60, fault_workers.logs)

    # (b) The whole worker dies (the node is lost): its message stays unacknowledged in Redis.
    killed = time.monotonic()
    kill_all([w1.proc.pid, *descendants(w1.proc.pid)])
    w1.proc.wait(10)
    w2 = fault_workers.start(f"{QUEUE},web", concurrency=2, beat=True, purge=False, D2K_HEARTBEAT_STALE_S="4",
                             D2K_REAPER_INTERVAL_S="1")
    wait_until("the run to start again", lambda: transitions(pk)[4:6] == ["queued", "running"], 60,
               fault_workers.logs)
    report("whole worker killed -> run running again on a new worker", time.monotonic() - killed)
    wait_until("the evaluation", lambda: status_of(pk) in FINAL, 240, fault_workers.logs)
    report("whole worker killed -> submission evaluated", time.monotonic() - killed)

    attempt.refresh_from_db()
    assert status_of(pk) == "evaluated", (attempt.reason, fault_workers.logs())
    assert EvaluationAttempt.objects.filter(submission_id=pk).count() == 1
    # One retry, the reaper's: the device error is the kernel's fault and is never retried.
    assert attempt.infra_retries == 1 and attempt.worker == w2.name and attempt.claim == ""
    assert transitions(pk) == ["received", "validated", "queued", "running", "queued", "running", "evaluated"]
    results = {r.task.slug: r for r in TaskResult.objects.filter(attempt=attempt)}
    assert TaskResult.objects.count() == len(results) == 2
    device, other = results["fused-add-rmsnorm"], results["silu-and-mul"]
    assert device.status != "correct" and device.error_code == errors.USER_ILLEGAL_ADDRESS, device.reason
    assert "illegal memory access" in device.reason
    assert other.status == "correct", other.reason
    expected = Workload.objects.filter(task__slug="silu-and-mul", smoke=True).count()
    assert other.workloads.filter(correct=True).count() == expected > 0
    assert WorkloadResult.objects.filter(task_result=other).count() == expected
    assert WorkloadResult.objects.exclude(task_result__in=[device, other]).count() == 0
    assert "reaped attempt" in w2.log()
    drop_unacked(settings.CELERY_BROKER_URL, {(pk, 1)})


# --- 2. Redis restarted while submissions are queued -------------------------------------------------

@pytest.mark.integration
@pytest.mark.interpreter
@pytest.mark.timeout(300)
def test_redis_restart_loses_no_queued_submission(transactional_db, catalogue, media, redis_server, start_site,
                                                   fault_workers):
    team, owner = make_team("Faults")
    token = token_create(team, name="ci", actor=owner).secret
    site = start_site(CELERY_BROKER_URL=redis_server.url)
    status, _, body = site.upload(token, expert_bundle(), "redis-0")
    assert status == 201, body
    ids = [body["id"]]
    assert held(redis_server.url) == [(ids[0], 1)]

    redis_server.kill()  # SIGKILL: no shutdown save; only what the append-only file holds survives
    started = time.monotonic()
    status, _, body = site.upload(token, expert_bundle(guidance="L1"), "redis-1")  # the broker is down
    report("upload answered while Redis was down", time.monotonic() - started)
    assert status == 201, body
    ids.append(body["id"])
    assert status_of(ids[1]) == "queued"
    redis_server.start()
    assert held(redis_server.url) == [(ids[0], 1)], "the restart lost a queued message"
    assert "on_commit" in site.log()  # the failed publish was logged, not raised

    restarted = time.monotonic()
    worker = fault_workers.start(f"{QUEUE},web", concurrency=2, beat=True, CELERY_BROKER_URL=redis_server.url,
                                 D2K_REQUEUE_INTERVAL_S="1", D2K_REQUEUE_GRACE_S="1")
    wait_until("both evaluations", lambda: all(status_of(pk) in FINAL for pk in ids), 240, fault_workers.logs)
    report("Redis restarted -> both submissions evaluated", time.monotonic() - restarted)

    for pk in ids:
        assert status_of(pk) == "evaluated", EvaluationAttempt.objects.get(submission_id=pk).reason
        assert EvaluationAttempt.objects.filter(submission_id=pk).count() == 1
        assert TaskResult.objects.filter(attempt__submission_id=pk).count() == 1
    resent = AuditLog.objects.filter(action="attempt.redispatch")
    assert [a.submission_id for a in resent] == [ids[1]], "the sweep re-sends only the lost message, once"
    assert "skipped" not in worker.log(), "no evaluation message was delivered twice"
    assert held(redis_server.url) == []


# --- 3. the database unavailable at upload time -----------------------------------------------------

@pytest.mark.integration
@pytest.mark.timeout(180)
def test_database_cut_during_upload(transactional_db, catalogue, media, start_site):
    team, owner = make_team("Faults")
    token = token_create(team, name="ci", actor=owner).secret
    proxy = TcpProxy(int(connection.settings_dict["PORT"] or 5432))
    try:
        s = connection.settings_dict
        site = start_site(DATABASE_URL=f"postgresql://{s['USER']}@127.0.0.1:{proxy.port}/{s['NAME']}")
        _cut_before_insert(site, proxy, token, media)
        _cut_during_commit(site, proxy, token, media)
    finally:
        proxy.close()


def _unavailable(status: int, headers: dict[str, str], body: dict) -> None:
    assert status == 503, body
    assert body["error"]["code"] == "unavailable" and "Idempotency-Key" in body["error"]["message"]
    assert headers.get("retry-after") == "5"


def _cut_before_insert(site: Site, proxy: TcpProxy, token: str, media: Path) -> None:
    """The link fails before the submission's INSERT: the transaction never commits."""
    blob = expert_bundle()
    proxy.cut_on(b'INSERT INTO "submissions_submission"')
    started = time.monotonic()
    _unavailable(*site.upload(token, blob, "db-1"))
    report("upload with the database cut -> 503", time.monotonic() - started)
    assert proxy.is_cut
    _unavailable(*site.upload(token, blob, "db-1"))  # while it stays down: refused at connect, same answer
    status, headers, page = site.request("GET", "/")
    assert status == 503 and b"Temporarily unavailable" in page and b"Traceback" not in page
    proxy.restore()
    assert Submission.objects.count() == Bundle.objects.count() == SubmissionTask.objects.count() == 0
    assert not AuditLog.objects.filter(action="submission.transition").exists()
    assert media_files(media) == [], "the upload's files were left behind"

    restored = time.monotonic()
    status, _, first = site.upload(token, blob, "db-1")
    report("database back -> retry stored", time.monotonic() - restored)
    assert status == 201, first
    status, _, again = site.upload(token, blob, "db-1")
    assert status == 200 and again["id"] == first["id"]
    assert Submission.objects.count() == 1
    assert media_files(media) == [Bundle.objects.get().storage_name]


def _cut_during_commit(site: Site, proxy: TcpProxy, token: str, media: Path) -> None:
    """The COMMIT reaches the server but its answer is lost: the client cannot know it succeeded.

    The rows are committed whole while the site, seeing an error, removed the files and never
    published the message. The retry with the same key repairs the files; the sweep sends the message.
    """
    blob = expert_bundle(guidance="L1")
    proxy.cut_on(b"COMMIT", after=b'INSERT INTO "submissions_submission"', forward=True)
    _unavailable(*site.upload(token, blob, "db-2"))
    proxy.restore()
    sub = Submission.objects.get(idempotency_key="db-2")
    assert sub.status == "queued" and sub.tasks.count() == 1
    assert transitions(sub.pk) == ["received", "validated", "queued"]
    assert sub.bundle.storage_name not in media_files(media)

    status, _, body = site.upload(token, blob, "db-2")
    assert status == 200 and body["id"] == sub.pk, body
    assert Submission.objects.filter(idempotency_key="db-2").count() == 1
    assert sub.bundle.storage_name in media_files(media)
    assert (media / sub.bundle.storage_name).read_bytes() == blob

    url = settings.CELERY_BROKER_URL
    first = Submission.objects.get(idempotency_key="db-1").pk
    assert (sub.pk, 1) not in held(url) and (first, 1) in held(url)
    assert do_requeue_lost(grace_s=0) == [(sub.pk, 1)]
    assert do_requeue_lost(grace_s=0) == []
    assert {(first, 1), (sub.pk, 1)} <= set(held(url))
    with Connection(url) as conn:
        conn.default_channel.queue_purge(QUEUE)


# --- the rules the recoveries rely on, without processes ----------------------------------------------

@pytest.mark.django_db
def test_only_a_redelivery_of_the_claiming_message_takes_over_a_live_run(catalogue, media):
    """A run whose heartbeat is fresh is taken over by the redelivery of the very message that
    claimed it (its worker is gone), never by another message or a first delivery of the same one."""
    team, user = make_team("Faults")
    sub, _ = actions.check_create_submission(team=team, user=user, blob=expert_bundle(), filename="b.zip")
    first = actions.do_start_evaluation(sub.pk, 1, worker="w1", delivery="m1")
    assert first
    assert actions.do_start_evaluation(sub.pk, 1, worker="w2", delivery="m2", redelivered=True) is None
    assert actions.do_start_evaluation(sub.pk, 1, worker="w1", delivery="m1", redelivered=False) is None
    assert actions.do_start_evaluation(sub.pk, 1, worker="w1", delivery="", redelivered=True) is None
    second = actions.do_start_evaluation(sub.pk, 1, worker="w1", delivery="m1", redelivered=True)
    assert second and second != first
    attempt = EvaluationAttempt.objects.get(submission=sub)
    assert (attempt.claim, attempt.delivery) == (second, "m1") and attempt.status == "running"
    assert not actions.do_heartbeat(attempt.pk, first, {}), "the lost delivery's claim is void"
    assert transitions(sub.pk) == ["received", "validated", "queued", "running"]
