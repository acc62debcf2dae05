"""Run a few lines against one task's expert module in Triton's CPU interpreter, in a child process.

For tests of an expert's internals at sizes its smoke workloads do not reach. The interpreter
must be switched on before Triton defines the kernels, hence a fresh process per check; the
script sees the expert module as ``mod``, the task's baseline module as ``base`` and its arguments
in ``sys.argv[1:]``, and passes by printing ``ok``.
"""

from __future__ import annotations

import subprocess
import sys

from tasks.registry import REPO_ROOT

PREAMBLE = '''
import importlib.util, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton
spec = importlib.util.spec_from_file_location("expert", "references/{slug}/expert.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
spec_b = importlib.util.spec_from_file_location("baseline", "tasks/{slug}/baseline.py")
base = importlib.util.module_from_spec(spec_b)
spec_b.loader.exec_module(base)
'''


def run_against_expert(slug: str, body: str, *args: object) -> None:
    """Runs ``body`` after loading the expert of ``slug``; fails with the child's stderr unless it prints ok."""
    proc = subprocess.run([sys.executable, "-c", PREAMBLE.format(slug=slug) + body, *map(str, args)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
