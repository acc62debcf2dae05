"""WSGI entry point for gunicorn (``gunicorn portal.wsgi``); production settings by default."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.prod")

application = get_wsgi_application()
