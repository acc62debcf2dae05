# Sourced by the device scripts (`source scripts/device_env.sh || exit 1`), from the repository
# root on the GPU machine: the wheels that machine lacks (carried in .whl) installed once into
# /tmp/site and put on PYTHONPATH, and bubblewrap from .bwrap (the unpacked Debian package:
# `apt-get download bubblewrap && dpkg -x bubblewrap_*.deb .bwrap`) on PATH where the machine has
# none. A later call on a warm machine finds /tmp/site and skips the install.
if [ ! -d /tmp/site/pydantic ] && compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || return 1
fi
if ! command -v bwrap >/dev/null 2>&1 && [ -x .bwrap/usr/bin/bwrap ]; then
  export PATH="$PWD/.bwrap/usr/bin:$PATH"
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
# The ceilings SOL fractions use are the card's own, never another card's: the H200's were measured
# once and are kept in docs/results/h200-ceilings.json; on any other card (the device tool may lend
# an H100 for the same call) they are measured here first (`python -m evaluator ceilings`, ~20 s),
# once per warm machine, and a copy goes back in $OUT/ceilings.json so the results can cite them.
# D2K_CEILINGS_FRESH=1 measures them on the H200 too (a node's reference run, scripts/device_bench.sh).
D2K_GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
export D2K_GPU
case "${D2K_CEILINGS_FRESH:-}:$D2K_GPU" in
  :*H200*) export D2K_CEILINGS=docs/results/h200-ceilings.json ;;
  *)
    export D2K_CEILINGS="${D2K_CEILINGS_CACHE:-/tmp/d2k-ceilings.json}"
    if [ ! -s "$D2K_CEILINGS" ]; then
      python3 -m evaluator ceilings --output "$D2K_CEILINGS" >/dev/null || return 1
    fi
    if [ -n "${OUT:-}" ]; then cp "$D2K_CEILINGS" "$OUT/ceilings.json"; fi
    ;;
esac
echo "card: ${D2K_GPU:-none}; ceilings: $D2K_CEILINGS"
