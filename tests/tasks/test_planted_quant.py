"""Planted bugs in the quantization tasks (T11-T14) are caught by the real engine.

Each wrong kernel under ``kernels/<slug>/`` is the task's expert kernel with one classic mistake
planted: column-major scales written with row-major addressing, a missing eps floor, a weight
scale block index that never advances along K, the two scale vectors of the int8 GEMM mixed up,
and AWQ nibbles unpacked in natural order. The engine runs each in Triton's interpreter on the
smoke workloads, as CI checks the expert kernels, and must reject it with the named rule on the
named output.
"""

from __future__ import annotations

import pytest

from tests.tasks.planted import Planted, assert_caught

pytestmark = pytest.mark.interpreter

PLANTED = [
    # The codes are right but the scales sit at the wrong places of the [G, T_pad] buffer: only the
    # column-major workloads (S2, S3) can show it; q is compared dequantized with those scales.
    # The slots the kernel never writes keep whatever torch.empty handed out, so some runs see a
    # stray inf there and the non-finite check fires before the tolerance: either catch is right
    # (a CI run on a fresh clone hit the inf case).
    Planted("fp8-per-token-group-quant", "quant_colmajor_scales_row_strides.py", ("S2", "S3"),
            ("match-rate", "tolerance", "nan"), ("q", "scales")),
    # 0/0 codes in the zero rows: NaN is 127 steps from the zero code, canonicalize() rejects it.
    Planted("fp8-per-token-group-quant", "quant_missing_eps.py", ("S1",), ("canonicalize",), ()),
    Planted("fp8-blockwise-gemm", "block_gemm_stale_weight_scale.py", ("S1",), ("tolerance",), ("C",)),
    Planted("int8-w8a8-scaled-gemm", "int8_gemm_scale_by_row.py", ("S1",), ("tolerance",), ("C",)),
    Planted("w4a16-awq-gemm", "awq_natural_nibble_order.py", ("S1",), ("tolerance",), ("out",)),
]


@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_bug_is_caught(case: Planted, tmp_path) -> None:
    assert_caught(case, tmp_path)
