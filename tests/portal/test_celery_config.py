"""The Celery settings that long GPU jobs depend on, as the app (and so a worker) sees them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from portal import broker
from portal.celery import app

REPO = Path(__file__).resolve().parents[2]


def test_reliability_settings():
    conf = app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_time_limit and conf.task_soft_time_limit < conf.task_time_limit
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.result_backend is None and conf.task_ignore_result is True


def test_queues_and_routes():
    conf = app.conf
    assert {q.name for q in conf.task_queues} == {"web", "cpu.interpret", "gpu.h200", "judge"}
    assert conf.task_default_queue == "web"
    app.loader.import_default_modules()
    route = app.amqp.router.route({}, "leaderboard.tasks.verify_reference_task")
    assert route["queue"].name == "cpu.interpret"


def test_verify_task_is_registered_with_late_acks():
    app.loader.import_default_modules()
    task = app.tasks["leaderboard.tasks.verify_reference_task"]
    assert task.acks_late is True
    assert task.time_limit > task.soft_time_limit


def test_embedded_broker_uses_folders_under_broker_dir(tmp_path):
    opts = broker.transport_options("filesystem://", tmp_path / "b", visibility_timeout=10)
    assert opts["data_folder_in"] == opts["data_folder_out"] == str(tmp_path / "b" / "queue")
    for key in ("data_folder_in", "processed_folder", "control_folder"):
        assert Path(opts[key]).is_dir()
    assert broker.transport_options("redis://h/1", tmp_path / "c", visibility_timeout=10) == {"visibility_timeout": 10}
    assert not (tmp_path / "c").exists()


def _import_settings(module: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; "
                               "print(settings.DEBUG, settings.SESSION_COOKIE_SECURE)"],
        cwd=REPO, env={**clean, "DJANGO_SETTINGS_MODULE": module, **env}, capture_output=True, text=True, timeout=60,
    )


def test_prod_refuses_the_default_secret_key():
    refused = _import_settings("portal.settings.prod")
    assert refused.returncode != 0 and "SECRET_KEY must be set" in refused.stderr
    ok = _import_settings("portal.settings.prod", SECRET_KEY="x" * 50)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["False", "True"]
