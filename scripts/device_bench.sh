#!/usr/bin/env bash
# One device call: measure the GPU's ceilings, then bench every task's expert kernel against the
# eager baseline, torch.compile of the baseline and the expert again (the second timing of the
# same kernel in the same run is the engine's run-to-run spread). Results land in $OUT.
# Run through the device tool from the repository root, carrying the wheels in .whl:
#   bash scripts/device_bench.sh [extra bench args...]
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
# Ceilings measured in this run on any card (device_env.sh copies them to $OUT/ceilings.json).
D2K_CEILINGS_FRESH=1 source scripts/device_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$OUT/nvidia-smi.txt"
cat "$D2K_CEILINGS" | tee "$OUT/log.txt"
python3 -m evaluator bench references --compare compile,expert \
  --timeout 280 --json "$OUT/bench.json" --markdown "$OUT/bench.md" --quiet "$@" 2>&1 | tee -a "$OUT/log.txt"
echo "bench exit: ${PIPESTATUS[0]}"
