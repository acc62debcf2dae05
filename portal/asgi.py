"""ASGI entry point, for servers that speak ASGI; production settings by default."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.prod")

application = get_asgi_application()
