"""Local development: DEBUG on unless the environment says otherwise, embedded defaults.

Static files are served by whitenoise straight from ``static/`` (no ``collectstatic`` step),
which is what ``scripts/run-local.sh`` relies on.
"""

from portal.settings.base import *  # noqa: F403
from portal.settings.base import env_bool

DEBUG = env_bool("DEBUG", True)
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
