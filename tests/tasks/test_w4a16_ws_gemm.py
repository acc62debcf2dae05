"""The w4a16-awq-gemm expert's warp-specialized prefill GEMM (``_dense_gemm_ws_kernel``, Gluon).

Gluon kernels do not run in Triton's interpreter, so CI checks what a CPU machine can: at the
prefill shapes that offer the route (W3, W4) every tile of ``WS_TILES`` compiles for sm_90 with
its products on wgmma, without spills, within an SM's shared memory, with the operands fetched
by TMA and handed over through mbarriers (the producer warp's loads, the consumers' waits). The
device bench checks its products on the real workloads, as for every route the first call times.
"""

from __future__ import annotations

import pytest

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)

TASK = "w4a16-awq-gemm"
SM90_SHARED = 232448  # bytes an sm_90 program may use


@pytest.fixture(scope="module")
def expert():
    return load_module(get_task(TASK).expert_path, "_ws_test_expert")


@pytest.mark.parametrize("workload", ["W3", "W4"])
def test_every_ws_tile_builds_for_sm90_on_wgmma_with_tma_and_mbarriers(workload, tmp_path, expert, pf) -> None:  # noqa: F811
    (report,) = pf.preflight(get_task(TASK), [workload], False, {}, tmp_path)
    assert report.error == "", report.error
    builds = [b for b in report.builds if b.kernel == "_dense_gemm_ws_kernel"]
    assert len(builds) == len(expert.WS_TILES), report.builds
    for build in builds:
        assert build.wgmma and build.spill_stores == 0 and build.spill_loads == 0, build
        assert build.shared <= SM90_SHARED, build
    ptxs = list(tmp_path.glob("_dense_gemm_ws_kernel-*.ptx"))
    assert len(ptxs) == len(builds)
    for ptx in ptxs:
        text = ptx.read_text()
        assert "cp.async.bulk.tensor.2d.shared::cluster.global" in text, ptx.name  # TMA loads
        assert "mbarrier.try_wait" in text, ptx.name  # the hand-over between the partitions
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in text, ptx.name  # the TMA store
