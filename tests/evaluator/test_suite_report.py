"""The results page's suite summary, on the committed H200 run of T15/T16."""

from __future__ import annotations

import json

from evaluator import suite_report
from evaluator.result import RunResult
from tasks.registry import REPO_ROOT, load_tasks


def _run() -> RunResult:
    return RunResult.model_validate(json.loads((REPO_ROOT / "docs/results/h200-bench.json").read_text()))


def _dtypes() -> dict[str, str]:
    return {f"{t.slug}/{w.name}": t.compute_dtype(w.params) for t in load_tasks().tasks for w in t.workloads()}


def test_summary_of_the_committed_run_meets_every_target() -> None:
    text = suite_report.summary(_run(), _dtypes(), all_slugs=tuple(t.slug for t in _run().tasks))
    assert "2/2 tasks" in text and "Every workload meets every target." in text
    assert all(v.bound == "memory" for v in suite_report.verdicts(_run(), _dtypes()))


def test_a_slow_workload_is_listed_with_the_target_it_misses() -> None:
    run = _run()
    w = run.tasks[0].workloads[0]
    slow = w.timings["candidate"].model_copy(update={"median_ms": w.timings["baseline"].median_ms * 2})
    w.timings["candidate"] = slow
    w.sol_fraction["candidate"] = 0.1
    text = suite_report.summary(run, _dtypes(), all_slugs=tuple(t.slug for t in load_tasks().tasks))
    assert "2/26 tasks" in text
    assert f"| {run.tasks[0].slug} | {w.name} | memory | not faster than eager" in text
    assert "10% of SOL, target 60% (memory-bound)" in text
    w.sol_fraction["candidate"] = 0.596  # a whole percent would read "60% of SOL, target 60%"
    text = suite_report.summary(run, _dtypes(), all_slugs=tuple(t.slug for t in load_tasks().tasks))
    assert "59.6% of SOL, target 60% (memory-bound)" in text


def test_a_latency_bound_task_is_held_to_its_speedups_only() -> None:
    run = _run()
    slug = run.tasks[0].slug
    for w in run.tasks[0].workloads:
        w.sol_fraction["candidate"] = 0.01
    assert any("of SOL" in m for v in suite_report.verdicts(run, _dtypes()) for m in v.misses)
    marked = suite_report.verdicts(run, _dtypes(), latency=frozenset({slug}))
    assert {v.bound for v in marked if v.task == slug} == {"latency"}
    assert not any(v.misses for v in marked if v.task == slug)


def test_untimed_providers_and_missing_tasks_are_listed() -> None:
    run = _run()
    w = run.tasks[0].workloads[0]
    del w.timings["compile"]
    w.untimed = {"compile": "torch.compile of the baseline failed: AssertionError: no"}
    text = suite_report.summary(run, _dtypes(), all_slugs=(run.tasks[0].slug, run.tasks[1].slug, "causal-conv1d"))
    assert f"| {run.tasks[0].slug} | {w.name} | compile | torch.compile of the baseline failed" in text
    assert "### Tasks with no result on this page (1)" in text and "causal-conv1d" in text


def test_the_results_page_shows_peak_memory_where_it_was_measured() -> None:
    from evaluator import report

    run = _run()
    assert "Peak device memory" not in report.markdown(run, "cmd")  # T15/T16 do not measure it
    w = run.tasks[0].workloads[0]
    for name, mib in (("baseline", 512.0), ("candidate", 24.5)):
        w.timings[name] = w.timings[name].model_copy(update={"peak_mem_bytes": int(mib * 2**20)})
    page = report.markdown(run, "cmd")
    assert "Peak device memory above the inputs" in page
    assert f"| {run.tasks[0].slug} | {w.name} | 512.0 |" in page and "| 24.5 |" in page


def test_set_sol_replaces_its_own_findings_and_flags_a_breach() -> None:
    from evaluator.hardware import HardwareProfile, set_sol

    run = _run()
    w = run.tasks[0].workloads[0]
    profile = HardwareProfile.from_record(run.hardware)
    w.findings = ["an unrelated finding"]
    w.flops, w.bytes = w.flops, w.bytes * 10  # SOL ten times longer: every provider "beats" it
    set_sol(w, profile, "bf16")
    breaches = [f for f in w.findings if "faster than the speed of light" in f]
    assert len(breaches) == len(w.timings) and "an unrelated finding" in w.findings
    w.bytes /= 10
    set_sol(w, profile, "bf16")
    assert w.findings == ["an unrelated finding"]
    assert all(0 < f <= 1 for f in w.sol_fraction.values())


def test_reroof_recomputes_sol_with_todays_formula_and_leaves_times_alone() -> None:
    """The committed muon run was measured with the reference-FLOP formula (SOL up to 242%)."""
    run = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h200-runs/bench-muon-newton-schulz.json").read_text()))
    before = {w.name: (dict(w.sol_fraction), w.timings["candidate"].median_ms) for w in run.tasks[0].workloads}
    assert max(f for f, _ in before.values() for f in f.values()) > 2.0
    changed = suite_report.reroof(run, load_tasks().tasks)
    assert len(changed) == 4 and changed[1].startswith("muon-newton-schulz W2: candidate SOL 241.6%")
    for w in run.tasks[0].workloads:
        assert w.timings["candidate"].median_ms == before[w.name][1]
        assert 0 < w.sol_fraction["candidate"] < 1
        assert not any("speed of light" in f for f in w.findings)
    assert suite_report.reroof(run, load_tasks().tasks) == []  # already current: nothing to redo


def test_reroof_applies_the_int8_ceiling_rule_to_a_run_calibrated_before_it() -> None:
    """Session 13's H100 int8 run was calibrated with torch._int_mm's 894 TFLOP/s: SOL 118-135%."""
    run = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h100-runs/s13-bench-int8-w8a8-scaled-gemm.json").read_text()))
    assert run.hardware.peak_tflops["int8"] < run.hardware.peak_tflops["fp8e4m3"]
    times = {w.name: w.timings["candidate"].median_ms for w in run.tasks[0].workloads}
    assert any("speed of light" in f for w in run.tasks[0].workloads for f in w.findings)
    changed = suite_report.reroof(run, load_tasks().tasks)
    # W3 is memory-bound: its SOL does not use the ceiling, so it is not listed as changed.
    assert [c.split(":")[0] for c in changed] == ["int8-w8a8-scaled-gemm W1", "int8-w8a8-scaled-gemm W2"]
    assert changed[1].startswith("int8-w8a8-scaled-gemm W2: candidate SOL 135.4% -> 95.")
    assert run.hardware.peak_tflops["int8"] == run.hardware.peak_tflops["fp8e4m3"]
    assert "int8 at fp8's rate" in run.hardware.provenance
    for w in run.tasks[0].workloads:
        assert w.timings["candidate"].median_ms == times[w.name]
        assert all(0 < f < 1 for f in w.sol_fraction.values())
        assert not any("speed of light" in f for f in w.findings)
    assert suite_report.reroof(run, load_tasks().tasks) == []  # already current: nothing to redo


def test_two_timings_of_one_expert_that_settled_apart_are_listed() -> None:
    """Session 13's H100 attn-backward run: the expert column and the candidate column (the same
    expert, another process) settled 28% apart at W1, in medians and minima; W2 and W3 agree.
    Session 14's run, after the dQ strategy was judged over three rounds, lists nothing."""
    run = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h100-runs/s13-bench-attn-backward-causal-gqa.json").read_text()))
    assert run.candidate.is_expert
    rows = suite_report.same_kernel_spread(run)
    assert [(s, w) for s, w, *_ in rows] == [("attn-backward-causal-gqa", "W1")]
    assert round(rows[0][2]) == 1988 and round(rows[0][3]) == 2547
    page = suite_report.summary(run, {"attn-backward-causal-gqa": "bf16"})
    assert "### The same expert, timed twice, settled apart" in page and "| attn-backward-causal-gqa | W1 |" in page
    # The threshold is both medians and minima: noise moves one, a different code path both.
    w1 = run.tasks[0].workloads[0]
    w1.timings["candidate"] = w1.timings["candidate"].model_copy(update={"min_ms": w1.timings["expert"].min_ms})
    assert suite_report.same_kernel_spread(run) == []
    # A submitted candidate is not the expert: its gap to the expert column is the result itself.
    run.candidate = run.candidate.model_copy(update={"label": "team-x kernel"})
    w1.timings["candidate"] = w1.timings["candidate"].model_copy(update={"min_ms": 9.0, "median_ms": 9.0})
    assert suite_report.same_kernel_spread(run) == []
    assert "settled apart" not in suite_report.summary(run, {"attn-backward-causal-gqa": "bf16"})
    later = RunResult.model_validate(json.loads(
        (REPO_ROOT / "docs/results/h100-runs/bench-attn-backward-causal-gqa.json").read_text()))
    assert later.candidate.is_expert and suite_report.same_kernel_spread(later) == []


def test_the_results_page_never_merges_two_kinds_of_gpu() -> None:
    import importlib.util

    import pytest

    spec = importlib.util.spec_from_file_location("results_page", REPO_ROOT / "scripts/results_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    h200 = _run()
    h100 = h200.model_copy(update={"hardware": h200.hardware.model_copy(update={"name": "h100"})})
    assert [t.slug for t in page.merge([h200, h200]).tasks] == [t.slug for t in h200.tasks]
    with pytest.raises(page.MixedCards, match="h100, h200"):
        page.merge([h200, h100])


def test_the_latest_measurement_wins_whatever_the_order_of_the_files() -> None:
    """Files come in glob order (bench-<slug>.json), not in the order they were measured: the
    merge goes by each run's start time, and the page says when the merged rows rest on different
    ceilings (a later calibration of the same card), naming which tasks use which."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("results_page", REPO_ROOT / "scripts/results_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    old = _run()
    slug = old.tasks[0].slug
    hw = old.hardware.model_copy(update={"memory_bandwidth_gbs": old.hardware.memory_bandwidth_gbs + 100})
    new_task = old.tasks[0].model_copy(update={"reason": "the later run"})
    new = old.model_copy(update={"started_at": "2099-01-01T00:00:00+00:00", "tasks": [new_task], "hardware": hw})
    for order in ([old, new], [new, old]):
        merged = page.merge(order)
        assert merged.tasks[0].reason == "the later run" and merged.started_at.startswith("2099")
    note = page.mixed_ceilings([new, old])
    assert note.startswith("**The rows come from runs calibrated with different ceilings")
    assert f"{hw.memory_bandwidth_gbs:,.0f} GB/s" in note and f": {slug}." in note
    assert page.mixed_ceilings([old, old]) == ""


def test_the_page_says_which_rows_were_timed_with_the_pre_call_hold() -> None:
    """Runs before 2026-12-05 recorded no timing settings and had no hold; later ones record
    them. The header says how the run was timed, and a merged page which tasks had the hold."""
    import importlib.util

    from evaluator import report

    spec = importlib.util.spec_from_file_location("results_page", REPO_ROOT / "scripts/results_page.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    old = _run()
    assert old.timing == {} and "without the pre-call hold" in report.hold_line(old)
    held = old.model_copy(update={"started_at": "2099-01-01T00:00:00+00:00", "tasks": old.tasks[:1],
                                  "timing": {"spin_us": 300.0}})
    assert report.hold_line(held).startswith("Every timed call was preceded by a 300 µs hold")
    off = held.model_copy(update={"timing": {"spin_us": 0.0}})
    assert report.hold_line(off) == "Timed without the pre-call hold."
    assert report.hold_line(held) in report.markdown(held, "x")
    note = page.mixed_holds([old, held])
    assert note.startswith("**The rows were not all timed the same way.**")
    assert f"(the pre-call hold): {old.tasks[0].slug}." in note
    assert page.mixed_holds([old, old]) == ""


def test_a_task_stopped_part_way_shows_its_kept_workloads_and_why_it_stopped() -> None:
    from evaluator import report

    run = _run()
    t = run.tasks[0]
    kept = t.workloads[:1]
    run.tasks[0] = t.model_copy(update={"status": "timeout", "error_code": "eval:user:timeout", "workloads": kept,
                                        "reason": "no result in time (stopped while judging W2; kept: the results of W1)"})
    page = report.markdown(run, "cmd")
    assert f"| {t.slug} | (rest) | timeout: no result in time (stopped while judging W2" in page
    assert f"| {t.slug} | {kept[0].name} | yes |" in page
    assert "(rest)" not in report.markdown(_run(), "cmd")  # a finished task has no such row


def test_a_merged_task_is_held_to_the_bound_of_its_own_runs_ceilings() -> None:
    """On a merged page each task's SOL fraction is its own run's; so is the bound that sets its
    target, whatever ceilings the latest run of another task measured."""
    run = _run()
    slug = run.tasks[0].slug
    slow_math = run.hardware.model_copy(update={"peak_tflops": {k: 1e-6 for k in run.hardware.peak_tflops}})
    assert {v.bound for v in suite_report.verdicts(run, _dtypes()) if v.task == slug} == {"memory"}
    own = suite_report.verdicts(run, _dtypes(), hardware_of={slug: slow_math})
    assert {v.bound for v in own if v.task == slug} == {"compute"}
    assert {v.bound for v in own if v.task != slug} == {"memory"}
