"""Planted bugs in sampling, Newton-Schulz and the SSM tasks (T22-T26) are caught by the engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: top-p skipped when top-k is on, the race adding log-noise, symmetric tiles never
mirrored (the composed Newton-Schulz's triangular products), an SSD scan and a causal conv that
ignore the per-sequence initial states, a gated-delta-rule state that misses the chunk decay.
The engine runs it in Triton's interpreter on the smoke workloads, exactly as CI checks the
expert kernels, and must reject it (planted.py says how).
"""

from __future__ import annotations

import pytest

from tests.tasks.planted import Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    # S1's rows 0 and 1 are planted so that top-p cuts inside the top-k set (baseline.py).
    Planted("topk-topp-sampling", "sampling_ignores_topp_after_topk.py", ("S1",), ("exact",), ("ids",)),
    Planted("topk-topp-sampling", "sampling_wrong_noise_sign.py", ("S1",), ("exact",), ("ids",)),
    # A missing mirror leaves the upper triangle zero: the error is large and the singular values
    # leave the reference band, which canonicalize reports before the tolerance check.
    Planted("muon-newton-schulz", "muon_symmetric_tiles_not_mirrored.py", ("S3",), ("canonicalize", "tolerance"), ("X",)),
    Planted("gated-delta-rule-chunked", "gdr_state_not_decayed.py", ("S1",), ("tolerance",), ("o", "final_state")),
    Planted("mamba2-ssd-chunk-scan", "ssd_ignores_initial_states.py", ("S2",), ("tolerance",), ("out", "final_states")),
    Planted("causal-conv1d", "conv_ignores_initial_state.py", ("S2",), ("tolerance",), ("out",)),
    # S1 and S3 run the rolling-window kernel in the interpreter (fp32), S2 the tile kernel.
    Planted("causal-conv1d", "conv_rolling_window_off_by_one.py", ("S1",), ("tolerance",), ("out",)),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
