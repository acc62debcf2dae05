"""The timing protocol's judgement calls that the devices showed wrong before: which providers'
round-trip overhead the candidate is compared with (the H200), how far above it an honest kernel
may land before it is rejected (an H100, session 27), and a torch.compile that cannot compile the
baseline (a fact about torch.compile, not a failure of the task)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from evaluator import errors
from evaluator.judge import _escape_check, _halves, _residual_floor
from evaluator.runner import RunOptions, run
from evaluator.timing_config import TimingConfig
from tasks.registry import get_task


def _workers(**untrusted: bool) -> dict[str, SimpleNamespace]:
    return {name: SimpleNamespace(cfg=SimpleNamespace(untrusted=flag)) for name, flag in untrusted.items()}


def test_floor_comes_from_a_worker_set_up_like_the_candidates():
    # The expert runs in a sandboxed, watched worker like the candidate: its 0.10 ms is the floor,
    # not the plain trusted worker's 0.02 ms (which made honest kernels look like escapes).
    workers = _workers(baseline=False, compile=False, expert=True, candidate=True)
    residual = {"baseline": 0.02, "compile": 0.03, "expert": 0.10, "candidate": 0.11}
    assert _residual_floor(residual, workers) == pytest.approx(0.10)


def test_floor_falls_back_to_the_trusted_worker_without_a_twin():
    workers = _workers(baseline=False, compile=False, candidate=True)
    residual = {"baseline": 0.02, "compile": 0.03, "candidate": 0.11}
    assert _residual_floor(residual, workers) == pytest.approx(0.02)


def test_an_excess_within_the_twins_spread_is_a_finding_not_a_rejection():
    # Session 27 on an H100: the old w4a16 expert (206 us a call) ran 241 us over its twin's round
    # trip; twins' round trips of about 1.9 ms differed by up to 283 us between honest kernels.
    found = _escape_check("candidate", "W2", 0.206, 0.241, 1.9, TimingConfig())
    assert len(found) == 1 and "candidate at W2: the judge's clock saw 241 us per call more" in found[0]
    assert "(their round trip: 1900 us a call beyond the timer)" in found[0]


def test_an_escape_beyond_the_twins_spread_is_rejected():
    # side_stream.py on the H200: milliseconds over the floor.
    with pytest.raises(errors.SubmissionError) as info:
        _escape_check("candidate", "W2", 0.152, 5.9, 1.9, TimingConfig())
    assert info.value.code == errors.USER_TIMING_INTEGRITY
    # Just past a quarter of the floor (and past 50% of the median) is rejected too.
    with pytest.raises(errors.SubmissionError):
        _escape_check("candidate", "W2", 0.206, 0.50, 1.9, TimingConfig())


def test_a_small_round_trip_keeps_the_old_thresholds():
    # Where the floor's overhead is small, max(50% of the median, 0.1 ms) decides as before.
    with pytest.raises(errors.SubmissionError):
        _escape_check("candidate", "W2", 0.206, 0.241, 0.2, TimingConfig())
    assert _escape_check("candidate", "W2", 0.206, 0.02, 0.2, TimingConfig()) == []


def test_the_candidate_never_sets_its_own_floor():
    workers = _workers(candidate=True, **{"candidate-again": True}, baseline=False)
    residual = {"candidate": 0.5, "candidate-again": 0.4, "baseline": 0.05}
    assert _residual_floor(residual, workers) == pytest.approx(0.05)


def test_a_baseline_torch_compile_cannot_compile_is_left_untimed_not_failed():
    """qk-rmsnorm-rope's baseline writes in place through views of another dtype, which
    aot_autograd refuses: the task is still judged and timed, and the reason is shown."""
    task = get_task("qk-rmsnorm-rope")
    opts = RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, compare=["compile"],
                      workloads=[task.workloads(smoke=True)[0].name], timeout_s=300,
                      timing={"budget_s": 0.2, "min_count": 3, "max_count": 5, "max_checks": 1,
                              "escape_finding": [1.0, 10.0], "escape_reject": [1.0, 20.0]})
    (result,) = run([task], lambda _t: task.expert_path, opts, candidate_path=task.expert_path).tasks
    assert result.status == "correct", result.reason
    (w,) = result.workloads
    assert set(w.timings) == {"baseline", "candidate"}
    assert "torch.compile of the baseline failed" in w.untimed["compile"]
    assert "aot_autograd" in w.untimed["compile"]
    assert result.verdict == "clean" and not w.findings


def test_the_timing_loop_stops_at_its_wall_budget():
    """Short kernels never spend the device-time budget; the wall budget ends their loop."""
    task = get_task("silu-and-mul")
    opts = RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, workloads=["S1"], timeout_s=120,
                      timing={"wall_budget_s": 0.0, "min_count": 3, "max_count": 1000, "budget_s": 100.0,
                              "target_rel_stderr": 0.0, "max_checks": 1,
                              "escape_finding": [1.0, 10.0], "escape_reject": [1.0, 20.0]})
    (result,) = run([task], lambda _t: task.expert_path, opts, candidate_path=task.expert_path).tasks
    assert result.status == "correct", result.reason
    (w,) = result.workloads
    assert w.stop_reason == "wall budget"
    assert {t.count for t in w.timings.values()} == {3}
    for t in w.timings.values():  # the round trip around each provider's device time is reported
        assert t.residual_ms is not None and t.residual_ms >= 0
        assert t.residual_first_half_ms is not None and t.residual_second_half_ms is not None
        assert t.median_first_half_ms is not None and t.median_second_half_ms is not None


def test_halves_split_the_calls_in_timing_order():
    """A first-calls transient shows as a first half above the second; one call has no halves."""
    halves = _halves("residual", [0.09, 0.08, 0.07, 0.02, 0.02, 0.03])
    assert halves == {"residual_first_half_ms": pytest.approx(0.08), "residual_second_half_ms": pytest.approx(0.02)}
    assert _halves("residual", [0.05]) == {"residual_first_half_ms": None, "residual_second_half_ms": None}
    assert _halves("median", [1.0, 3.0, 2.0, 5.0]) == {"median_first_half_ms": 2.0, "median_second_half_ms": 3.5}


def test_the_launch_spin_is_on_by_default_and_reaches_every_timed_worker():
    """``spin_us`` (TimingConfig) travels to each worker's Setup and is 300 µs by default: the
    device's A/A with the hold of every SM steadied short calls and side_stream.py was still
    caught (docs/results/h100-spin-aa.md, docs/engine.md). judge_task passes it only on a GPU,
    like the flush, and a CPU worker ignores it. The worker keeps its own
    reference to the spin, watched like its clock, so a kernel that replaces it, its Triton
    kernel or Triton's launch is tampering."""
    from evaluator import worker
    from evaluator.child import _worker
    from evaluator.protocol import Setup
    from evaluator.timing_config import TimingConfig

    assert TimingConfig().spin_us == 300.0
    assert TimingConfig.from_dict({"spin_us": 0}).spin_us == 0.0  # the A/A's other arm
    assert TimingConfig.from_dict({"spin_us": 250}).spin_us == 250.0
    setup = Setup(device="cuda", arena_fd=3, arena_size=1, providers={}, outputs=[], inputs=[], spin_us=250.0)
    assert Setup.model_validate_json(setup.model_dump_json()).spin_us == 250.0
    task = get_task("silu-and-mul")
    job = SimpleNamespace(interpret=True, sandboxed=False)
    dev = torch.device("cpu")
    assert _worker("expert", {}, task, job, dev, 1 << 20, 0.0, True, 1 << 20, spin_us=250.0).cfg.spin_us == 250.0
    assert _worker("expert", {}, task, job, dev, 1 << 20, 0.0, True, 1 << 20).cfg.spin_us == 0.0
    watched = worker._watched()
    assert watched["evaluator.worker._spin"] is worker._spin
    assert watched["evaluator.hold.hold"] is worker._spin  # the spin that holds every SM
    assert "evaluator.hold._hold_kernel" in watched and "triton.runtime.jit.JITFunction.run" in watched


def test_a_loop_that_stops_early_still_checks_min_checks_timed_calls():
    """Converging at min_count rounds used to leave about three checked calls (the first round
    and 10% after it); the floor draws the rest from the first min_count rounds, and no more than
    that are added when chance gives none."""
    from evaluator.judge import _drawn_rounds
    from evaluator.timing_config import TimingConfig

    task = get_task("silu-and-mul")
    for floor in (1, 4):
        opts = RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, workloads=["S1"],
                          timeout_s=120,
                          timing={"min_count": 8, "max_count": 8, "budget_s": 100.0, "check_probability": 0.0,
                                  "min_checks": floor, "escape_finding": [1.0, 10.0], "escape_reject": [1.0, 20.0]})
        whole = run([task], lambda _t: task.expert_path, opts, candidate_path=task.expert_path)
        (result,) = whole.tasks
        assert result.status == "correct", result.reason
        # The run records every timing setting it used, the overrides applied.
        assert whole.timing["min_checks"] == floor and whole.timing["spin_us"] == 300.0
        assert whole.timing["escape_finding"] == [1.0, 10.0]
        (w,) = result.workloads
        assert w.timings["candidate"].checked_calls == floor
        assert w.timings["baseline"].checked_calls == 0
    import random

    drawn = _drawn_rounds(random.Random(1), TimingConfig(min_count=20, min_checks=6))
    assert 0 in drawn and len(drawn) == 6 and max(drawn) < 20
    assert _drawn_rounds(random.Random(1), TimingConfig(min_count=3, min_checks=10)) == {0, 1, 2}
