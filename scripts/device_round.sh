#!/usr/bin/env bash
# One GPU round over the tasks in the tree, resumable over several device calls:
#   1. correctness of every expert on every real workload (`check`, several tasks at once; the
#      expert runs as the candidate, in the sandbox) and, in the same parallel pool,
#      torch.compile caches warmed for every workload (scripts/warm_compile.py);
#   2. the timed bench (`bench --compare compile,expert`), one task after another, each task's
#      result in its own JSON, while the deadline allows.
# State lives in .devround/ (git-ignored; kept on the device machine while it stays warm): a task
# whose check or bench result is already there is not run again, and Triton's and Inductor's
# caches are there too, so a second call made while the machine is warm picks up where the
# first stopped. Every call packs the whole state's results into $OUT/round.tar.gz and logs to
# $OUT/log.txt.
# Run through the device tool from the repository root, carrying .whl (the wheels the device
# lacks) and .bwrap (bubblewrap, unpacked from its Debian package):
#   bash scripts/device_round.sh [--tasks "slug slug"] [--compare compile,expert] [--deadline SECONDS]
#                                [--no-bench] [--bench-only] [--no-check] [--timing KEY=NUMBER ...] [--fresh]
#                                [--task-cap SECONDS]  (most a single task's bench may take; default 270)
# A task the deadline leaves less than its finished benches needed is deferred to the next call
# (scripts/round_need.py); one cut part-way anyway is set aside and benched again next call.
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
START=$(date +%s)
TASKS="" COMPARE="compile,expert" DEADLINE=540 BENCH=1 CHECK=1 WARM=1 JOBS=8 TIMING=() CAP=270
while [ $# -gt 0 ]; do
  case "$1" in
    --tasks) TASKS="$2"; shift 2 ;;
    --compare) COMPARE="$2"; shift 2 ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --bench-only) CHECK=0; WARM=0; shift ;;  # skip phase 1: bench runs its own correctness trials
    --no-check) CHECK=0; shift ;;  # phase 1 only warms torch.compile's caches (bench checks anyway)
    --timing) TIMING+=(--timing "$2"); shift 2 ;;
    --fresh) rm -rf .devround; shift ;;
    --task-cap) CAP="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
source scripts/device_env.sh || exit 1
W="$PWD/.devround"
mkdir -p "$W/triton" "$W/inductor"
export TRITON_CACHE_DIR="$W/triton" TORCHINDUCTOR_CACHE_DIR="$W/inductor" W
LOG="$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$W/nvidia-smi.txt"
echo "bwrap: $(command -v bwrap || echo missing)" | tee -a "$LOG"
if [ -z "$TASKS" ]; then
  TASKS=$(python3 -c "from tasks.registry import load_tasks; print(' '.join(t.slug for t in load_tasks().tasks))")
fi
echo "tasks: $TASKS" | tee -a "$LOG"
echo "timing overrides: ${TIMING[*]:-none}" | tee -a "$LOG"

left() { echo $(( DEADLINE - ($(date +%s) - START) )); }
finish() {
  tar -czf "$OUT/round.tar.gz" -C "$W" --exclude=./triton --exclude=./inductor .
  echo "round done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
}

# 1. checks and compile warm-up, in parallel (nothing here is timed)
if [ "$CHECK" = 1 ] || [ "$WARM" = 1 ]; then
  for slug in $TASKS; do
    if [ "$CHECK" = 1 ] && [ ! -s "$W/check-$slug.json" ]; then echo "check $slug"; fi
    if [ "$WARM" = 1 ] && [[ "$COMPARE" == *compile* ]] && [ "$BENCH" = 1 ] && [ ! -e "$W/warm-$slug.done" ]; then
      echo "warm $slug"
    fi
  done | xargs -P "$JOBS" -L 1 bash -c '
    case "$0" in
      check) timeout 300 python3 -m evaluator check references --task "$1" --timeout 290 --quiet \
               --json "$W/check-$1.json" >"$W/check-$1.log" 2>&1; echo "check $1 exit $?" ;;
      warm) timeout 200 python3 scripts/warm_compile.py "$1" >"$W/warm-$1.log" 2>&1 && touch "$W/warm-$1.done"
            echo "warm $1 exit $?" ;;
    esac' 2>&1 | tee -a "$LOG"
  echo "phase 1 done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
fi

# 2. timed bench, one task at a time, while time is left
if [ "$BENCH" = 1 ]; then
  for slug in $TASKS; do
    if [ -s "$W/bench-$slug.json" ] || [ -e "$W/bench-$slug.capped" ]; then continue; fi
    budget=$(left)
    if [ "$budget" -lt 45 ]; then echo "bench $slug: skipped, deadline" | tee -a "$LOG"; continue; fi
    per=$(( budget < CAP + 10 ? budget - 10 : CAP ))
    # A limit the deadline shortened below what the task took before would only cut it: leave
    # it to the next call and try the tasks after it (scripts/round_need.py).
    if [ "$per" -lt "$CAP" ]; then
      need=$(python3 scripts/round_need.py "$slug" 2>/dev/null || echo 0)
      if [ "${need:-0}" -gt "$per" ]; then
        echo "bench $slug: deferred to the next call (needs about $need s, $per s left)" | tee -a "$LOG"; continue
      fi
    fi
    timeout "$per" python3 -m evaluator bench references --task "$slug" --compare "$COMPARE" --timeout "$((per - 5))" \
      "${TIMING[@]}" --quiet --trace --json "$W/bench-$slug.json.part" --markdown "$W/bench-$slug.md" \
      >"$W/bench-$slug.log" 2>&1
    rc=$?
    # Only a finished result counts as done.
    # A timeout under a per-task limit that the deadline shortened is the deadline's doing, not the
    # task's, whichever provider it stopped (scripts/round_cut.py): that result is kept aside
    # (bench-<slug>.cut.json) and the task benched again next call.
    if [ "$rc" -le 1 ] && [ -s "$W/bench-$slug.json.part" ]; then
      if [ "$per" -lt "$CAP" ] && python3 scripts/round_cut.py "$W/bench-$slug.json.part"; then
        mv "$W/bench-$slug.json.part" "$W/bench-$slug.cut.json"; echo "bench $slug: cut by the deadline" | tee -a "$LOG"
      else
        mv "$W/bench-$slug.json.part" "$W/bench-$slug.json"
      fi
    fi
    # A task that ran out its whole per-task cap would do so again: not retried.
    if [ "$rc" -eq 124 ] && [ "$per" -eq "$CAP" ]; then touch "$W/bench-$slug.capped"; fi
    echo "bench $slug exit $rc at $(( $(date +%s) - START )) s" | tee -a "$LOG"
  done
fi
finish
