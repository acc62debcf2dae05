#!/usr/bin/env bash
# One GPU round over the tasks in the tree, within one device call:
#   1. correctness of every expert on every real workload (`check`, several tasks at once),
#      and, in the same parallel pool, torch.compile caches warmed for every workload;
#   2. the timed bench (`bench --compare compile,expert`), one task after another, each task's
#      result in its own JSON so a run cut short still returns what it finished.
# Everything lands in $OUT/round.tar.gz (per-task JSON, Markdown and logs) and $OUT/log.txt.
# Run through the device tool from the repository root, carrying the wheels in .whl:
#   bash scripts/device_round.sh [--tasks "slug slug"] [--compare compile,expert] [--deadline SECONDS] [--no-bench]
#                                [--bench-only]
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
START=$(date +%s)
TASKS="" COMPARE="compile,expert" DEADLINE=540 BENCH=1 CHECK=1 JOBS=6
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) TASKS="$2"; shift 2 ;;
    --compare) COMPARE="$2"; shift 2 ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --bench-only) CHECK=0; shift ;;  # skip phase 1: bench runs its own correctness trials
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 D2K_CEILINGS=docs/results/h200-ceilings.json
W=$(mktemp -d)
LOG="$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$W/nvidia-smi.txt"
if [ -z "$TASKS" ]; then
  TASKS=$(python3 -c "from tasks.registry import load_tasks; print(' '.join(t.slug for t in load_tasks().tasks))")
fi
echo "tasks: $TASKS" | tee -a "$LOG"

left() { echo $(( DEADLINE - ($(date +%s) - START) )); }

# 1. checks and compile warm-up, in parallel
export W
[ "$CHECK" = 1 ] && for slug in $TASKS; do
  echo "check $slug"
  if [[ "$COMPARE" == *compile* ]] && [ "$BENCH" = 1 ]; then echo "warm $slug"; fi
done | xargs -P "$JOBS" -L 1 bash -c '
  case "$0" in
    check) timeout 240 python3 -m evaluator check references --task "$1" --timeout 230 --quiet \
             --json "$W/check-$1.json" >"$W/check-$1.log" 2>&1; echo "check $1 exit $?" ;;
    warm) timeout 240 python3 scripts/warm_compile.py "$1" >"$W/warm-$1.log" 2>&1; echo "warm $1 exit $?" ;;
  esac' 2>&1 | tee -a "$LOG"
echo "phase 1 done at $(( $(date +%s) - START )) s" | tee -a "$LOG"

# 2. timed bench, one task at a time, while time is left
if [ "$BENCH" = 1 ]; then
  for slug in $TASKS; do
    budget=$(left)
    if [ "$budget" -lt 40 ]; then echo "bench $slug: skipped, deadline" | tee -a "$LOG"; continue; fi
    per=$(( budget < 280 ? budget - 10 : 270 ))
    timeout "$per" python3 -m evaluator bench references --task "$slug" --compare "$COMPARE" --timeout "$((per - 5))" \
      --quiet --json "$W/bench-$slug.json" --markdown "$W/bench-$slug.md" >"$W/bench-$slug.log" 2>&1
    echo "bench $slug exit $? at $(( $(date +%s) - START )) s" | tee -a "$LOG"
  done
fi
tar -czf "$OUT/round.tar.gz" -C "$W" .
echo "round done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
