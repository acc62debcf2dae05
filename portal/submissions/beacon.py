"""A worker's sign of life for the status page: a thread that upserts a ``WorkerBeacon`` row.

A thread, not the worker's timer: with ``--pool solo`` the event loop is blocked while a task
runs (for hours on a GPU), and the status page must still show the worker alive.
"""

from __future__ import annotations

import threading

from celery import bootsteps
from django.conf import settings
from django.db import connection
from django.utils import timezone


def _beacon_loop(hostname: str, queues: list[str], stop: threading.Event) -> None:
    from portal.submissions.models import WorkerBeacon

    started = timezone.now()
    try:
        while True:
            try:
                WorkerBeacon.objects.update_or_create(hostname=hostname, defaults={
                    "queues": queues, "started_at": started, "last_seen": timezone.now()})
            except Exception:  # noqa: BLE001 - a database hiccup must not kill the worker; try again later
                connection.close()
            if stop.wait(max(2, settings.D2K_HEARTBEAT_S * 2)):
                return
    finally:
        connection.close()


class BeaconStep(bootsteps.StartStopStep):
    """Registered on the worker in ``portal/celery.py``."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs):  # noqa: ANN001
        super().__init__(worker, **kwargs)
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:  # noqa: ANN001
        queues = sorted(q.name for q in worker.app.amqp.queues.consume_from.values()) \
            if worker.app.amqp.queues.consume_from else []
        self.thread = threading.Thread(target=_beacon_loop, args=(worker.hostname, queues, self.stop_event),
                                       name="d2k-beacon", daemon=True)
        self.thread.start()

    def stop(self, worker) -> None:  # noqa: ANN001
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
