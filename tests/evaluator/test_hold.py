"""The pre-call spin that holds every SM and writes the L2 flush (evaluator/hold.py), checked
without a GPU: its sm_90 build must fit two 1,024-thread blocks on each SM (all 2,048 thread
slots, so no side stream's block can be resident while it runs), load nothing, and the grid must
cover every SM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]

# Compiled in a child without TRITON_INTERPRET (the suite may run under the interpreter, where
# @triton.jit makes no compilable kernel); ptxas comes with the Triton wheel.
_BUILD = r"""
import json, re, subprocess, sys, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
from evaluator.hold import NUM_WARPS, _hold_kernel
sig = {"flush_ptr": "*fp32", "n_flush": "i64", "ns": "i64", "STEP": "constexpr"}
k = triton.compile(ASTSource(fn=_hold_kernel, signature=sig, constexprs={"STEP": NUM_WARPS * 32 * 4}),
                   target=GPUTarget("cuda", 90, 32), options={"num_warps": NUM_WARPS})
ptx = k.asm["ptx"]
with tempfile.TemporaryDirectory() as d:
    (Path(d) / "k.ptx").write_text(ptx)
    log = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", str(Path(d) / "k.ptx"),
                          "-o", str(Path(d) / "k.cubin")], capture_output=True, text=True, check=True).stderr
print(json.dumps({"registers": int(re.search(r"Used (\d+) registers", log).group(1)),
                  "shared": k.metadata.shared, "threads": int(re.search(r"\.reqntid (\d+)", ptx).group(1)),
                  "timer_reads": ptx.count("%globaltimer"), "loads": len(re.findall(r"\bld\.global", ptx)),
                  "stores": len(re.findall(r"\bst\.global", ptx))}))
"""


def test_the_hold_kernel_fills_every_thread_slot_of_an_sm90_sm() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run([sys.executable, "-c", _BUILD], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    build = json.loads(done.stdout.strip().splitlines()[-1])
    assert build["threads"] == 1024
    # An SM has 65,536 registers and 2,048 thread slots: two blocks fit only at 32 registers or fewer.
    assert build["registers"] <= 32, build
    assert build["shared"] == 0
    assert build["timer_reads"] >= 2  # the start, and the loop's
    assert build["stores"] > 0  # the flush
    assert build["loads"] == 0  # nothing brought back into the L2 it empties


def test_the_grid_fills_every_thread_slot_of_every_sm(monkeypatch) -> None:
    from evaluator import hold

    def card(sms: int, slots: int) -> None:
        props = SimpleNamespace(multi_processor_count=sms, max_threads_per_multi_processor=slots)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)

    card(132, 2048)  # H100, H200
    assert hold.layout_for(torch.device("cuda", 0)) == (264, 32)
    card(84, 1536)  # a card with 1,536 slots an SM: blocks of 512 threads, three to an SM
    assert hold.layout_for(torch.device("cuda", 0)) == (252, 16)
