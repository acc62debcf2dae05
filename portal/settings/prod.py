"""Production: refuses the default secret key, DEBUG off, secure cookies and HSTS."""

import os

from django.core.exceptions import ImproperlyConfigured

from portal.settings.base import *  # noqa: F403
from portal.settings.base import CACHE_URL, INSECURE_SECRET_KEY, SECRET_KEY, cache_settings, env_bool, env_int

if not SECRET_KEY or SECRET_KEY == INSECURE_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set to a private value in production")

# Debug pages show tracebacks, settings and SQL to anyone: never in production.
if env_bool("DEBUG", False):
    raise ImproperlyConfigured("DEBUG must be off in production (portal.settings.prod); use portal.settings.dev")
DEBUG = False
# One cache for every web process (boards, the sign-in rate limit): CACHE_URL, or the broker's
# Redis when the broker is Redis.
if not CACHE_URL and CELERY_BROKER_URL.startswith(("redis://", "rediss://")):  # noqa: F405
    CACHES = cache_settings(CELERY_BROKER_URL)  # noqa: F405
# Kernels are never judged outside bubblewrap in production: the engine (a subprocess that
# inherits this environment) refuses to run when the sandbox does not work (evaluator/sandbox.py).
D2K_SANDBOX = os.environ.setdefault("D2K_SANDBOX", "require")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = False

# One JSON object per log line unless LOG_FORMAT says otherwise.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "json")
LOGGING["handlers"]["console"]["formatter"] = LOG_FORMAT  # noqa: F405

# HSTS preloading commits the whole domain (subdomains included) to HTTPS in browsers' built-in
# lists, which cannot be undone quickly: an operator's decision (SECURE_HSTS_PRELOAD), not a default.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
