"""The D2K-Bench Django project: settings, URLs and the Celery app.

The Celery app is imported here so that ``@shared_task`` functions bind to it whenever Django
starts (web process, worker, management commands).
"""

from portal.celery import app as celery_app

__all__ = ["celery_app"]
