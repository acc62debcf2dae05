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
from tests.tasks.sm90_builds import TMA_LOAD, TMA_STORE, assert_ptx_has, sound_builds

TASK = "w4a16-awq-gemm"
KERNEL = "_dense_gemm_persistent_kernel"

#: test_w4a16_ws_gemm.py's W4 reads the same W4 builds: sound_builds compiles a workload once per process, so the
#: two share one xdist group (one worker, one compile) instead of each worker compiling it.
pytestmark = pytest.mark.xdist_group("sm90-w4a16-awq-gemm-W4")


def test_every_persistent_candidate_builds_for_sm90_on_wgmma_with_tma(tmp_path, pf) -> None:  # noqa: F811
    expert = load_module(get_task(TASK).expert_path, "_persistent_build_test_expert")
    builds = sound_builds(pf, TASK, "W4", KERNEL, tmp_path)
    assert len(builds) == len(expert._PERSISTENT_CONFIGS), builds
    assert {b.num_warps for b in builds} == {c.num_warps for c in expert._PERSISTENT_CONFIGS}, builds
    assert_ptx_has(tmp_path, KERNEL, len(builds), TMA_LOAD, TMA_STORE)
