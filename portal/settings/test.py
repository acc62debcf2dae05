"""Tests: PostgreSQL when ``DATABASE_URL`` names it, else a SQLite *file* test database.

The SQLite test database is a file, not memory, so that a real Celery worker started by the
integration tests can open the same database as the test process.
"""

from portal.settings.base import *  # noqa: F403
from portal.settings.base import DATABASES, VAR_DIR

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("TEST", {})["NAME"] = str(VAR_DIR / "test-db.sqlite3")
# Static files come from the finders (static/), so tests need no collectstatic.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
