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
