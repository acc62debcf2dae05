#!/usr/bin/env bash
# Nsight Compute over chosen (task, workload) pairs of the expert kernels, in one device call: the
# misses that docs/results/h200.md marks "not profiled" get their DRAM and SM throughput, waves,
# occupancy limits and issue rate from the hardware counters. Each pair runs
# scripts/profile_kernel.py (warm-up calls, then one call in the profiler window) under
#   ncu --clock-control none --profile-from-start off
# (the device library's advice: ncu reads counters on the Firecracker H200s, and must leave the
# clocks alone). Results in $OUT: profile.md (one table per pair, from scripts/ncu_summary.py),
# ncu.tar.gz (the .ncu-rep reports, CSVs and logs) and log.txt.
# Run through the device tool from the repository root, carrying .whl (as device_round.sh does):
#   bash scripts/device_profile.sh [--deadline SECONDS] [--provider expert|baseline] SLUG:WORKLOAD [...]
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
START=$(date +%s)
DEADLINE=540 PROVIDER=expert PAIRS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deadline) DEADLINE="$2"; shift 2 ;;
    --provider) PROVIDER="$2"; shift 2 ;;
    *:*) PAIRS+=("$1"); shift ;;
    *) echo "unknown argument $1 (pairs are SLUG:WORKLOAD)" >&2; exit 2 ;;
  esac
done
[ "${#PAIRS[@]}" -gt 0 ] || { echo "name at least one SLUG:WORKLOAD" >&2; exit 2; }
source scripts/device_env.sh || exit 1
# TRITON_PRINT_AUTOTUNING: the log names the config each autotuned kernel picked, so a profile
# says which of its candidates ran (the sm_90 preflight shows they differ, e.g. in spills).
export TRITON_PRINT_AUTOTUNING=1
LOG="$OUT/log.txt" R=/tmp/ncu
mkdir -p "$R"
NCU=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | tail -1)
if [ -z "$NCU" ] || [ ! -x "$NCU" ]; then echo "ncu not found" | tee -a "$LOG"; exit 1; fi
echo "ncu: $NCU ($("$NCU" --version | tail -1))" | tee -a "$LOG"
echo "# Nsight Compute profiles ($PROVIDER kernels, ${D2K_GPU:-unknown GPU}, $(date -u +%FT%TZ))" >"$OUT/profile.md"
echo >>"$OUT/profile.md"
for pair in "${PAIRS[@]}"; do
  slug=${pair%%:*} w=${pair##*:} name="${pair%%:*}-${pair##*:}"
  left=$(( DEADLINE - ($(date +%s) - START) ))
  if [ "$left" -lt 40 ]; then echo "$pair: skipped, deadline" | tee -a "$LOG"; continue; fi
  timeout $(( left < 180 ? left - 10 : 180 )) "$NCU" --clock-control none --profile-from-start off \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis \
    -f -o "$R/$name" python3 scripts/profile_kernel.py "$slug" "$w" --provider "$PROVIDER" >"$R/$name.log" 2>&1
  rc=$?
  if [ -s "$R/$name.ncu-rep" ] && "$NCU" --import "$R/$name.ncu-rep" --csv --page details >"$R/$name.csv" 2>>"$R/$name.log" \
     && python3 scripts/ncu_summary.py "$slug $w ($PROVIDER)" "$R/$name.csv" >>"$OUT/profile.md" 2>>"$R/$name.log"; then
    if grep -q "best config selected" "$R/$name.log"; then
      { echo "Autotuner picks:"; echo '```'; grep -E "^Triton autotuning for function|best config selected" "$R/$name.log"
        echo '```'; echo; } >>"$OUT/profile.md"
    fi
    if grep -q "^timed choice: " "$R/$name.log"; then
      { echo "Routes the kernel timed on its first call:"; echo '```'; grep "^timed choice: " "$R/$name.log"
        echo '```'; echo; } >>"$OUT/profile.md"
    fi
    echo "$pair: profiled (ncu exit $rc) at $(( $(date +%s) - START )) s" | tee -a "$LOG"
  else
    { echo "### $slug $w ($PROVIDER)"; echo; echo "not profiled: ncu exit $rc; last lines of its log:"; echo '```'
      tail -5 "$R/$name.log"; echo '```'; echo; } >>"$OUT/profile.md"
    echo "$pair: FAILED (ncu exit $rc) at $(( $(date +%s) - START )) s" | tee -a "$LOG"
  fi
done
tar -czf "$OUT/ncu.tar.gz" -C "$R" .
echo "profile done at $(( $(date +%s) - START )) s" | tee -a "$LOG"
