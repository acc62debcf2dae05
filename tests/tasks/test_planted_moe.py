"""Planted bugs in the MoE tasks (T07-T10) are caught by the real engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: exact ties resolved to the higher expert index (T07, caught by the planted tie rows),
segment padding written with n - 1 instead of the sentinel n (T08), the routing weight never
applied in the fused MoE (T09), and a dropped slot clamped to row 0 instead of contributing
zero (T10). The engine runs each in Triton's interpreter on the smoke workloads, exactly as CI
checks the expert kernels, and must reject it (planted.py says how).
"""

from __future__ import annotations

import pytest

from tests.tasks.planted import SMOKE, Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    # A tie sent to the other expert changes the id and, with a correction bias, the weight too.
    Planted("moe-topk-gating", "ties_to_higher_index.py", SMOKE, ("exact", "tolerance"), ("topk_ids", "topk_weights")),
    Planted("moe-align-block-size", "sentinel_off_by_one.py", SMOKE, ("exact",), ("sorted_token_ids",)),
    Planted("fused-moe-mlp", "routing_weight_dropped.py", SMOKE, ("tolerance",), ("out",)),
    Planted("moe-unpermute-combine", "dropped_slot_reads_row0.py", SMOKE, ("tolerance",), ("out",)),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
