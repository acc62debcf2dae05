"""Planted bugs in the attention-variant tasks (T03-T06) are caught by the real engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted (a window off by one, a wrong page index, a wrong scale, a merge that ignores the LSE).
The engine runs it in Triton's interpreter on the smoke workloads, exactly as CI checks the
expert kernels, and must reject it (planted.py says how).
"""

from __future__ import annotations

import pytest

from tests.tasks.planted import SMOKE, Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    Planted("merge-attn-states", "merge_ignores_lse.py", SMOKE, ("tolerance",), ("o",)),
    # The wrong page holds whatever the pool holds: NaN on some seeds, a finite wrong value on others.
    Planted("paged-attn-decode-gqa", "paged_wrong_page_index.py", SMOKE, ("nan", "tolerance"), ("o",)),
    Planted("attn-varlen-sliding-window", "varlen_window_off_by_one.py", SMOKE, ("tolerance",), ("o",)),
    Planted("mla-decode-paged", "mla_wrong_scale.py", SMOKE, ("tolerance",), ("o",)),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
