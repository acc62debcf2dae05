"""The w4a16-awq-gemm expert's persistent TMA GEMM: every autotune candidate builds for sm_90.

The interpreter checks each candidate's products (``test_w4a16_persistent_gemm.py``) but not what
an H100 would make of it: a candidate whose stages overflow an SM's shared memory, or that spills
on one warp group, would fail or crawl only on the device, where the autotuner would silently drop
or keep it. So at the prefill shape that takes the route (W4), every one of
``_PERSISTENT_CONFIGS`` is compiled for sm_90 and must run its products on wgmma, spill nothing,
fit in shared memory, and move its operands and output by TMA.
"""

from __future__ import annotations

import pytest

from evaluator.modules import load_module
from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)

TASK = "w4a16-awq-gemm"
SM90_SHARED = 232448  # bytes an sm_90 program may use
KERNEL = "_dense_gemm_persistent_kernel"


@pytest.fixture(scope="module")
def expert():
    return load_module(get_task(TASK).expert_path, "_persistent_build_test_expert")


def test_every_persistent_candidate_builds_for_sm90_on_wgmma_with_tma(tmp_path, expert, pf) -> None:  # noqa: F811
    (report,) = pf.preflight(get_task(TASK), ["W4"], False, {}, tmp_path)
    assert report.error == "", report.error
    builds = [b for b in report.builds if b.kernel == KERNEL]
    assert len(builds) == len(expert._PERSISTENT_CONFIGS), report.builds
    assert {b.num_warps for b in builds} == {c.num_warps for c in expert._PERSISTENT_CONFIGS}, builds
    for build in builds:
        assert build.wgmma and build.spill_stores == 0 and build.spill_loads == 0, build
        assert build.shared <= SM90_SHARED, build
    ptxs = list(tmp_path.glob(f"{KERNEL}-*.ptx"))
    assert len(ptxs) == len(builds)
    for ptx in ptxs:
        text = ptx.read_text()
        assert "cp.async.bulk.tensor.2d.shared::cluster.global" in text, ptx.name  # TMA loads
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in text, ptx.name  # the TMA store
