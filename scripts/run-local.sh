#!/usr/bin/env bash
# Run the site on a fresh machine: venv, dependencies, database, every task, a Celery worker on
# the embedded filesystem broker (no Redis needed) and the web server on 127.0.0.1:8000.
# Ctrl-C stops both. Environment variables (DATABASE_URL, CELERY_BROKER_URL, PORT) override the
# embedded defaults; see README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-8000}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test]'

export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-portal.settings.dev}"
# No GPU here: submissions default to the interpreter profile (correctness only) unless told otherwise.
export D2K_DEFAULT_HARDWARE="${D2K_DEFAULT_HARDWARE:-cpu-interpret}"
mkdir -p var
python manage.py migrate --noinput
python manage.py sync_tasks
python manage.py import_reference_results --default   # the committed H200 and H100 reference timings

# -B runs Celery beat in the same process: the stale-heartbeat reaper.
celery -A portal worker -B -s var/celerybeat-schedule -Q cpu.interpret,web,judge -c 1 --pool solo -l info \
  >var/worker.log 2>&1 &
WORKER_PID=$!
SERVER_PID=""
stop_all() {  # TERM both children (each handles it), then reap them
  for pid in $SERVER_PID $WORKER_PID; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $SERVER_PID $WORKER_PID; do
    wait "$pid" 2>/dev/null || true
  done
}
trap stop_all EXIT
trap 'exit 130' INT TERM
echo "Celery worker started (pid $WORKER_PID, log var/worker.log); queue reference checks with:"
echo "  python manage.py sync_tasks --verify"
echo "Create a team, a user and a moderator (once):"
echo "  python manage.py create_team Demo --owner alice --moderator mod --password <a password>"
echo "Site: http://127.0.0.1:${PORT}/tasks/ (Ctrl-C stops the site and the worker)"
# In the background and waited for, so that Ctrl-C or a TERM reaches the trap at once.
python manage.py runserver "127.0.0.1:${PORT}" --noreload &
SERVER_PID=$!
wait "$SERVER_PID"
