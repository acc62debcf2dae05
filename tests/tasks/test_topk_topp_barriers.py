"""topk-topp-sampling's kernels read back what other warps of their program wrote; the warps must
not run apart in between.

The split pick moves each row's survivor segments together in place before it picks: it reads a
chunk of a segment and writes it further left. Where a segment moves by less than a chunk, a warp
already storing its part would overwrite slots of the same or the next chunk that another warp has
not loaded yet; and the pick then reads slots other warps wrote. The interpreter runs a program's
lanes in lockstep and cannot show either race, so this reads the sm_90 builds instead: in every
kernel's PTX each global store is followed by a barrier before the next global load, and in the
split pick each global load by a barrier before the next store of a candidate.
"""

from __future__ import annotations

import re

import pytest

from tasks.registry import get_task
from tests.evaluator.test_preflight_sm90 import pf  # noqa: F401 (the sm_90 preflight, as a fixture)

STORE, LOAD = r"\bst\.global\b", r"\bld\.global\b"


def unfenced(ptx: str, first: str, then: str) -> list[int]:
    """Line numbers of instructions matching ``first`` that one matching ``then`` follows with no
    ``bar.sync`` between them, in the PTX's text order (which keeps each loop body after its header).

    Global stores before global loads: another warp may load a slot before this warp's store lands.
    Global loads before global stores, in a kernel that moves data in place: another warp may
    overwrite a slot this warp has not loaded yet.
    """
    pending: list[int] = []
    bad: list[int] = []
    for n, line in enumerate(ptx.splitlines(), 1):
        if re.search(first, line):
            pending.append(n)
        elif "bar.sync" in line:
            pending.clear()
        elif re.search(then, line) and pending:
            bad.extend(pending)
            pending.clear()
    return bad


def test_the_check_finds_a_store_with_no_barrier_before_the_next_load() -> None:
    assert unfenced("st.global.b32 [a], b;\nld.global.b32 c, [a];", STORE, LOAD) == [1]
    assert unfenced("st.global.b32 [a], b;\nbar.sync 0;\nld.global.b32 c, [a];", STORE, LOAD) == []
    assert unfenced("ld.global.b32 c, [a];\nst.global.b32 [b], c;", LOAD, STORE) == [1]
    assert unfenced("ld.global.b32 c, [a];\nbar.sync 0;\nst.global.b32 [b], c;", LOAD, STORE) == []


@pytest.mark.parametrize("workload", ["W1", "W2", "W3"])
def test_every_store_of_the_sampling_kernels_is_fenced_by_a_barrier(workload, tmp_path, pf) -> None:  # noqa: F811
    """The split pick by its explicit barriers; the other kernels (the fused one, whose pick reads
    what its compaction wrote, and the split sweeps) by the block-wide reductions after their stores."""
    (report,) = pf.preflight(get_task("topk-topp-sampling"), [workload], False, {}, tmp_path)
    assert report.error == "", report.error
    ptxs = sorted(tmp_path.glob("*.ptx"))
    split = workload != "W3"  # W1 and W2 take the split path, W3 the fused kernel
    assert any(p.name.startswith("_split_pick_kernel-") for p in ptxs) == split, [p.name for p in ptxs]
    for ptx in ptxs:
        assert unfenced(ptx.read_text(), STORE, LOAD) == [], ptx.name
        if ptx.name.startswith("_split_pick_kernel-"):  # moves survivors in place: loads fenced too
            # the move's stores are 32-bit (values, indices); the sampled id, the kernel's only
            # 64-bit store, goes to its own output, which nothing loads
            assert unfenced(ptx.read_text(), LOAD, r"\bst\.global\.b32\b") == [], ptx.name
