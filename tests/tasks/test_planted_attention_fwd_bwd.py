"""Planted bugs in the causal attention forward and backward (T01, T02) are caught by the engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: a diagonal tile without its causal mask, a softmax scale taken from the head dim
instead of the argument, a dK/dV sweep that does not mask the diagonal, a dQ without the scale.
The engine runs it in Triton's interpreter on the smoke workloads, exactly as CI checks the
expert kernels, and must reject it with the named rule on the named output.
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
    ("attn-prefill-causal-gqa", "fwd_no_diagonal_mask.py", "S1", "tolerance", "o"),
    ("attn-prefill-causal-gqa", "fwd_default_scale.py", "S3", "tolerance", "o"),
    ("attn-backward-causal-gqa", "bwd_dkdv_no_diagonal_mask.py", "S1", "tolerance", "dq"),  # dQ reduced in the sweep
    ("attn-backward-causal-gqa", "bwd_dq_missing_scale.py", "S1", "tolerance", "dq"),
]


@pytest.mark.parametrize("slug, kernel, workload, rule, output", PLANTED,
                         ids=[p[1].removesuffix(".py") for p in PLANTED])
def test_planted_bug_is_caught(slug, kernel, workload, rule, output):
    result = _check(KERNELS / slug / kernel, slug)
    (task,) = result.tasks
    assert task.status == "incorrect", f"{kernel} passed {slug}"
    assert task.error_code == "eval:user:wrong-answer", task.reason
    failed = [(w.name, t) for w in task.workloads for t in w.trials if not t.passed]
    assert failed, "a wrong kernel must fail at least one trial"
    name, first = failed[0]
    assert name == workload, task.reason
    assert first.output == output, task.reason
    assert first.rule == rule, task.reason
    assert first.worst is not None and task.reason.startswith("workload ")
    assert not result.all_correct
