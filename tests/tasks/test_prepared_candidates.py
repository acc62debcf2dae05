"""Prepared candidates: expert changes that wait for device time, kept as patches.

A session without a GPU can still write and check a kernel change on the CPU; it cannot land it,
because only a timed same-run A/B on the device says whether the change is faster, and for a
GPU-only path (one the interpreter cannot run) whether it is correct at all. Such a change is
stored as a patch under ``docs/results/h100-runs/`` with the commands that time it (h200.md's
plan). So that a waiting patch does not rot while the tree moves on, CI checks here that each one
still applies to the tree and that the tests it brings, and the planted-bug edits (which anchor on
the experts' text), pass with it applied. A session that times a candidate lands it or not, and
takes it off ``WAITING`` and records what became of it in ``DECIDED``; every patch of that kind
under ``docs/results/h100-runs/`` is in exactly one of the two, so none is forgotten.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.registry import REPO_ROOT

RESULTS = REPO_ROOT / "docs/results/h100-runs"
#: Patches waiting for their device A/B.
WAITING: list[str] = []
#: Patches whose A/B ran: what became of each, and where the measurement is.
DECIDED = {
    "s23-candidate-wu-loop.patch": "not landed: no gain in session 24's A/B (s24-ab-gated-delta-wu-loop.md)",
    "s24-candidate-wu-shape.patch": "landed: 1.01-1.03x in session 25's A/B (s25-ab-gated-delta-wu-shape.md)",
    "s24-candidate-mamba2-bt32.patch": "not landed: the autotuner kept 64 rows (s25-ab-mamba2-bt32.md)",
    "s26-candidate-w4a16-regdq.patch": "landed: 1.16x/1.09x at W1/W2 in session 29's A/B (s29-ab-w4a16-regdq-all.md)",
    "s27-candidate-topk-shrinking-search.patch": "landed: 1.01x/1.08x/1.00x in session 28's A/B "
                                                  "(s28-ab-topk-shrinking-v2.md)",
    "s30-candidate-w4a16-ws-gemm.patch": "landed: 1.10x at W4, W3 unchanged, in session 31's A/B "
                                         "(s31-ab-w4a16-ws-gemm.md)",
    "s31-candidate-w4a16-persistent-tiles.patch": "landed: 1.04x at W4, W3 unchanged, in session 31's A/B "
                                                  "(s31-ab-w4a16-persistent-tiles.md)",
    "s31-candidate-flce-gemm-tiles.patch": "landed: 1.00x/1.03x/1.02x in session 31's A/B (s31-ab-flce-gemm-tiles.md)",
    "s31-candidate-flce-ws-gemm.patch": "landed: 1.03x/1.03x/1.00x in session 31's A/B (s31-ab-flce-ws-gemm.md)",
    "s32-candidate-flce-chunk.patch": "landed: 1.07x/1.07x/1.16x in session 32's A/B (s32-ab-flce-chunk.md)",
    "s32-candidate-flce-persistent.patch": "not landed: 1.00x/1.01x/0.99x against the chunk change in session 32's "
                                           "A/B (s32-ab-flce-persistent.md)",
    "s33-candidate-silu-unhinted.patch": "landed: 1.02x/1.02x/1.01x, and 1.00x of torch.compile at W1-W3, in "
                                         "session 34's A/B (s34-ab-silu-unhinted.md)",
}
#: What a copy of the tree needs to run a candidate's tests.
TREE = ["evaluator", "tasks", "references", "guidance", "scripts", "tests", "pyproject.toml"]


def _added_tests(patch: Path) -> list[str]:
    return [p for p in re.findall(r"^\+\+\+ b/(\S+)$", patch.read_text(), re.M)
            if p.startswith("tests/") and p.endswith(".py")]


def test_every_prepared_patch_is_waiting_or_decided() -> None:
    patches = {p.name for p in RESULTS.glob("*-candidate-*.patch")}
    listed = set(WAITING) | set(DECIDED)
    assert not set(WAITING) & set(DECIDED), "a patch is both waiting and decided"
    assert patches == listed, (f"not listed: {sorted(patches - listed)}; listed but missing: {sorted(listed - patches)}")
    for name, outcome in DECIDED.items():
        assert outcome.startswith(("landed", "not landed")), name
        source = re.search(r"\((\S+\.md)\)$", outcome)
        assert source and (RESULTS / source[1]).is_file(), f"{name}: its A/B record {outcome!r} is not in {RESULTS}"


# With nothing waiting, the two checks below have no case: they are left out rather than collected
# as an empty parameter set, which pytest reports as skipped.
if WAITING:
    @pytest.mark.parametrize("name", WAITING)
    def test_a_waiting_candidate_still_applies_to_the_tree(name: str) -> None:
        patch = RESULTS / name
        assert patch.is_file(), f"{name} is listed as waiting but is not in {RESULTS}"
        proc = subprocess.run(["git", "apply", "--check", str(patch)], cwd=REPO_ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, f"{name} no longer applies; rebase it on the tree: {proc.stderr}"


    @pytest.mark.parametrize("name", WAITING)
    def test_a_waiting_candidates_own_tests_pass_with_it_applied(name: str, tmp_path: Path) -> None:
        patch = RESULTS / name
        tests = _added_tests(patch)
        assert tests, f"{name} brings no test: a candidate must say how the CPU checks it"
        for entry in TREE:
            src = REPO_ROOT / entry
            if src.is_dir():
                shutil.copytree(src, tmp_path / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(src, tmp_path / entry)
        proc = subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
        env["PYTHONPATH"] = str(tmp_path)
        # With them, the planted-bug corpus (fast, no interpreter): its edits anchor on the experts'
        # exact text, so a candidate that moves a line one of them needs would break it on landing.
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django",
                               "-p", "no:xdist", *tests, "tests/tasks/test_planted_edits.py"],
                              cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
