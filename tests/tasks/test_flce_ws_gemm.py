"""The fused-linear-cross-entropy expert's warp-specialized GEMM (``_gemm_ws_kernel``, Gluon).

Gluon kernels do not run in Triton's interpreter, so CI checks what a CPU machine can: at W2 (two
chunks; W1 and W3 run as one) each of the expert's four products (logits with W read transposed,
dX, and dW with the gradient read transposed, first stored and then accumulated into the fp32
output) builds the kernel at each of its tiles for sm_90, with the products on wgmma, without
spills, within an SM's shared memory, the operands fetched by TMA and handed over through
mbarriers, and the output stored by TMA (loaded by TMA first where the product accumulates). The
device bench checks its products on the real workloads, as for every form the first call times.
"""

from __future__ import annotations

import re

import pytest

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)
from tests.tasks.sm90_builds import MBARRIER_WAIT, TMA_LOAD, TMA_STORE, assert_ptx_has, sound_builds

TASK = "fused-linear-cross-entropy"
KERNEL = "_gemm_ws_kernel"

#: test_flce_gemm_build.py reads the same W2 builds: sound_builds compiles a workload once per process, so the
#: two share one xdist group (one worker, one compile) instead of each worker compiling it.
pytestmark = pytest.mark.xdist_group("sm90-fused-linear-cross-entropy-W2")


def test_every_product_builds_the_ws_kernel_for_sm90_with_tma_and_mbarriers(tmp_path, pf) -> None:  # noqa: F811
    expert = load_module(get_task(TASK).expert_path, "_flce_ws_test_expert")
    builds = sound_builds(pf, TASK, "W2", KERNEL, tmp_path)
    flags = {re.search(r"A_T=\w+ B_T=\w+ ACCUMULATE=\w+", b.constexprs)[0] for b in builds}
    assert flags == {"A_T=False B_T=True ACCUMULATE=False", "A_T=False B_T=False ACCUMULATE=False",
                     "A_T=True B_T=False ACCUMULATE=False", "A_T=True B_T=False ACCUMULATE=True"}, flags
    assert len(builds) == 2 * len(expert.WS_TILES_16) + 2 * len(expert.WS_TILES_32), builds
    assert_ptx_has(tmp_path, KERNEL, len(builds), TMA_LOAD, MBARRIER_WAIT, TMA_STORE)
