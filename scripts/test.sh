#!/usr/bin/env bash
# The whole test suite as CI runs it: dependencies, Chromium, PostgreSQL and Redis (started if
# not running), ruff, then pytest over tests/. Exits with pytest's status; "no tests collected"
# (pytest's 5) is a failure. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test]'

apt_updated=0
need_apt() {  # need_apt BINARY PACKAGE...: install the packages when BINARY is missing
  local binary=$1; shift
  if ! command -v "$binary" >/dev/null 2>&1 && [ ! -x "$binary" ]; then
    if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
  fi
}
need_apt /usr/bin/chromium chromium
need_apt pg_ctlcluster postgresql
need_apt redis-server redis-server
need_apt bwrap bubblewrap  # the engine's sandbox (tests/evaluator/test_sandbox.py)
need_apt /usr/bin/file file  # platform.architecture()'s probe, run for real in tests/evaluator/test_procwatch.py

# PostgreSQL, trust auth on 127.0.0.1 as the Debian package sets it up for local tests.
PG_VERSION="$(ls /etc/postgresql | sort -V | tail -1)"
if ! pg_lsclusters -h | awk '$2 == "main" && $4 == "online"' | grep -q .; then
  pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start
fi
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 1
done
pg_isready -h 127.0.0.1 -p 5432

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
    sleep 0.5
  done
fi
redis-cli -h 127.0.0.1 -p 6379 ping

export DATABASE_URL="${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/d2k}"
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-redis://127.0.0.1:6379/15}"
export DJANGO_SETTINGS_MODULE=portal.settings.test
export D2K_TEST_SANDBOX=require  # bubblewrap was installed above: its tests must run, not skip

ruff check .

status=0
# The engine and task tests (interpreter-bound) run in parallel workers, one per core up to four;
# every test that uses a shared service runs in one of them (tests/conftest.py, xdist groups).
workers="$(nproc)"
if [ "$workers" -gt 4 ]; then workers=4; fi
python -m pytest -n "$workers" --dist loadgroup "${@:-tests}" || status=$?
if [ "$status" = 5 ]; then
  echo "scripts/test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
