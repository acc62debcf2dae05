"""What the sm_90 build tests of the experts' GPU-only kernels check, in one place.

A kernel the interpreter cannot run (Gluon) or whose autotune candidates it cannot tell apart is
compiled for sm_90 through ``scripts/preflight_sm90.py`` (the ``pf`` fixture of
``tests/evaluator/test_preflight_sm90.py``). Every such test then asks the same of the builds:
products on wgmma, no spills, within an SM's shared memory; and of the PTX that the builds
dumped, the instructions that show TMA and mbarriers are really used.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tasks.registry import get_task

SM90_SHARED = 232448  # bytes an sm_90 program may use
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta"
MBARRIER_WAIT = "mbarrier.try_wait"  # a partition waiting on another's hand-over


#: (task, workload) -> its preflight report and the folder its builds' PTX went to. Two tests of
#: one workload's kernels (FLCE's TMA and Gluon GEMMs at W2: about a minute of compiling each)
#: share one compile.
_PREFLIGHTS: dict[tuple[str, str], tuple[object, Path]] = {}


def sound_builds(pf, task: str, workload: str, kernel: str, out: Path) -> list:
    """The builds of ``kernel`` at ``workload``, each asserted to run its products on wgmma,
    without spills, within an SM's shared memory; their PTX is dumped into ``out``."""
    if (task, workload) not in _PREFLIGHTS:
        (report,) = pf.preflight(get_task(task), [workload], False, {}, out)
        _PREFLIGHTS[task, workload] = (report, out)
    report, dumped = _PREFLIGHTS[task, workload]
    if dumped != out:
        for ptx in dumped.glob(f"{kernel}-*.ptx"):
            shutil.copy(ptx, out)
    assert report.error == "", report.error
    builds = [b for b in report.builds if b.kernel == kernel]
    assert builds, f"{task} {workload}: no build of {kernel} ({report.builds})"
    for build in builds:
        assert build.wgmma and build.spill_stores == 0 and build.spill_loads == 0, build
        assert build.shared <= SM90_SHARED, build
    return builds


def assert_ptx_has(out: Path, kernel: str, builds: int, *needles: str) -> None:
    """Each of the ``builds`` PTX files of ``kernel`` in ``out`` holds every one of ``needles``."""
    ptxs = list(out.glob(f"{kernel}-*.ptx"))
    assert len(ptxs) == builds, (len(ptxs), builds)
    for ptx in ptxs:
        text = ptx.read_text()
        for needle in needles:
            assert needle in text, f"{ptx.name}: no {needle}"
