"""Planted bugs in the causal attention forward and backward (T01, T02) are caught by the engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: a diagonal tile without its causal mask, a softmax scale taken from the head dim
instead of the argument, a dK/dV sweep that does not mask the diagonal, a dQ without the scale.
The engine runs it in Triton's interpreter on the smoke workloads, exactly as CI checks the
expert kernels, and must reject it (planted.py says how).
"""

from __future__ import annotations

import pytest

from tests.tasks.planted import Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    Planted("attn-prefill-causal-gqa", "fwd_no_diagonal_mask.py", ("S1",), ("tolerance",), ("o",)),
    Planted("attn-prefill-causal-gqa", "fwd_default_scale.py", ("S3",), ("tolerance",), ("o",)),
    # dQ is reduced in the same sweep, so the unmasked diagonal shows there first.
    Planted("attn-backward-causal-gqa", "bwd_dkdv_no_diagonal_mask.py", ("S1",), ("tolerance",), ("dq", "dk", "dv")),
    Planted("attn-backward-causal-gqa", "bwd_dq_missing_scale.py", ("S1",), ("tolerance",), ("dq",)),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
