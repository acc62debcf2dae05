"""A real Celery worker process, a real broker and the real test database.

The worker is started as ``celery -A portal worker -Q cpu.interpret`` with ``DATABASE_URL``
pointing at this test run's database, tasks are sent through the broker, and the tests wait for
the worker's write to show up in the database. Redis comes from ``CELERY_BROKER_URL`` (default
``redis://127.0.0.1:6379/15``); the embedded filesystem broker is exercised too, since it is
what ``scripts/run-local.sh`` uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from kombu import Connection

from leaderboard.constants import VerificationStatus
from leaderboard.models import Task
from portal import broker
from tests.portal.helpers import sync
from tests.portal.worker import database_url

REPO = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
VERIFY = "leaderboard.tasks.verify_reference_task"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


class Worker:
    """A worker subprocess and a producer app configured like it."""

    def __init__(self, broker_url: str, broker_dir: Path, tasks_root: Path, log_path: Path):
        self.name = f"test-{uuid.uuid4().hex[:8]}@localhost"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings.test",
            "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": broker_url,
            "D2K_BROKER_DIR": str(broker_dir),
            "D2K_TASKS_ROOT": str(tasks_root),
            "PYTHONUNBUFFERED": "1",
        }
        # The producer routes like the portal but talks to this worker's broker, whatever the
        # test process's own settings say. Connections name the URL explicitly because Celery
        # prefers the CELERY_BROKER_URL environment variable over any configured broker_url.
        self.broker_url = broker_url
        self.app = Celery("test-producer", broker=broker_url, set_as_current=False)
        self.app.conf.update(
            broker_transport_options=broker.transport_options(broker_url, broker_dir, 3600),
            task_queues=settings.CELERY_TASK_QUEUES,
            task_default_queue=settings.CELERY_TASK_DEFAULT_QUEUE,
            task_routes=settings.CELERY_TASK_ROUTES,
            task_serializer="json",
        )
        self.app.conf.broker_url = broker_url
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> None:
        with self.connection() as conn:  # leftovers of an aborted run must not reach this worker
            conn.default_channel.queue_purge("cpu.interpret")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", "cpu.interpret", "-c", "1",
                 "--pool", "solo", "-n", self.name, "-l", "info"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while " ready." not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"worker did not start (exit {self.proc.poll()}):\n{self.log()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def connection(self) -> Connection:
        conn = self.app.connection_for_write(url=self.broker_url)
        assert conn.transport_cls == self.broker_url.split(":", 1)[0], (conn.transport_cls, self.broker_url)
        return conn

    def send_verify(self, slug: str) -> None:
        with self.connection() as conn:
            self.app.send_task(VERIFY, args=[slug], connection=conn)


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(broker_url: str = REDIS_URL, tasks_root: Path = REPO) -> Worker:
        worker = Worker(broker_url, tmp_path / "broker", tasks_root, tmp_path / f"worker-{len(workers)}.log")
        workers.append(worker)
        worker.start()
        return worker

    yield start
    for worker in workers:
        worker.stop()
        assert worker.proc is not None and worker.proc.returncode is not None, "worker still running"


def wait_for_status(slug: str, worker: Worker, timeout_s: float, *, not_in: tuple[str, ...]) -> Task:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        row = Task.objects.get(slug=slug)
        if row.verification_status not in not_in:
            return row
        if worker.proc is not None and worker.proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{slug} still {Task.objects.get(slug=slug).verification_status} after {timeout_s}s; "
                f"worker log:\n{worker.log()}")


@pytest.mark.parametrize("broker_kind", ["redis", "filesystem"])
def test_worker_consumes_and_writes_the_row(broker_kind, transactional_db, task_tree, start_worker):
    """Plumbing without the engine: a task whose expert file is gone is recorded as an error."""
    root = task_tree()
    sync(root)
    (root / "references" / "fused-add-rmsnorm" / "expert.py").unlink()
    url = REDIS_URL if broker_kind == "redis" else broker.EMBEDDED_BROKER_URL
    worker = start_worker(url, root)
    worker.send_verify("fused-add-rmsnorm")
    row = wait_for_status("fused-add-rmsnorm", worker, 60, not_in=(VerificationStatus.UNVERIFIED,))
    assert row.verification_status == VerificationStatus.ERROR
    assert "references/fused-add-rmsnorm/expert.py" in row.verification_reason
    assert row.verification_at is not None
    assert "succeeded" in worker.log()


def test_worker_effective_configuration(transactional_db, start_worker):
    """Ask the running worker (remote control over Redis) for the configuration it runs with."""
    worker = start_worker(REDIS_URL)
    replies = worker.app.control.inspect(destination=[worker.name], timeout=10).conf(with_defaults=True)
    assert replies and worker.name in replies, f"no reply from {worker.name}:\n{worker.log()}"
    conf = replies[worker.name]
    assert conf["task_acks_late"] is True
    assert conf["task_reject_on_worker_lost"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["broker_transport_options"]["visibility_timeout"] > conf["task_time_limit"] > 0
    assert conf["task_default_queue"] == "web"


@pytest.mark.interpreter
def test_worker_verifies_a_real_expert_kernel_with_the_engine(transactional_db, start_worker):
    """End to end with the engine CLI: sync the real tree, verify T15's expert kernel."""
    sync()
    slug = "fused-add-rmsnorm"
    worker = start_worker(REDIS_URL)
    worker.send_verify(slug)
    row = wait_for_status(slug, worker, 600, not_in=(VerificationStatus.UNVERIFIED, VerificationStatus.QUEUED))
    assert row.verification_status == VerificationStatus.CORRECT, f"{row.verification_reason}\n{worker.log()}"
    assert row.verification_mode in {"interpreter", "gpu"}
    assert row.verification_sha256 == row.content_sha256
