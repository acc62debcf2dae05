#!/usr/bin/env bash
# End to end on the GPU (issue 10): the site on its embedded defaults (portal.settings.dev, SQLite
# and the filesystem Celery broker in a fresh temporary folder, as scripts/run-local.sh runs it)
# with a GPU worker, driven over HTTP as its users drive it (scripts/e2e_submit.py): a team member
# signs in and creates an API token (POST /api/v1/tokens/), uploads the expert bundle of one task
# for the h200 profile (POST /api/v1/submissions/), the worker times it on the GPU, a moderator
# approves it (POST /api/v1/submissions/<id>/decisions/), and GET /api/v1/leaderboard/ shows it.
#
# On the GPU machine, through the device tool from the repository root, carrying .whl-e2e and .bwrap
# (bubblewrap, unpacked from its Debian package); the worker is ops.gpu_workers on GPU 0:
#   bash scripts/device_e2e.sh
# .whl-e2e (git-ignored through .git/info/exclude) holds the cp312 wheels of every package the GPU
# image's python3 lacks, at the versions of the local .venv, one version each; it is installed with
# pip --no-index --no-deps --target /tmp/site-e2e and put on PYTHONPATH. To fill it again:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl-e2e Django==5.2.19 ...   (the list is the folder's content)
# Here, with no GPU: the same flow on the cpu-interpret profile (Triton's interpreter, correctness
# only: no timings), the worker being the Procfile's worker-cpu line:
#   OUT=/tmp/e2e-out bash scripts/device_e2e.sh --local
# To prove the wheel list complete, run it with a bare venv holding only what the GPU image has
# (torch, triton, numpy, scipy, rich, ...) and the same wheels built for that python:
#   E2E_PYTHON=/tmp/bare/bin/python E2E_WHEELS=/tmp/wheels-cp311 E2E_SITE=/tmp/site-bare \
#     OUT=/tmp/e2e-bare bash scripts/device_e2e.sh --local
# Options: --task SLUG (default silu-and-mul), --keep (leave the work folder), --deadline S (300: the
# whole run; the client gets what is left). Writes to $OUT: e2e-log.txt (every step, HTTP request and
# state change, timestamped), e2e-submission.json, e2e-leaderboard.json, e2e-bundle.zip, worker.log,
# web.log, setup.log and nvidia-smi.txt (GPU). Exit status 0 when the whole flow passed; otherwise the
# log's FAILED line says which step failed and why.
set -uo pipefail
: "${OUT:?set OUT to the folder for the log and results}"
cd "$(dirname "$0")/.."
START=$(date +%s)
MODE=gpu TASK=silu-and-mul KEEP=0 DEADLINE=300
while [ $# -gt 0 ]; do
  case "$1" in
    --local) MODE=local; shift ;;
    --task) TASK="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
LOG="$OUT/e2e-log.txt"
: >"$LOG"
log() { echo "$(date +%H:%M:%S) +$(( $(date +%s) - START ))s  $*" | tee -a "$LOG"; }
die() { log "FAILED: $*"; exit 1; }
left() { echo $(( DEADLINE - ($(date +%s) - START) )); }

# --- The one difference between the two modes: the interpreter, the profile and the worker. ---
if [ "$MODE" = gpu ]; then
  PY="${E2E_PYTHON:-python3}" PROFILE=h200 QUEUE=gpu.h200 TIMED=--timed WHEELS="${E2E_WHEELS-.whl-e2e}"
  # ops.gpu_workers is the production `gpu` process (deploy/Procfile): it reads the GPU's name from
  # nvidia-smi, maps it to its profile's queue (refusing a GPU of no profile) and starts one pinned
  # `celery worker -Q gpu.h200 --concurrency 1 --prefetch-multiplier 1 -n gpu0@<host>`.
  WORKER=("$PY" -m ops.gpu_workers --gpus 0 -- --loglevel INFO)
else
  PY="${E2E_PYTHON:-.venv/bin/python}" PROFILE=cpu-interpret QUEUE=cpu.interpret TIMED="" WHEELS="${E2E_WHEELS-}"
  # The Procfile's worker-cpu line.
  WORKER=("$PY" -m celery -A portal worker -Q cpu.interpret -n cpu@%h --concurrency 1 --prefetch-multiplier 1
          --loglevel INFO)
fi
: >"$OUT/setup.log"
if [ -n "$WHEELS" ]; then  # the packages the interpreter lacks, from wheels: nothing is fetched
  SITE="${E2E_SITE:-/tmp/site-e2e}"
  ls "$WHEELS"/*.whl >/dev/null 2>&1 || die "no wheels in $WHEELS/ (carry .whl-e2e)"
  stamp=$(cd "$WHEELS" && ls -l -- *.whl | md5sum | cut -c1-32)
  if [ "$(cat "$SITE/.e2e-stamp" 2>/dev/null)" != "$stamp" ]; then  # a warm machine keeps the last install
    rm -rf "$SITE"
    timeout 180 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      "$WHEELS"/*.whl >>"$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; die "installing the wheels of $WHEELS"; }
    echo "$stamp" >"$SITE/.e2e-stamp"
  fi
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  log "$(ls "$WHEELS"/*.whl | wc -l) wheels of $WHEELS installed in $SITE (on PYTHONPATH)"
fi
if ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/usr/bin/bwrap ]; then
  export PATH="$PWD/.bwrap/usr/bin:$PATH"
fi
if [ "$MODE" = gpu ]; then
  timeout 60 nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/nvidia-smi.txt" 2>&1 || die "nvidia-smi: $(cat "$OUT/nvidia-smi.txt")"
  log "GPU: $(sed -n 2p "$OUT/nvidia-smi.txt")"
fi
[ -x "$(command -v "$PY")" ] || die "no python at $PY"
log "versions: $(timeout 120 "$PY" -c 'import sys, django, celery, kombu, rest_framework, pydantic, plotly, torch, triton
print(f"python {sys.version.split()[0]}, django {django.__version__}, celery {celery.__version__}, kombu {kombu.__version__}, "
      f"drf {rest_framework.__version__}, pydantic {pydantic.VERSION}, plotly {plotly.__version__}, torch {torch.__version__}, "
      f"triton {triton.__version__}, cuda available {torch.cuda.is_available()}")' 2>&1 | tail -n 3)"

# --- The site on its embedded defaults, in a fresh folder. ---
W=$(mktemp -d /tmp/d2k-e2e.XXXXXX)
unset DATABASE_URL CELERY_BROKER_URL D2K_BROKER_DIR D2K_MEDIA_ROOT DJANGO_SETTINGS_MODULE
export D2K_VAR_DIR="$W/var" DJANGO_SETTINGS_MODULE=portal.settings.dev D2K_DEFAULT_HARDWARE="$PROFILE"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 E2E_START="$START"
# The engine's own limit on the task, inside the deadline: the engine, not our cleanup, stops a run
# that is too slow (it kills its judge's whole session and records a timeout the log then shows).
export D2K_TASK_TIMEOUT_S="${D2K_TASK_TIMEOUT_S:-$(( DEADLINE - 75 ))}"
PASSWORD="e2e-$(date +%s)-$RANDOM-pw"
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
log "mode $MODE: python $("$PY" -c 'import sys; print(sys.version.split()[0])') ($PY), profile $PROFILE, queue $QUEUE, task $TASK"
log "site: $URL, settings $DJANGO_SETTINGS_MODULE, var $D2K_VAR_DIR (SQLite db.sqlite3, broker filesystem:// under broker/), D2K_TASK_TIMEOUT_S=$D2K_TASK_TIMEOUT_S"
log "bwrap: $(command -v bwrap || echo 'missing (the engine warns and runs unsandboxed)')"

# The worker and the web server each run in their own process group (setsid). Each leader gets a
# TERM (Celery's warm shutdown, which stops its pool; the supervisor passes it on), then whatever
# is left of its group a KILL after 15 s.
WORKER_PID="" SERVER_PID=""
cleanup() {
  local pid
  for pid in $SERVER_PID $WORKER_PID; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $SERVER_PID $WORKER_PID; do
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$pid" "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  [ "$KEEP" = 1 ] && echo "work folder kept: $W" || rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() {  # step NAME TIMEOUT COMMAND...: run it with a timeout, its output appended to setup.log
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "### $name: $*" >>"$OUT/setup.log"
  timeout "$limit" "$@" >>"$OUT/setup.log" 2>&1
  rc=$?
  log "$name: exit $rc in $(( $(date +%s) - t0 )) s"
  [ "$rc" = 0 ] || { tail -n 30 "$OUT/setup.log" | tee -a "$LOG"; die "$name"; }
}
step "manage.py migrate" 120 "$PY" manage.py migrate --noinput
step "manage.py sync_tasks" 120 "$PY" manage.py sync_tasks
step "manage.py import_reference_results --default" 120 "$PY" manage.py import_reference_results --default
step "manage.py create_team" 60 "$PY" manage.py create_team E2E --owner alice --moderator mod --password "$PASSWORD"
sed -n '/^### manage.py create_team/,$p' "$OUT/setup.log" | tail -n +2 | sed 's/^/    /' | tee -a "$LOG"

setsid "${WORKER[@]}" >"$OUT/worker.log" 2>&1 &
WORKER_PID=$!
log "worker: pid $WORKER_PID: ${WORKER[*]}"
setsid "$PY" manage.py runserver "127.0.0.1:$PORT" --noreload >"$OUT/web.log" 2>&1 &
SERVER_PID=$!
log "web: pid $SERVER_PID: manage.py runserver 127.0.0.1:$PORT --noreload"

# The worker is ready when Celery says so (an upload made before would wait in the queue anyway).
for _ in $(seq 1 120); do
  grep -q " ready\.$" "$OUT/worker.log" && break
  kill -0 "$WORKER_PID" 2>/dev/null || { tail -n 40 "$OUT/worker.log" | tee -a "$LOG"; die "the worker exited"; }
  sleep 1
done
grep -q " ready\.$" "$OUT/worker.log" || { tail -n 40 "$OUT/worker.log" | tee -a "$LOG"; die "the worker is not ready after 120 s"; }
log "worker ready: $(grep -m1 " ready\.$" "$OUT/worker.log" | head -c 300)"
grep -E "^gpu_workers:|^ *\.> (gpu|cpu)\." "$OUT/worker.log" | sed 's/^ */    /' | tee -a "$LOG"

# The client half, with what is left of the deadline (the evaluation gets all but 30 s of it).
budget=$(left)
[ "$budget" -gt 60 ] || die "only $budget s left of the ${DEADLINE} s deadline before submitting"
timeout "$(( budget - 5 ))" "$PY" scripts/e2e_submit.py --url "$URL" --out "$OUT" --profile "$PROFILE" $TIMED \
  --task "$TASK" --password "$PASSWORD" --eval-timeout "$(( budget - 30 ))"
rc=$?
[ "$rc" = 124 ] && log "FAILED: the client ran past the deadline"
if [ "$rc" != 0 ]; then
  log "the last lines of worker.log:"
  tail -n 40 "$OUT/worker.log" | sed 's/^/    /' | tee -a "$LOG"
fi
kill -0 "$WORKER_PID" 2>/dev/null || log "note: the worker had exited"
kill -0 "$SERVER_PID" 2>/dev/null || log "note: the web server had exited"
log "done: exit $rc after $(( $(date +%s) - START )) s"
exit "$rc"
