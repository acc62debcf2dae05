"""Health endpoints for load balancers and orchestrators.

``/healthz`` (liveness) answers 200 whenever the process can serve a request: it touches nothing,
so a slow database never gets a healthy web process restarted. ``/readyz`` (readiness) checks
what a request needs: the database answers and has every migration applied, and the Celery broker
accepts a connection. Each check reports its latency; any failure makes the answer 503, so a
deploy that forgot ``migrate`` or lost Redis is taken out of rotation, not served. The endpoint is
public, so the answer names only the kind of failure (a driver's message names hosts, ports and
users); the full message goes to the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from portal.celery import app as celery_app

log = logging.getLogger(__name__)


def _database() -> str:
    conn = connections[DEFAULT_DB_ALIAS]
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
    plan = MigrationExecutor(conn).migration_plan(MigrationExecutor(conn).loader.graph.leaf_nodes())
    if plan:
        raise NotReady(f"{len(plan)} migration(s) not applied")
    return "ok"


def _broker() -> str:
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
        return conn.transport_cls if isinstance(conn.transport_cls, str) else type(conn.transport).__name__


class NotReady(RuntimeError):
    """A failure whose message is ours and safe to show."""


CHECKS: dict[str, Callable[[], str]] = {"database": _database, "broker": _broker}


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    results, ok = {}, True
    for name, check in CHECKS.items():
        t0 = time.perf_counter()
        try:
            detail, passed = check(), True
        except Exception as exc:  # noqa: BLE001 - any failure is the answer, with its kind
            log.warning("readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
            detail = str(exc) if isinstance(exc, NotReady) else f"{type(exc).__name__} (details in the log)"
            passed = False
        ok &= passed
        results[name] = {"ok": passed, "detail": detail, "ms": round((time.perf_counter() - t0) * 1e3, 1)}
    return JsonResponse({"status": "ok" if ok else "unavailable", "checks": results}, status=200 if ok else 503)
