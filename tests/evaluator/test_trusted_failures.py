"""A failure of a trusted provider (the baseline, torch.compile of it, the expert) is never the
submission's: an optional one (torch.compile) is left untimed with a reason and the candidate is
still judged and timed; any other ends the task with an infrastructure code (retried, no verdict).
And the memory side of the same H200 run: timing input sets bounded by bytes, not by count.

The providers here are fakes planted in a copied task tree: the baseline or expert file misbehaves
only when it is loaded by a worker as that provider (its module name says which), never in the
judge (which runs the baseline for the reference) nor as the candidate.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from evaluator import errors
from evaluator.child import _arena_bytes
from evaluator.judge import OPTIONAL_PROVIDERS, Judge
from evaluator.runner import RunOptions, run
from evaluator.shm import rotation_sets, set_bytes
from evaluator.timing_config import TimingConfig
from tasks.registry import get_task

pytestmark = pytest.mark.interpreter
SLUG = "silu-and-mul"
TIMING = {"min_count": 3, "max_count": 6, "budget_s": 0.5, "warmup": 2, "max_checks": 1,
          "escape_finding": [1.0, 10.0], "escape_reject": [1.0, 20.0]}


def _plant(root: Path, rel: str, code: str) -> None:
    """Append ``code`` to a task file of the copied tree (it may rebind the entry point)."""
    path = root / rel
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")


def _bench(root: Path, compare: list[str], workloads: list[str], timeout_s: float = 120, **timing: float):
    task = get_task(SLUG, root)
    opts = RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, compare=compare,
                      workloads=workloads, timeout_s=timeout_s, timing={**TIMING, **timing})
    (result,) = run([task], lambda t: t.expert_path, opts, candidate_path=task.expert_path).tasks
    return result


def test_a_torch_compile_that_hangs_is_left_untimed_and_the_candidate_is_timed(task_tree):
    """A compilation outlasting its limit (a recompile of a baseline whose loops unroll) was the
    whole task's eval:user:timeout on the H200; now its worker alone is killed."""
    root = task_tree(SLUG)
    _plant(root, f"tasks/{SLUG}/baseline.py", """\
import time as _time

_eager = silu_and_mul


def silu_and_mul(x):
    if __name__ == "_d2k_provider_compile":  # torch.compile's worker only
        _time.sleep(600)
    return _eager(x)
""")
    started = time.monotonic()
    result = _bench(root, ["compile"], ["S1", "S2"], optional_call_s=3)
    assert time.monotonic() - started < 90  # one limit of 3 s, not the task's 120 s
    assert result.status == "correct" and result.error_code == "", result.reason
    first, second = result.workloads
    for w in (first, second):
        assert set(w.timings) == {"baseline", "candidate"}
        assert w.timings["candidate"].count >= 3 and w.speedup["candidate"] > 0
    assert first.untimed["compile"].startswith("torch.compile of the baseline failed: ")
    assert "limit of 3 s per call" in first.untimed["compile"]
    # Its worker was killed: not tried again (another limit of the task's time) on the next workload.
    assert "left untimed since workload S1" in second.untimed["compile"]


def test_a_trusted_baseline_that_hangs_is_an_infrastructure_error(task_tree):
    root = task_tree(SLUG)
    _plant(root, f"tasks/{SLUG}/baseline.py", """\
import time as _time

_eager = silu_and_mul


def silu_and_mul(x):
    if __name__ == "_d2k_provider_baseline":  # the trusted worker only, not the judge's reference
        _time.sleep(600)
    return _eager(x)
""")
    result = _bench(root, [], ["S1"], timeout_s=25)
    assert result.error_code == errors.INFRA_TRUSTED, (result.error_code, result.reason)
    assert result.status == "error" and result.verdict == "unjudged"
    assert "trusted provider baseline" in result.reason and "did not finish" in result.reason
    assert "the task's time limit" in result.reason  # the task's deadline, not a per-call limit, ran out


def test_a_trusted_expert_out_of_memory_is_not_the_submissions_fault(task_tree):
    """The H200's fused-linear-cross-entropy: the expert ran out of device memory beside the other
    providers in a timed call, and the submission got incorrect / eval:user:timed-call-mismatch."""
    root = task_tree(SLUG)
    _plant(root, f"references/{SLUG}/expert.py", """\
_fast = silu_and_mul
_calls = 0


def silu_and_mul(x):
    global _calls
    _calls += 1
    if __name__ == "_d2k_provider_expert" and _calls > 2:  # after its two warm-up calls
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.91 GiB.")
    return _fast(x)
""")
    result = _bench(root, ["expert"], ["S1"])
    assert result.error_code == errors.INFRA_TRUSTED, (result.error_code, result.reason)
    assert result.status == "error" and result.verdict == "unjudged"
    assert "trusted provider expert" in result.reason and "gpu-oom" in result.reason
    assert "OutOfMemoryError" in result.reason


def test_a_trusted_failure_part_way_keeps_the_workloads_judged_before_it(task_tree):
    """Our failure on the second workload is still ours (infrastructure, no verdict), and the first
    workload's result, already judged and timed, is kept with the reason saying where it stopped."""
    root = task_tree(SLUG)
    _plant(root, f"references/{SLUG}/expert.py", """\
_fast = silu_and_mul


def silu_and_mul(x):
    if __name__ == "_d2k_provider_expert" and x.shape[0] == 4:  # S2's four rows only
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.91 GiB.")
    return _fast(x)
""")
    result = _bench(root, ["expert"], ["S1", "S2"])
    assert (result.status, result.error_code) == ("error", errors.INFRA_TRUSTED), result.reason
    assert [w.name for w in result.workloads] == ["S1"] and result.workloads[0].timings["expert"].count > 0
    assert "stopped while judging S2; kept: the results of S1" in result.reason


def test_the_rule_for_a_failed_trusted_provider():
    judge = Judge(get_task(SLUG), None, None, None, torch.device("cpu"), None)  # type: ignore[arg-type]
    assert set(OPTIONAL_PROVIDERS) == {"compile"}
    for name in ("baseline", "expert"):
        with pytest.raises(errors.EvaluatorError) as info:
            judge.provider_failed(name, "gpu-oom: CUDA out of memory", "W3", gone=False)
        assert info.value.code == errors.INFRA_TRUSTED
    why = judge.provider_failed("compile", "exception: BackendCompilerFailed\nmore\nand more", "W1", gone=False)
    assert why == "torch.compile of the baseline failed: exception: BackendCompilerFailed more"
    assert not judge.lost  # an exception: tried again on the next workload
    judge.provider_failed("compile", "did not finish within its limit", "W2", gone=True)
    assert judge.lost["compile"].startswith("torch.compile of the baseline is left untimed since workload W2")


class _Worker:
    """Stands in for a worker process in :meth:`Judge.release`: answers, or fails as told."""

    ready = True

    def __init__(self, failure: errors.EvaluatorError | None = None):
        self.failure = failure

    def release(self) -> None:
        if self.failure is not None:
            raise self.failure


def test_a_failed_release_is_the_candidates_own_failure_or_ours():
    """The candidate's worker fails with a SubmissionError (its user code stands); only workers of
    ours fail with an EvaluatorError, which the trusted rule handles."""
    from evaluator.workerproc import WorkerFailure

    dying = _Worker(WorkerFailure("the candidate's process died with SIGSEGV", code=errors.USER_CRASH))
    judge = Judge(get_task(SLUG), None, None, None, torch.device("cpu"), dying)  # type: ignore[arg-type]
    with pytest.raises(WorkerFailure) as info:  # never turned into "a trusted provider failed"
        judge.release({"candidate": dying, "baseline": _Worker()}, "W1")
    assert info.value.code == errors.USER_CRASH
    judge = Judge(get_task(SLUG), None, None, None, torch.device("cpu"), _Worker())  # type: ignore[arg-type]
    lost = _Worker(errors.EvaluatorError("the compile worker died"))
    judge.release({"candidate": judge.candidate, "compile": lost}, "W2")
    assert judge.lost["compile"].startswith("torch.compile of the baseline is left untimed since workload W2")
    with pytest.raises(errors.EvaluatorError) as info:
        judge.release({"candidate": judge.candidate, "baseline": _Worker(errors.EvaluatorError("gone"))}, "W3")
    assert info.value.code == errors.INFRA_TRUSTED


def test_timing_sets_are_bounded_by_bytes():
    pool = TimingConfig().pool_bytes
    assert 60 * 2**20 < pool <= 256 * 2**20  # more than the H200's L2, not gigabytes
    assert rotation_sets(2, 4096, pool) == 2  # small inputs: the configured rotation
    assert rotation_sets(2, 100 * 2**20, pool) == 2  # two sets reach the pool
    assert rotation_sets(8, 40 * 2**20, pool) == 4
    assert rotation_sets(2, 6 * 2**30, pool) == 1  # one set is already far larger than the L2
    assert rotation_sets(2, 0, pool) == 2


def test_the_arena_of_huge_workloads_holds_one_set():
    """fused-linear-cross-entropy W3: 6.4 GB a set (W bf16, dW fp32), in every worker's arena:
    two of them each was gigabytes that the providers' own memory lacked."""
    task = get_task("fused-linear-cross-entropy")
    workloads = task.workloads()
    one = max(set_bytes(task.nbytes(w.params)) for w in workloads)
    assert one > 6 * 10**9
    assert _arena_bytes(task, workloads, 2, TimingConfig().pool_bytes) == one + (1 << 20)
    assert _arena_bytes(task, workloads, 2) == 2 * one + (1 << 20)  # the count alone
    small = get_task(SLUG).workloads(smoke=True)  # kilobytes: two sets, as before
    assert _arena_bytes(get_task(SLUG), small, 2, TimingConfig().pool_bytes) == _arena_bytes(get_task(SLUG), small, 2)
