#!/usr/bin/env bash
# One device call: the cheat corpus, every task's expert kernel and the cost of the protections,
# on the GPU (scripts/anticheat_device.py says what each part does). Results land in $OUT:
# anti-cheat-<part>.md (together they make docs/results/anti-cheat.md) and anti-cheat-<part>.json.
# Three calls, each within the 10-minute limit: --part cheats (the corpus and the overhead),
# --part experts-check, --part experts-bench (add --tasks a,b,c to split it if it runs long;
# the files are rewritten after every task, so a call cut off still returns what it finished).
# Run through the device tool from the repository root, carrying the wheels in .whl (as for
# scripts/device_bench.sh) and, where the device image has no bubblewrap, the unpacked Debian
# package in .bwrap (here: `apt-get download bubblewrap && dpkg -x bubblewrap_*.deb .bwrap`):
#   bash scripts/device_anticheat.sh --part cheats|experts-check|experts-bench [--jobs N] [--tasks ...]
set -uo pipefail
: "${OUT:?run this on the device machine, where OUT is set}"
source scripts/device_env.sh || exit 1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
  echo "bwrap: $(command -v bwrap || echo missing) $(bwrap --version 2>&1 | head -1)"
  bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent -- /bin/true \
    && echo "bwrap: namespaces work" || echo "bwrap: namespaces FAIL"
} 2>&1 | tee "$OUT/env.txt"
# A first sandboxed GPU check of one expert; if it fails with every namespace, keep the user
# namespace (the engine's escape hatch D2K_SANDBOX_UNSHARE) and say so.
if ! python3 -m evaluator check references/silu-and-mul/expert.py --task silu-and-mul --workload W3 --quiet \
     --json "$OUT/smoke.json" >"$OUT/smoke.txt" 2>&1; then
  echo "sandboxed GPU check failed with every namespace; retrying without the user namespace" | tee -a "$OUT/env.txt"
  export D2K_SANDBOX_UNSHARE=ipc,pid,net,uts,cgroup
  python3 -m evaluator check references/silu-and-mul/expert.py --task silu-and-mul --workload W3 --quiet \
    --json "$OUT/smoke.json" >>"$OUT/smoke.txt" 2>&1 || echo "still failing: see smoke.txt" | tee -a "$OUT/env.txt"
fi
python3 scripts/anticheat_device.py --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"
status=${PIPESTATUS[0]}
echo "anticheat exit: $status"
exit "$status"
