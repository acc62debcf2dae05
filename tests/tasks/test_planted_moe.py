"""Planted bugs in the MoE tasks (T07-T10) are caught by the real engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: exact ties resolved to the higher expert index (T07, caught by the planted tie rows),
segment padding written with n - 1 instead of the sentinel n (T08), the routing weight never
applied in the fused MoE (T09), and a dropped slot clamped to row 0 instead of contributing
zero (T10). The engine runs each in Triton's interpreter on the smoke workloads, exactly as CI
checks the expert kernels, and must reject it with the named rule on the named output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.result import RunResult
from evaluator.runner import RunOptions, run
from tasks.registry import get_task

KERNELS = Path(__file__).parent / "kernels"
pytestmark = pytest.mark.interpreter


def _check(kernel: Path, slug: str) -> RunResult:
    task = get_task(slug)
    return run([task], lambda _t: kernel, RunOptions(command="check", smoke=True, interpret=True, timeout_s=300))


PLANTED = [
    ("moe-topk-gating", "ties_to_higher_index.py", "exact", "topk_ids"),
    ("moe-align-block-size", "sentinel_off_by_one.py", "exact", "sorted_token_ids"),
    ("fused-moe-mlp", "routing_weight_dropped.py", "tolerance", "out"),
    ("moe-unpermute-combine", "dropped_slot_reads_row0.py", "tolerance", "out"),
]


@pytest.mark.parametrize("slug, kernel, rule, output", PLANTED, ids=[p[1].removesuffix(".py") for p in PLANTED])
def test_planted_bug_is_caught(slug, kernel, rule, output):
    result = _check(KERNELS / slug / kernel, slug)
    (task,) = result.tasks
    assert task.status == "incorrect", f"{kernel} passed {slug}"
    assert task.error_code == "eval:user:wrong-answer", task.reason
    failed = [t for w in task.workloads for t in w.trials if not t.passed]
    assert failed, "a wrong kernel must fail at least one trial"
    first = failed[0]
    assert first.output == output, task.reason
    assert first.rule == rule, task.reason
    assert first.worst is not None and task.reason.startswith("workload ")
    assert not result.all_correct
