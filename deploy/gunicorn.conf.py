"""gunicorn settings for the web process (``gunicorn -c deploy/gunicorn.conf.py portal.wsgi``).

Sync workers: the pages are short database reads; uploads stream to disk and are validated in
the request, so a worker is busy for at most the upload's duration (capped by ``timeout``).
Everything can be overridden by environment variables of the same name (``WEB_CONCURRENCY``...).
"""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))  # an upload of the 32 MiB limit on a slow link
graceful_timeout = 30
keepalive = 5
max_requests = 2000  # recycle workers now and then: bounded memory growth
max_requests_jitter = 200
preload_app = True  # import Django once; workers fork from a warm parent
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
errorlog = "-"
# One JSON object per request, like the application's logs.
access_log_format = ('{"time": "%(t)s", "logger": "gunicorn.access", "remote": "%(h)s", "method": "%(m)s", '
                     '"path": "%(U)s", "query": "%(q)s", "status": %(s)s, "bytes": "%(B)s", "ms": %(M)s, '
                     '"agent": "%(a)s"}')
