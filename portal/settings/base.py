"""Settings shared by every environment, driven by environment variables.

Variables: ``DATABASE_URL`` (default: SQLite at ``var/db.sqlite3``), ``SECRET_KEY``,
``ALLOWED_HOSTS`` (comma-separated), ``DEBUG``, ``CELERY_BROKER_URL`` (default: the embedded
filesystem broker under ``var/broker/``, see ``portal/broker.py``), ``D2K_BROKER_DIR``,
``D2K_TASKS_ROOT`` (the tree holding ``tasks/``, ``references/``, ``guidance/``) and
``D2K_VERIFY_TIMEOUT_S``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from kombu import Queue

from portal import broker

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("D2K_VAR_DIR", BASE_DIR / "var"))

#: The placeholder key; ``prod`` refuses to start with it.
INSECURE_SECRET_KEY = "django-insecure-d2k-bench-development-key-do-not-use-in-production"


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


SECRET_KEY = os.environ.get("SECRET_KEY", INSECURE_SECRET_KEY)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{VAR_DIR / 'db.sqlite3'}"


DATABASES = {"default": dj_database_url.parse(_database_url(), conn_max_age=60)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- The task tree and reference verification -------------------------------------------------
D2K_TASKS_ROOT = Path(os.environ.get("D2K_TASKS_ROOT", BASE_DIR))
#: Wall-clock limit of one ``python -m evaluator check`` run of an expert kernel (smoke, interpreter).
D2K_VERIFY_TIMEOUT_S = env_int("D2K_VERIFY_TIMEOUT_S", 900)

# --- Celery (all of it here, so the worker's behaviour is read in one place) -----------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or broker.EMBEDDED_BROKER_URL
D2K_BROKER_DIR = Path(os.environ.get("D2K_BROKER_DIR", VAR_DIR / "broker"))
#: Results go to the database through services, never to a Celery result backend.
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
#: A task is acknowledged only after it finished, so a worker that dies mid-run (a node lost, an
#: OOM kill) leaves the message to be redelivered instead of losing it.
CELERY_TASK_ACKS_LATE = True
#: ...and a task whose worker process was killed is requeued rather than acknowledged as failed.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
#: One GPU job at a time per worker process; prefetching a second would hold it hostage for hours.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
#: Hard and soft limits for any task (a GPU evaluation of a full bundle is the longest).
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 4 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 300
CELERY_BROKER_TRANSPORT_OPTIONS = broker.transport_options(
    CELERY_BROKER_URL, D2K_BROKER_DIR, visibility_timeout=CELERY_TASK_TIME_LIMIT + 3600
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "web"
#: Queue names: ``web`` for light jobs, ``cpu.interpret`` for correctness-only runs in Triton's
#: interpreter, ``gpu.<hardware profile>`` for timed runs (one worker per GPU).
CELERY_TASK_QUEUES = tuple(Queue(name, routing_key=name) for name in ("web", "cpu.interpret", "gpu.h200"))
CELERY_TASK_ROUTES = {
    "leaderboard.tasks.verify_reference_task": {"queue": "cpu.interpret"},
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_TRACK_STARTED = False
