"""The fused-linear-cross-entropy expert's warp-specialized GEMM (``_gemm_ws_kernel``, Gluon).

Gluon kernels do not run in Triton's interpreter, so CI checks what a CPU machine can: at W1 each
of the expert's four products (logits with W read transposed, dX, and dW with the gradient read
transposed, first stored and then accumulated into the fp32 output) builds the kernel at each of
its tiles for sm_90, with the products on wgmma, without spills, within an SM's shared memory, the
operands fetched by TMA and handed over through mbarriers, and the output stored by TMA (loaded by
TMA first where the product accumulates). The device bench checks its products on the real
workloads, as for every form the first call times.
"""

from __future__ import annotations

import re

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)

TASK = "fused-linear-cross-entropy"
SM90_SHARED = 232448  # bytes an sm_90 program may use
KERNEL = "_gemm_ws_kernel"


def test_every_product_builds_the_ws_kernel_for_sm90_with_tma_and_mbarriers(tmp_path, pf) -> None:  # noqa: F811
    expert = load_module(get_task(TASK).expert_path, "_flce_ws_test_expert")
    (report,) = pf.preflight(get_task(TASK), ["W1"], False, {}, tmp_path)
    assert report.error == "", report.error
    builds = [b for b in report.builds if b.kernel == KERNEL]
    flags = {re.search(r"A_T=\w+ B_T=\w+ ACCUMULATE=\w+", b.constexprs)[0] for b in builds}
    assert flags == {"A_T=False B_T=True ACCUMULATE=False", "A_T=False B_T=False ACCUMULATE=False",
                     "A_T=True B_T=False ACCUMULATE=False", "A_T=True B_T=False ACCUMULATE=True"}, flags
    assert len(builds) == 2 * len(expert.WS_TILES_16) + 2 * len(expert.WS_TILES_32), builds
    for build in builds:
        assert build.wgmma and build.spill_stores == 0 and build.spill_loads == 0, build
        assert build.shared <= SM90_SHARED, build
    ptxs = list(tmp_path.glob(f"{KERNEL}-*.ptx"))
    assert len(ptxs) == len(builds)
    for ptx in ptxs:
        text = ptx.read_text()
        assert "cp.async.bulk.tensor.2d.shared::cluster.global" in text, ptx.name  # TMA loads
        assert "mbarrier.try_wait" in text, ptx.name  # the hand-over between the partitions
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in text, ptx.name  # the TMA store
