"""The Celery app: ``celery -A portal worker -Q cpu.interpret,web``.

Configuration comes from the Django settings (keys prefixed ``CELERY_``), all kept together in
``portal/settings/base.py``. Results are written to the database by the tasks themselves, so no
result backend is configured. Each worker runs a beacon thread (``portal/submissions/beacon.py``)
so the public status page can tell which workers are alive.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["portal.submissions"])


def _add_beacon() -> None:
    from portal.submissions.beacon import BeaconStep

    app.steps["worker"].add(BeaconStep)


_add_beacon()
