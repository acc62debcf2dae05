"""A real Celery worker for the submission tests, configured like the portal's producer.

The worker is ``celery -A portal worker`` in a subprocess, on the broker the test process's
settings name (Redis under ``scripts/test.sh``), with ``DATABASE_URL`` pointing at this test
run's database, the same media folder and the same task tree, so it sees exactly what the test
wrote and the test sees what it writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from portal.celery import app

REPO = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """The URL of the database this test run uses (the test database, not the configured one), for
    the worker subprocesses the tests start."""
    s = connection.settings_dict
    if s["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    auth = quote(s["USER"] or "", safe="") + (f":{quote(s['PASSWORD'], safe='')}" if s["PASSWORD"] else "")
    return f"postgresql://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


class PortalWorker:
    """``args`` replace the pool options (``--pool solo`` by default; the fault tests use the prefork
    pool as production does); ``purge`` empties the worker's queues first (off where a test queued
    messages for it on purpose)."""

    def __init__(self, log_path: Path, queues: str, *, args: tuple[str, ...] = ("--pool", "solo", "-c", "1"),
                 purge: bool = True, **env: str):
        self.name = f"portal-{uuid.uuid4().hex[:8]}@localhost"
        self.log_path = log_path
        self.queues = queues
        self.args, self.purge = args, purge
        self.env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test", "DATABASE_URL": database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "D2K_BROKER_DIR": str(settings.D2K_BROKER_DIR),
            "D2K_TASKS_ROOT": str(settings.D2K_TASKS_ROOT), "D2K_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "D2K_HEARTBEAT_S": "1", "PYTHONUNBUFFERED": "1", **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> PortalWorker:
        if self.purge:
            with app.connection_for_write() as conn:  # leftovers of earlier tests must not reach this worker
                for queue in self.queues.split(","):
                    conn.default_channel.queue_purge(queue)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", self.queues, *self.args,
                 "-n", self.name, "-l", "info"],
                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while " ready." not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"worker did not start (exit {self.proc.poll()}):\n{self.log()}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def wait_for(self, what: str, check: Callable[[], object], timeout_s: float = 300) -> object:
        """Poll ``check`` until it returns something truthy; fail with the worker's log."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.3)
        pytest.fail(f"timed out waiting for {what}; worker log:\n{self.log()[-6000:]}")
