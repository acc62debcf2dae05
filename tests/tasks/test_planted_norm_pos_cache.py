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

import pytest

from tests.tasks.planted import SMOKE, Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    Planted("rmsnorm-backward", "dx_mean_over_padded_row.py", SMOKE, ("tolerance",), ("dx",)),
    Planted("rotary-embedding", "cache_row_by_token_index.py", SMOKE, ("tolerance",), ("query_out", "key_out")),
    Planted("qk-rmsnorm-rope", "k_heads_use_q_weight.py", SMOKE, ("tolerance",), ("qkv_out",)),
    # The canonical form checks the whole cache exactly, and that ignored rows carry no gradient.
    Planted("reshape-and-cache-paged", "padding_written_to_slot0.py", SMOKE, ("canonicalize",), ()),
    Planted("fused-linear-cross-entropy", "ignored_rows_get_gradient.py", SMOKE, ("canonicalize",), ()),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
