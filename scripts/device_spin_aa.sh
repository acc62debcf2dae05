#!/usr/bin/env bash
# The A/A check of docs/results/h200-same-kernel.md, with and without the pre-call spin, in one
# device call: each task's expert is benched as the candidate with `--compare expert` (the same
# kernel timed by two sandboxed workers, interleaved), once with spin_us=0 and once with the given
# spin, in alternating order from task to task so neither setting always runs first. Then
# scripts/same_kernel_spread.py tabulates each setting. If the spin is what short calls need, the
# spin's medians fall towards the minima and the two workers' medians agree; the engine default
# (`TimingConfig.spin_us`) should then change, and the short-call rows of h200.md be benched again.
# Run through the device tool from the repository root, carrying .whl and .bwrap:
#   bash scripts/device_spin_aa.sh [--spin-us US] [--tasks "slug slug"] [--deadline SECONDS]
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
START=$(date +%s)
SPIN=300 DEADLINE=540
TASKS="fp8-per-token-group-quant moe-unpermute-combine reshape-and-cache-paged"
while [ $# -gt 0 ]; do
  case "$1" in
    --spin-us) SPIN="$2"; shift 2 ;;
    --tasks) TASKS="$2"; shift 2 ;;
    --deadline) DEADLINE="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
source scripts/device_env.sh || exit 1
export TRITON_CACHE_DIR=/tmp/aa-triton
LOG="$OUT/aa-log.txt"
echo "tasks: $TASKS; spin: 0 and $SPIN us" | tee -a "$LOG"
i=0
for slug in $TASKS; do
  if [ $((i % 2)) -eq 0 ]; then order="0 $SPIN"; else order="$SPIN 0"; fi
  i=$((i + 1))
  for spin in $order; do
    left=$(( DEADLINE - ($(date +%s) - START) ))
    if [ "$left" -lt 60 ]; then echo "$slug spin $spin: skipped, deadline" | tee -a "$LOG"; continue; fi
    per=$(( left < 150 ? left - 10 : 140 ))
    timeout "$per" python3 -m evaluator bench references --task "$slug" --compare expert --timeout "$((per - 5))" \
      --timing spin_us="$spin" --timing wall_budget_s=5 --timing max_checks=2 --quiet \
      --json "$OUT/aa-spin$spin-$slug.json" >"$OUT/aa-spin$spin-$slug.log" 2>&1
    echo "$slug spin $spin exit $? at $(( $(date +%s) - START )) s" | tee -a "$LOG"
  done
done
for spin in 0 "$SPIN"; do
  set -- "$OUT"/aa-spin"$spin"-*.json
  if [ -e "$1" ]; then
    { echo "## spin_us = $spin"; echo; python3 scripts/same_kernel_spread.py "$@" --short-ms 0.5; echo; } >>"$OUT/aa.md"
  fi
done
echo "done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
