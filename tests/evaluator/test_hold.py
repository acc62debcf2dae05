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

# Launched through the sm_90 preflight's compile-only driver (scripts/preflight_sm90.py), in a
# child without TRITON_INTERPRET (the suite may run under the interpreter, where @triton.jit makes
# no compilable kernel): the worker's own call, ``hold.hold``, is what gets built, so its
# arguments are checked against the kernel's signature too. ptxas comes with the Triton wheel.
_BUILD = r"""
import dataclasses, json, re, sys, tempfile
from pathlib import Path
import torch
sys.path.insert(0, "scripts")
import preflight_sm90 as pf
from evaluator import hold
report, seen, dump = pf.WorkloadReport("hold", "-"), {}, Path(tempfile.mkdtemp())
with pf.compile_only(report, seen, dump):
    hold.hold(pf._as_fake(torch.empty(1 << 20)), 300_000, 264, hold.NUM_WARPS)
(build,) = report.builds
(ptx_file,) = dump.glob("*.ptx")
ptx = ptx_file.read_text()
print(json.dumps({**dataclasses.asdict(build), "threads": int(re.search(r"\.reqntid (\d+)", ptx).group(1)),
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
    assert build["threads"] == 1024 and build["num_warps"] == 32
    # An SM has 65,536 registers and 2,048 thread slots: two blocks fit only at 32 registers or fewer.
    assert build["registers"] <= 32, build
    assert build["spill_stores"] == 0 and build["shared"] == 0
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
