"""Operations: health endpoints against the real database and broker, production settings, JSON logs."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest
from django.core.management import call_command

from portal.celery import app as celery_app
from tasks.registry import REPO_ROOT


def test_liveness_touches_nothing(client) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


@pytest.mark.django_db(transaction=True)
def test_readiness_checks_database_migrations_and_broker(client) -> None:
    ok = client.get("/readyz")
    assert ok.status_code == 200, ok.content
    assert ok.json()["checks"]["database"]["ok"] and ok.json()["checks"]["broker"]["ok"]

    call_command("migrate", "scores", "0001", verbosity=0)  # a deploy that forgot to migrate
    try:
        stale = client.get("/readyz")
        assert stale.status_code == 503 and "migration(s) not applied" in stale.json()["checks"]["database"]["detail"]
    finally:
        call_command("migrate", verbosity=0)

    real = celery_app.conf.broker_write_url
    celery_app.conf.broker_write_url = "redis://127.0.0.1:1/0"  # nothing listens there
    try:
        down = client.get("/readyz")
    finally:
        celery_app.conf.broker_write_url = real
    assert down.status_code == 503 and not down.json()["checks"]["broker"]["ok"]
    # Public: the kind of failure, not the driver's message with its host and port.
    assert down.json()["checks"]["broker"]["detail"].endswith("(details in the log)")
    assert "6379" not in down.content.decode() and ":1/" not in down.content.decode()
    assert down.json()["checks"]["database"]["ok"]


def _run(env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "LOG_FORMAT")}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env={**full, **env}, capture_output=True,
                          text=True, timeout=120)


def test_production_settings_refuse_a_default_secret_and_pass_the_deploy_check() -> None:
    setup = "import django; django.setup()"
    refused = _run({"DJANGO_SETTINGS_MODULE": "portal.settings.prod"}, setup)
    assert refused.returncode != 0 and "SECRET_KEY must be set" in refused.stderr
    env = {"DJANGO_SETTINGS_MODULE": "portal.settings.prod", "SECRET_KEY": secrets.token_urlsafe(50),
           "ALLOWED_HOSTS": "bench.example.org"}
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                           cwd=REPO_ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    settings_code = (setup + "; from django.conf import settings as s; "
                     "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.DEBUG)")
    assert _run(env, settings_code).stdout.split() == ["True", "True", "31536000", "False"]
    debug = _run({**env, "DEBUG": "1"}, setup)  # tracebacks and settings for anyone: refused
    assert debug.returncode != 0 and "DEBUG must be off in production" in debug.stderr


def test_production_logs_are_one_json_object_per_line() -> None:
    env = {"DJANGO_SETTINGS_MODULE": "portal.settings.prod", "SECRET_KEY": secrets.token_urlsafe(50)}
    out = _run(env, "import django, logging; django.setup(); "
                    "logging.getLogger('d2k.test').warning('queue depth', extra={'queue': 'gpu.h200', 'depth': 3})")
    line = json.loads(out.stderr.strip().splitlines()[-1])
    assert line["level"] == "WARNING" and line["logger"] == "d2k.test" and line["message"] == "queue depth"
    assert line["queue"] == "gpu.h200" and line["depth"] == 3 and "time" in line


def test_gunicorn_config_loads() -> None:
    proc = subprocess.run([sys.executable, "-m", "gunicorn", "--check-config", "-c", "deploy/gunicorn.conf.py",
                           "portal.wsgi"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.dev"})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_production_processes_share_one_cache_in_redis() -> None:
    """Behind several gunicorn workers, a publication's new board generation and the sign-in
    failures must be seen by every process: production keeps its cache in Redis (CACHE_URL, or the
    broker's Redis), and what one process writes the next one reads."""
    redis_url = "redis://127.0.0.1:6379/13"
    token = secrets.token_hex(8)
    base = {"DJANGO_SETTINGS_MODULE": "portal.settings.prod", "SECRET_KEY": secrets.token_urlsafe(50)}
    setup = "import django; django.setup(); from django.core.cache import cache; "
    wrote = _run({**base, "CACHE_URL": redis_url}, setup + f"cache.set('board:generation', '{token}', 60)")
    assert wrote.returncode == 0, wrote.stderr
    read = _run({**base, "CELERY_BROKER_URL": redis_url},  # no CACHE_URL: the broker's Redis
                setup + "from django.conf import settings; "
                        "print(settings.CACHES['default']['BACKEND'], cache.get('board:generation'))")
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["django.core.cache.backends.redis.RedisCache", token]
    local = _run(base | {"CELERY_BROKER_URL": ""}, setup + "from django.conf import settings; "
                                                            "print(settings.CACHES['default']['BACKEND'])")
    assert local.stdout.strip() == "django.core.cache.backends.locmem.LocMemCache", local.stderr
