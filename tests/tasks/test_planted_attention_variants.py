"""Planted bugs in the attention-variant tasks (T03-T06) are caught by the real engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted (a window off by one, a wrong page index, a wrong scale, a merge that ignores the LSE).
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
    ("merge-attn-states", "merge_ignores_lse.py", "tolerance", "o"),
    ("paged-attn-decode-gqa", "paged_wrong_page_index.py", "nan", "o"),
    ("attn-varlen-sliding-window", "varlen_window_off_by_one.py", "tolerance", "o"),
    ("mla-decode-paged", "mla_wrong_scale.py", "tolerance", "o"),
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
