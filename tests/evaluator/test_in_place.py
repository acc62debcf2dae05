"""Inputs a task updates in place (``updated = true``: vLLM's KV caches, a conv state) must hold
the result after the call. A kernel that returns correct values in a fresh tensor and leaves the
cache unwritten would be useless in the server it comes from, so it fails (EVALUATION.md: "an
in-place input not updated")."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import errors
from evaluator.runner import RunOptions, run
from tasks.registry import get_task, load_tasks

pytestmark = pytest.mark.interpreter

#: The expert, with its entry point wrapped so that it works on a copy of the state it should update.
WRAPPER = '''

_d2k_honest = causal_conv1d


def causal_conv1d(**kw):
    kw["conv_state"] = kw["conv_state"].clone()  # the caller's state is never written
    return _d2k_honest(**kw)
'''


def _check(path: Path, slug: str = "causal-conv1d"):
    opts = RunOptions(command="check", smoke=True, interpret=True, timeout_s=300, workloads=["S1"])
    (task,) = run([get_task(slug)], lambda _t: path, opts, candidate_path=path).tasks
    return task


def test_a_kernel_that_leaves_its_in_place_input_unwritten_fails(tmp_path: Path) -> None:
    task = get_task("causal-conv1d")
    cheat = tmp_path / "kernel.py"
    cheat.write_text(task.expert_path.read_text() + WRAPPER)
    result = _check(cheat)
    assert result.status == "incorrect" and result.error_code == errors.USER_WRONG_ANSWER
    failed = [t for w in result.workloads for t in w.trials if not t.passed]
    assert failed and failed[0].rule == "in-place" and failed[0].output == "conv_state"
    assert "conv_state must be updated in place" in result.reason
    honest = _check(task.expert_path)  # the same code writing the caller's state passes
    assert honest.status == "correct", honest.reason


def test_the_in_place_contract_is_declared_where_the_servers_update_in_place() -> None:
    updated = {t.slug: sorted(a.name for a in t.spec.inputs if a.updated) for t in load_tasks().tasks}
    assert {slug: names for slug, names in updated.items() if names} == {
        "causal-conv1d": ["conv_state"], "qk-rmsnorm-rope": ["qkv"],
        "reshape-and-cache-paged": ["key_cache", "value_cache"], "rotary-embedding": ["key", "query"]}
