"""Settings shared by every environment, driven by environment variables.

Variables: ``DATABASE_URL`` (default: SQLite at ``var/db.sqlite3``), ``SECRET_KEY``,
``ALLOWED_HOSTS`` (comma-separated), ``DEBUG``, ``CELERY_BROKER_URL`` (default: the embedded
filesystem broker under ``var/broker/``, see ``portal/broker.py``), ``D2K_BROKER_DIR``,
``D2K_TASKS_ROOT`` (the tree holding ``tasks/``, ``references/``, ``guidance/``),
``D2K_VERIFY_TIMEOUT_S`` and ``CACHE_URL`` (a ``redis://`` URL: one cache shared by every process;
default: each process its own memory).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
import plotly
from kombu import Queue

from portal import broker
from portal.hardware_queues import hardware_queues

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
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "leaderboard",
    "portal.audit",
    "portal.teams",
    "portal.submissions",
    "portal.moderation",
    "portal.scores",
    "portal.api",
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
                "portal.teams.context_processors.membership",
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
# plotly.js comes from the plotly package (no CDN: the site works offline), as static/vendor/plotly.min.js.
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor", Path(plotly.__file__).parent / "package_data")]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

#: Logs go to stderr; LOG_FORMAT=json (the production default) writes one JSON object per line
#: (time, level, logger, message and any ``extra`` fields) for a log pipeline to index.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "pythonjsonlogger.json.JsonFormatter",
                 "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(process)d",
                 "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- The task tree and reference verification -------------------------------------------------
D2K_TASKS_ROOT = Path(os.environ.get("D2K_TASKS_ROOT", BASE_DIR))
#: Wall-clock limit of one ``python -m evaluator check`` run of an expert kernel (smoke, interpreter).
D2K_VERIFY_TIMEOUT_S = env_int("D2K_VERIFY_TIMEOUT_S", 900)

# --- Cache -----------------------------------------------------------------------------------
# The board caches (leaderboard/board_queries.py) and the sign-in rate limit live here. With one
# process (runserver, the tests) its own memory is right; behind several gunicorn workers each
# would keep its own board for up to a minute after a publication and count sign-in failures on
# its own, so production shares one Redis (prod.py defaults CACHE_URL to a Redis broker's URL).
CACHE_URL = os.environ.get("CACHE_URL", "")


def cache_settings(url: str) -> dict[str, dict[str, object]]:
    if not url:
        return {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"CACHE_URL must be a redis:// URL, not {url!r}")
    return {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                        "KEY_PREFIX": "d2k"}}


CACHES = cache_settings(CACHE_URL)

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
#: Hardware profile (evaluator.hardware.PROFILES) -> the Celery queue whose workers run on it.
#: ``D2K_HARDWARE_PROFILES`` (comma-separated) names the profiles a deployment accepts uploads for:
#: only those that have workers, or submissions would wait in a queue nobody reads.
D2K_HARDWARE_QUEUES = hardware_queues(os.environ.get("D2K_HARDWARE_PROFILES", "h200,cpu-interpret"))
CELERY_TASK_QUEUES = tuple(Queue(name, routing_key=name) for name in
                           dict.fromkeys(("web", "cpu.interpret", *D2K_HARDWARE_QUEUES.values(), "judge")))
CELERY_TASK_ROUTES = {
    "leaderboard.tasks.verify_reference_task": {"queue": "cpu.interpret"},
    # Evaluations are sent to the queue of their hardware profile explicitly (D2K_HARDWARE_QUEUES).
    "portal.submissions.tasks.reap_stale_runs_task": {"queue": "web"},
    "portal.submissions.tasks.requeue_lost_task": {"queue": "web"},
    "portal.scores.tasks.judge_task": {"queue": "judge"},
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_SEND_TASK_EVENTS = False
#: The stale-heartbeat reaper and the lost-message sweep, run by ``celery -A portal beat`` (or a
#: worker started with ``-B``).
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {"task": "portal.submissions.tasks.reap_stale_runs_task",
                        "schedule": float(env_int("D2K_REAPER_INTERVAL_S", 60)), "options": {"queue": "web"}},
    "requeue-lost": {"task": "portal.submissions.tasks.requeue_lost_task",
                     "schedule": float(env_int("D2K_REQUEUE_INTERVAL_S", 120)), "options": {"queue": "web"}},
}

# --- Submissions ------------------------------------------------------------------------------
D2K_DEFAULT_HARDWARE = os.environ.get("D2K_DEFAULT_HARDWARE", "h200")
#: The benchmark's own card: the leaderboard opens on it and task pages list its reference times
#: first, whatever D2K_DEFAULT_HARDWARE a deployment evaluates on (run-local: cpu-interpret).
D2K_BOARD_HARDWARE = os.environ.get("D2K_BOARD_HARDWARE", "h200")
#: Design-only submissions are evaluated by the LLM judge on this queue (the D2K_JUDGE_* settings
#: below); their uploads are refused while D2K_JUDGE_MODEL is unset.
D2K_JUDGE_QUEUE = "judge"
#: Upload limits (PORTAL.md, validation): the archive as sent, its content, and zip-bomb guards.
D2K_UPLOAD_MAX_BYTES = env_int("D2K_UPLOAD_MAX_BYTES", 32 * 2**20)
D2K_BUNDLE_MAX_UNCOMPRESSED = env_int("D2K_BUNDLE_MAX_UNCOMPRESSED", 256 * 2**20)
D2K_BUNDLE_MAX_MEMBERS = env_int("D2K_BUNDLE_MAX_MEMBERS", 400)
D2K_BUNDLE_MAX_RATIO = env_int("D2K_BUNDLE_MAX_RATIO", 100)
D2K_KERNEL_MAX_BYTES = env_int("D2K_KERNEL_MAX_BYTES", 1 * 2**20)
D2K_DESIGN_MAX_BYTES = env_int("D2K_DESIGN_MAX_BYTES", 1 * 2**20)
#: Quotas, enforced in the database when a submission is created: per team per rolling day, and
#: submissions queued or running at once. A team row may override both.
D2K_QUOTA_PER_DAY = env_int("D2K_QUOTA_PER_DAY", 20)
D2K_QUOTA_CONCURRENT = env_int("D2K_QUOTA_CONCURRENT", 4)
#: Workers beat every D2K_HEARTBEAT_S; the reaper treats a run silent for D2K_HEARTBEAT_STALE_S as
#: lost and requeues it, up to D2K_INFRA_RETRIES times, then records ``error``.
D2K_HEARTBEAT_S = env_int("D2K_HEARTBEAT_S", 5)
D2K_HEARTBEAT_STALE_S = env_int("D2K_HEARTBEAT_STALE_S", 180)
D2K_INFRA_RETRIES = env_int("D2K_INFRA_RETRIES", 2)
#: A re-run asked for on another node: how often a worker that should not run it hands it back to
#: the queue (then it runs there anyway, noted in the audit log), and how long each hand-back waits.
D2K_OTHER_NODE_TRIES = env_int("D2K_OTHER_NODE_TRIES", 6)
D2K_OTHER_NODE_WAIT_S = env_int("D2K_OTHER_NODE_WAIT_S", 10)
#: The sweep re-sends the message of an attempt queued longer than this that the broker does not
#: hold (portal/submissions/sweep.py): longer than a publish after commit ever takes.
D2K_REQUEUE_GRACE_S = env_int("D2K_REQUEUE_GRACE_S", 60)
#: Wall-clock limit of one task's engine process inside an evaluation.
D2K_TASK_TIMEOUT_S = env_int("D2K_TASK_TIMEOUT_S", 1800)
#: API tokens expire after this many days unless created with another lifetime.
D2K_TOKEN_DEFAULT_DAYS = env_int("D2K_TOKEN_DEFAULT_DAYS", 90)
#: Failed sign-ins allowed per client address per minute.
D2K_LOGIN_RATE_PER_MIN = env_int("D2K_LOGIN_RATE_PER_MIN", 10)
# Tokens a user may create on the team page in an hour (the API's are DRF's "tokens" throttle).
D2K_TOKEN_CREATE_PER_HOUR = env_int("D2K_TOKEN_CREATE_PER_HOUR", 20)
# Trusted proxies in front of the web processes (the TLS proxy of docs/deploy.md is one): rate
# limits count the address the outermost one saw, from the right of X-Forwarded-For.
D2K_PROXY_HOPS = env_int("D2K_PROXY_HOPS", 0)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "submissions:mine"
LOGOUT_REDIRECT_URL = "leaderboard:home"
MEDIA_ROOT = Path(os.environ.get("D2K_MEDIA_ROOT", VAR_DIR / "media"))
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

# --- REST API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.TeamTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.CreatedCursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"tokens": os.environ.get("D2K_TOKEN_THROTTLE", "30/min")},
    "NUM_PROXIES": D2K_PROXY_HOPS or None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "D2K-Bench API",
    "DESCRIPTION": "Submit kernel bundles, follow their evaluation, read results. See docs/api.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}
CELERY_TASK_TRACK_STARTED = False

# --- The LLM judge (AGENTS.md) ------------------------------------------------------------------
#: Published submissions are judged when D2K_JUDGE_MODEL is set, by workers on the ``judge`` queue.
D2K_JUDGE_PROVIDER = os.environ.get("D2K_JUDGE_PROVIDER", "anthropic")
D2K_JUDGE_MODEL = os.environ.get("D2K_JUDGE_MODEL", "")
D2K_JUDGE_BASE_URL = os.environ.get("D2K_JUDGE_BASE_URL", "")
D2K_JUDGE_API_KEY_ENV = os.environ.get("D2K_JUDGE_API_KEY_ENV", "")
D2K_JUDGE_TIMEOUT_S = float(os.environ.get("D2K_JUDGE_TIMEOUT_S", "300"))
D2K_JUDGE_MAX_RETRIES = env_int("D2K_JUDGE_MAX_RETRIES", 6)
