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
from tests.tasks.sm90_builds import MBARRIER_WAIT, TMA_LOAD, TMA_STORE, assert_ptx_has, sound_builds

TASK = "w4a16-awq-gemm"
KERNEL = "_dense_gemm_ws_kernel"


@pytest.fixture(scope="module")
def expert():
    return load_module(get_task(TASK).expert_path, "_ws_test_expert")


#: W4 with test_w4a16_persistent_build.py (sound_builds shares one compile of a workload per
#: process): one xdist group, so that the two run in one worker and W4 is compiled once.
@pytest.mark.parametrize("workload", ["W3", pytest.param("W4", marks=pytest.mark.xdist_group("sm90-w4a16-awq-gemm-W4"))])
def test_every_ws_tile_builds_for_sm90_on_wgmma_with_tma_and_mbarriers(workload, tmp_path, expert, pf) -> None:  # noqa: F811
    builds = sound_builds(pf, TASK, workload, KERNEL, tmp_path)
    assert len(builds) == len(expert.WS_TILES), builds
    assert_ptx_has(tmp_path, KERNEL, len(builds), TMA_LOAD, MBARRIER_WAIT, TMA_STORE)
