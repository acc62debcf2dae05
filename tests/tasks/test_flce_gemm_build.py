"""The fused-linear-cross-entropy expert's TMA GEMM: every candidate of every product builds for sm_90.

The interpreter checks the products' values; what an H100 makes of each autotune candidate it
cannot show. At W2 (two chunks; W1 and W3 run as one) the expert runs three products (logits with
W transposed, dX, and dW with the chunk's gradient transposed, stored and then accumulated into
the fp32 output); every candidate of each must put its products on wgmma, fit in an SM's shared
memory, and spill nothing: the accumulating dW product once spilled 196 B a thread at 128 x 256,
when C's tile was added after the K loop.
"""

from __future__ import annotations

import pytest

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)
from tests.tasks.sm90_builds import sound_builds

TASK = "fused-linear-cross-entropy"
KERNEL = "_gemm_tma_kernel"

#: test_flce_ws_gemm.py reads the same W2 builds: sound_builds compiles a workload once per process, so the
#: two share one xdist group (one worker, one compile) instead of each worker compiling it.
pytestmark = pytest.mark.xdist_group("sm90-fused-linear-cross-entropy-W2")


def test_every_gemm_candidate_builds_for_sm90_on_wgmma_without_spills(tmp_path, pf) -> None:  # noqa: F811
    expert = load_module(get_task(TASK).expert_path, "_flce_build_test_expert")
    builds = sound_builds(pf, TASK, "W2", KERNEL, tmp_path)
    products = {b.constexprs.split(" BLOCK_M")[0] for b in builds}
    assert len(products) == 4, products  # logits, dX, dW's first chunk and dW accumulating
    assert len(builds) == 4 * len(expert._gemm_configs()), builds
    assert any(b.num_warps == 4 for b in builds), "no one-warp-group candidate was built"
