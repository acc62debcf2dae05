"""Planted bugs in T17-T21 (norm backward, position encodings, KV-cache write, fused loss) are caught.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake:
the RMSNorm-backward row mean divided by the padded block length (T17, caught on rows that are not
a power of two), the cos/sin row taken at the token index instead of the position (T18), the key
heads scaled with the query norm weight (T19), padding tokens written to slot 0 instead of skipped
(T20, caught by the canonical form's exactness check of the whole cache), and ignored tokens given
a gradient (T21, caught by the canonical form's zero-row check). The engine runs each in Triton's
interpreter on the smoke workloads, as CI checks the expert kernels, and must reject it with the
named rule on the named output.
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
    ("rmsnorm-backward", "dx_mean_over_padded_row.py", "tolerance", "dx"),
    ("rotary-embedding", "cache_row_by_token_index.py", "tolerance", "query_out"),
    ("qk-rmsnorm-rope", "k_heads_use_q_weight.py", "tolerance", "qkv_out"),
    ("reshape-and-cache-paged", "padding_written_to_slot0.py", "canonicalize", ""),
    ("fused-linear-cross-entropy", "ignored_rows_get_gradient.py", "canonicalize", ""),
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
    if rule == "canonicalize":  # the exactness checks name what went wrong
        assert "zero" in first.message or "entries wrong" in first.message, first.message
    else:
        assert first.worst is not None
    assert task.reason.startswith("workload ")
    assert not result.all_correct
