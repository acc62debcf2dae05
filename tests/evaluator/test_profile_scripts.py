"""The profiling scripts the next device call runs: the ncu CSV summary and the one-call driver."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import types

import pytest
import torch

from tasks.registry import REPO_ROOT

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def _summary():
    spec = importlib.util.spec_from_file_location("ncu_summary", REPO_ROOT / "scripts/ncu_summary.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(kid: str, kernel: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","9","python3","h","{kernel}(int, float *)","1","7","(128, 1, 1)","(56, 4, 1)","0","9.0",'
            f'"S","{metric}","{unit}","{value}"')


def test_summary_reads_ncu_details_after_its_preamble_one_row_per_launch() -> None:
    text = "\n".join([
        "==PROF== Connected to process 9", "a line the program printed", HEADER,
        _row("0", "_gemm", "Duration", "msecond", "1.25"),
        _row("0", "_gemm", "DRAM Throughput", "%", "16.04"),
        # ncu writes "Memory Throughput" twice: in Speed Of Light (%), then in Memory Workload
        # Analysis (a rate); the column is the percentage, whichever comes last.
        _row("0", "_gemm", "Memory Throughput", "%", "71.16"),
        _row("0", "_gemm", "Memory Throughput", "Gbyte/s", "985.83"),
        _row("0", "_gemm", "Registers Per Thread", "register/thread", "168"),
        _row("0", "_gemm", "Dynamic Shared Memory Per Block", "Kbyte/block", "65.54"),  # ncu 2025's unit
        _row("0", "_gemm", "Static Shared Memory Per Block", "byte/block", "1,024"),
        _row("0", "_gemm", "Achieved Occupancy", "%", "12.1"),
        _row("0", "_gemm", "Theoretical Occupancy", "%", "12.5"),
        _row("1", "_reduce", "Duration", "nsecond", "4,480"),
    ])
    mod = _summary()
    kernels = mod.parse(text)
    assert [k["name"] for k in kernels] == ["_gemm(int, float *)", "_reduce(int, float *)"]
    page = mod.markdown("fp8-blockwise-gemm W4 (expert)", kernels)
    gemm = next(ln for ln in page.splitlines() if ln.startswith("| `_gemm`"))
    cells = [c.strip() for c in gemm.strip("|").split("|")]
    assert cells[:6] == ["`_gemm`", "(56, 4, 1)", "(128, 1, 1)", "1,250.0", "16.0", "71.2"]
    assert "| 168 | 65.0 | 12 / 12.5 |" in gemm  # 65.54 kB dynamic (64 KiB) + 1 KiB static
    assert "| `_reduce` | (56, 4, 1) | (128, 1, 1) | 4.5 | - |" in page


def test_summary_refuses_a_shared_memory_unit_it_does_not_know() -> None:
    text = "\n".join([HEADER, _row("0", "_k", "Dynamic Shared Memory Per Block", "furlong/block", "3")])
    mod = _summary()
    with pytest.raises(ValueError, match="furlong"):
        mod.markdown("t", mod.parse(text))


def test_summary_refuses_input_without_the_csv_header() -> None:
    try:
        _summary().parse("==PROF== No kernels were profiled.\n")
    except ValueError as exc:
        assert "no ncu CSV header" in str(exc)
    else:
        raise AssertionError("parse accepted input with no CSV")


def _profile(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts/profile_kernel.py"), *args, "--device", "cpu",
                           "--warmup", "1"], capture_output=True, text=True, env=env, timeout=300)


def test_profile_driver_runs_the_expert_on_a_workload_without_a_gpu() -> None:
    done = _profile("silu-and-mul", "S1")
    assert done.returncode == 0, done.stderr
    assert "silu-and-mul S1 expert: one profiled call, 1 output(s)" in done.stdout
    bad = _profile("silu-and-mul", "W9")
    assert bad.returncode != 0 and "has no workload 'W9' (it has W1, W2, W3, S1" in bad.stderr


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / f"scripts/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_profile_driver_names_the_routes_the_kernel_timed(monkeypatch, capsys) -> None:
    """A kernel that timed routes on its first call (``TIMED_CHOICES``) has them printed after the
    warm-up, so the profile says which route its kernels belong to (device_profile.sh copies the
    lines into profile.md). The expert here is a stand-in: the baseline's own function."""
    from tasks.registry import get_task

    mod = _load("profile_kernel")
    task = get_task("silu-and-mul")
    real_load = mod.load

    def load(path, name):
        if path != task.expert_path:
            return real_load(path, name)
        stand_in = real_load(task.baseline_path, "_stand_in_expert")
        return types.SimpleNamespace(silu_and_mul=stand_in.silu_and_mul,
                                     TIMED_CHOICES={"route M=1": "fast (fast 1 us, slow 2 us)"})

    monkeypatch.setattr(mod, "load", load)
    assert mod.run(task, "S1", "expert", 1, torch.device("cpu")) == 1
    assert "timed choice: route M=1: fast (fast 1 us, slow 2 us)" in capsys.readouterr().out


def test_profile_vs_bench_sets_the_kernels_time_beside_the_bench_median(tmp_path) -> None:
    """Two launches (1.25 ms + 4.48 µs) against a bench median of 2.5 ms and an SOL of 1 ms: the
    kernels alone are at 79% of SOL where the bench's median says 40%."""
    (tmp_path / "fp8-blockwise-gemm-W4.csv").write_text("\n".join([
        "==PROF== preamble", HEADER,
        _row("0", "_gemm", "Duration", "msecond", "1.25"),
        _row("1", "_reduce", "Duration", "nsecond", "4,480"),
    ]))
    (tmp_path / "other-task-W9.csv").write_text(HEADER)  # not in the suite: skipped
    suite = {"tasks": [{"slug": "fp8-blockwise-gemm", "workloads": [{
        "name": "W4", "sol_ms": 1.0,
        "timings": {"candidate": {"median_ms": 2.5, "min_ms": 1.3}},
    }]}]}
    mod = _load("profile_vs_bench")
    (row,) = mod.rows(suite, tmp_path)
    assert row["kernels_us"] == pytest.approx(1254.48)
    assert row["sol_bench"] == pytest.approx(0.4)
    assert row["sol_kernels"] == pytest.approx(1000 / 1254.48)
    assert "| fp8-blockwise-gemm | W4 | 1,254.5 | 2,500.0 | 1,300.0 | 1,000.0 | 40% | 80% |" in mod.markdown([row])


def test_profile_vs_bench_refuses_a_duration_unit_it_does_not_know() -> None:
    mod = _load("profile_vs_bench")
    with pytest.raises(ValueError, match="fortnight"):
        mod.kernel_us("\n".join([HEADER, _row("0", "_k", "Duration", "fortnight", "1")]))


def test_timing_ab_summary_and_its_refusal_without_a_gpu() -> None:
    mod = _load("timing_ab")
    stats = mod.summarize({"engine": [4.0, 1.0, 3.0, 2.0, 5.0], "spin": [7.0]})
    assert stats["engine"][:2] == (3.0, 1.0)
    assert stats["spin"] == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError, match="no samples for no-sync"):
        mod.summarize({"no-sync": []})
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/timing_ab.py"), "causal-conv1d:W1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and "needs a GPU" in proc.stderr


def test_anticheat_report_shows_each_providers_round_trip_by_half() -> None:
    """The expert table of the device anti-cheat report carries the round trip the escape check
    compares (median, then first/second half): a W1 note can be read as transient or steady."""
    from evaluator.result import Timing

    mod = _load("anticheat_device")

    def timing(res: float | None, first: float | None, second: float | None) -> Timing:
        return Timing(median_ms=0.05, q1_ms=0.05, q3_ms=0.05, mean_ms=0.05, min_ms=0.05, count=8, rel_stderr=0.0,
                      host_over_device=1.0, compile_s=0.0, residual_ms=res, residual_first_half_ms=first,
                      residual_second_half_ms=second)

    cell = mod.round_trip_us({"expert": timing(0.040, 0.041, 0.039), "candidate": timing(0.095, 0.150, 0.042),
                              "baseline": timing(None, None, None)})
    assert cell == "candidate 95 (150/42), expert 40 (41/39)"
    row = {"task": "moe-unpermute-combine", "status": "correct", "verdict": "suspicious", "speedup": {"W1": 3.1},
           "host_over_device": {"W1": 1.2}, "round_trip_us": {"W1": cell}, "findings": ["note"], "reason": "",
           "wall_s": 9.0}
    md = mod.markdown({"part": "experts", "when": "now", "gpu": "H200", "sandbox": "bwrap", "experts_bench": [row]})
    assert "| round trip µs (1st/2nd half) |" in md
    assert "| W1: candidate 95 (150/42), expert 40 (41/39) | note |" in md


def test_anticheat_device_run_covers_the_whole_planted_corpus() -> None:
    """Every planted cheat in tests/evaluator/cheats runs on the GPU with the code it must fail
    with there: a cheat added to the corpus and not to the device script is caught here."""
    mod = _load("anticheat_device")
    planted = {p.name for p in mod.CHEATS.glob("*.py") if p.name != "__init__.py"}
    assert planted == set(mod.EXPECTED)
    assert set(mod.EXPECTED) >= mod.TIMING_CHEATS


def test_anticheat_timing_overrides_are_checked_before_any_device_time() -> None:
    """``--timing spin_us=300`` reaches every judged run of the device anti-cheat (the spin's
    side-stream check), parsed by the CLI's own parser; a key the judge does not know stops the
    script at once."""
    mod = _load("anticheat_device")
    assert mod.timing_overrides(["spin_us=300", "max_checks=2"]) == {"spin_us": 300.0, "max_checks": 2.0}
    with pytest.raises(SystemExit, match="KEY=NUMBER"):
        mod.timing_overrides(["spin_us"])
    from evaluator import errors

    with pytest.raises(errors.EvaluatorError, match="unknown timing option"):
        mod.timing_overrides(["spinus=300"])


def _timing(median_ms: float, min_ms: float, rel_stderr: float, q1_ms: float | None = None) -> dict[str, float]:
    t = {"median_ms": median_ms, "min_ms": min_ms, "rel_stderr": rel_stderr}
    return t if q1_ms is None else {**t, "q1_ms": q1_ms}


def test_same_kernel_spread_pairs_the_expert_with_itself_and_splits_short_calls(tmp_path) -> None:
    """Two workloads timed as expert and candidate (one short, one long), one without an expert:
    ratios, the claimed spread (0.03 and 0.04 combine to 0.05) and the short/long split."""
    suite = {"tasks": [{"slug": "t", "workloads": [
        {"name": "W1", "timings": {"expert": _timing(0.100, 0.080, 0.03, 0.09),
                                   "candidate": _timing(0.110, 0.0806, 0.04, 0.0945)}},
        {"name": "W2", "timings": {"expert": _timing(2.0, 1.9, 0.003), "candidate": _timing(2.03, 1.9, 0.004)}},
        {"name": "W3", "timings": {"candidate": _timing(1.0, 1.0, 0.01)}},
    ]}]}
    mod = _load("same_kernel_spread")
    short, long = mod.pairs(suite)
    assert (short.workload, long.workload) == ("W1", "W2")
    assert short.median_ratio == pytest.approx(1.1) and short.min_ratio == pytest.approx(1.0075)
    assert short.q1_ratio == pytest.approx(1.05) and math.isnan(long.q1_ratio)  # W2's results lack q1
    assert short.combined_stderr == pytest.approx(0.05)
    assert short.z == pytest.approx(abs(math.log(1.1)) / 0.05)  # 1.9: within two
    s_short, s_long = mod.split([short, long], short_ms=0.5)
    assert (s_short.n, s_short.beyond_2se, s_short.minima_within_1pct) == (1, 0, 1)
    assert s_short.worst_median_dev == pytest.approx(0.1)
    assert (s_long.n, s_long.beyond_2se) == (1, 1)  # 1.5% apart against a claimed 0.5%
    (tmp_path / "r.json").write_text(json.dumps(suite))
    out = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/same_kernel_spread.py"), str(tmp_path / "r.json")],
                         capture_output=True, text=True, check=True).stdout
    assert "| calls under 0.5 ms | 1 | 10.0% | 5.0% | 0.8% | 0 of 1 | 1 of 1 |" in out
    assert "| calls of 0.5 ms or more | 1 | 1.5% | — | 0.0% | 1 of 1 | 1 of 1 |" in out
    assert "| calls under 0.5 ms | 10.0% / 5.0% / 0.8% | 0 / 0 of 1 |" in out
    assert "| t | W1 | 100.0 | 110.0 | 1.100 | 5.00% | 1.9 | 1.050 | 80.0 | 80.6 | 1.008 | — |" in out


def test_same_kernel_spread_shows_each_workers_halves_when_recorded() -> None:
    halves = {"median_first_half_ms": 0.12, "median_second_half_ms": 0.1}
    suite = {"tasks": [{"slug": "t", "workloads": [{"name": "W1", "timings": {
        "expert": {**_timing(0.1, 0.08, 0.01), "median_first_half_ms": 0.1, "median_second_half_ms": 0.1},
        "candidate": {**_timing(0.11, 0.08, 0.01), **halves}}}]}]}
    (pair,) = _load("same_kernel_spread").pairs(suite)
    assert pair.halves_us == "100.0/100.0 · 120.0/100.0"  # the candidate's worker was slow early


def test_same_kernel_spread_says_so_when_nothing_pairs(tmp_path) -> None:
    (tmp_path / "r.json").write_text('{"tasks": [{"slug": "t", "workloads": []}]}')
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/same_kernel_spread.py"), str(tmp_path / "r.json")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "no workload" in proc.stderr


STUB_PYTHON = r'''#!/bin/sh
# Stands in for python3 on a GPU machine: records the engine's bench calls and writes a result
# with the expert timed twice; pip is a no-op; anything else is the real interpreter.
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "evaluator" ]; then
  echo "$*" >>"$CALLS"
  if [ "$3" = "ceilings" ]; then echo '{"gpu": "NVIDIA H100 80GB HBM3", "copy_GBps": 3000.0}' >"$5"; exit 0; fi
  while [ $# -gt 0 ]; do if [ "$1" = "--json" ]; then out="$2"; fi; shift; done
  t='{"median_ms": 0.1, "min_ms": 0.08, "rel_stderr": 0.01}'
  echo "{\"tasks\": [{\"slug\": \"s\", \"workloads\": [{\"name\": \"W1\", \"timings\": {\"expert\": $t, \"candidate\": $t}}]}]}" >"$out"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
'''


def test_spin_aa_driver_benches_each_task_with_and_without_the_spin_in_alternating_order(tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "python3"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    smi = bin_dir / "nvidia-smi"  # an H100: no stored ceilings, so they are measured first
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3'\n")
    smi.chmod(0o755)
    out, calls = tmp_path / "out", tmp_path / "calls.txt"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out), "CALLS": str(calls),
           "REAL_PYTHON": sys.executable, "D2K_CEILINGS_CACHE": str(tmp_path / "ceilings.json")}
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts/device_spin_aa.sh"), "--spin-us", "250", "--tasks", "a b"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("-m evaluator ceilings --output")  # the card's own ceilings, before any bench
    assert json.loads((out / "ceilings.json").read_text())["gpu"] == "NVIDIA H100 80GB HBM3"
    order = [(line.split("--task ")[1].split()[0], line.split("spin_us=")[1].split()[0]) for line in lines[1:]]
    assert order == [("a", "0"), ("a", "250"), ("b", "250"), ("b", "0")]
    assert all("--compare expert" in line for line in lines[1:])
    report = (out / "aa.md").read_text()
    assert "## spin_us = 0" in report and "## spin_us = 250" in report
    assert report.count("| calls under 0.5 ms | 2 |") == 2  # both tasks' pairs in each setting


def test_a_result_stopped_by_the_tasks_time_limit_is_benched_again_whichever_provider_it_stopped() -> None:
    """Session 12's qk-rmsnorm-rope got the 51 s left before the round's deadline and was stopped
    while the trusted expert ran: the round kept that as the task's result. Such a result is cut
    by the deadline, like a candidate's timeout; a correct run, or a per-call limit, is not."""
    mod = _load("round_cut")
    qk = json.loads((REPO_ROOT / "docs/results/h100-runs/s12-deadline-bench-qk-rmsnorm-rope.json").read_text())
    assert mod.cut_by_time_limit(qk)
    done = json.loads((REPO_ROOT / "docs/results/h100-runs/bench-silu-and-mul.json").read_text())
    assert not mod.cut_by_time_limit(done)

    def task(code: str, reason: str) -> dict:
        return {"tasks": [{"error_code": code, "reason": reason}]}

    assert mod.cut_by_time_limit(task("eval:user:timeout", "the candidate did not finish"))
    assert mod.cut_by_time_limit(task("eval:infra:trusted-provider", "... within the task's time limit (one limit ...)"))
    assert not mod.cut_by_time_limit(task("eval:infra:trusted-provider", "OutOfMemoryError: CUDA out of memory"))
    assert not mod.cut_by_time_limit(task("eval:user:wrong-answer", "tolerance"))


def test_a_round_defers_a_task_by_its_longest_finished_bench_on_either_card(tmp_path) -> None:
    """scripts/round_need.py: the longest wall time among the task's finished committed results,
    H100 and H200 alike, with the margin for a cold compile; a result cut by a time limit, another
    task's, or none at all gives nothing to go on (0: the round tries the task)."""
    mod = _load("round_need")

    def write(card: str, slug: str, wall: float, code: str | None = None) -> None:
        (tmp_path / card).mkdir(exist_ok=True)
        task = {"slug": slug, "wall_s": wall, "error_code": code, "reason": "the candidate did not finish"}
        (tmp_path / card / f"bench-{slug}.json").write_text(json.dumps({"tasks": [task]}))

    write("h100-runs", "a", 100.0)
    write("h200-runs", "a", 150.0)
    assert mod.longest_wall_s("a", tmp_path) == 150.0
    assert mod.need_s("a", tmp_path) == math.ceil(150.0 * mod.FACTOR + mod.SLACK_S)
    write("h200-runs", "a", 400.0, code="eval:user:timeout")  # cut by the deadline: not a need
    assert mod.need_s("a", tmp_path) == math.ceil(100.0 * mod.FACTOR + mod.SLACK_S)
    write("h100-runs", "b", 0.0)  # no wall time recorded
    assert mod.need_s("b", tmp_path) == 0 and mod.need_s("missing", tmp_path) == 0
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/round_need.py"), "a", "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == str(mod.need_s("a", tmp_path))
    # The committed rows: session 35's gated-delta (215 s, warm) asks more than the 259 s that cut it.
    assert mod.need_s("gated-delta-rule-chunked") > 259


def test_host_overhead_times_each_file_alternately_and_reports_its_choices(tmp_path) -> None:
    """The per-call host-cost probe (scripts/host_overhead.py) on the CPU: one row per file given,
    the tree's expert by name and a copy of it by path, with the CPU's wall equal to its host
    time and no event time; a workload the task lacks is refused by name."""
    copy = tmp_path / "copy.py"
    copy.write_text((REPO_ROOT / "references/silu-and-mul/expert.py").read_text()
                    + "\nTIMED_CHOICES = {'route': 'the copy'}\n")
    out = tmp_path / "ho.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, str(REPO_ROOT / "scripts/host_overhead.py"), "silu-and-mul", "S1", "expert", str(copy),
           "--calls", "3", "--warmup", "1", "--device", "cpu", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    res = json.loads(out.read_text())["results"]
    assert list(res) == ["expert", str(copy)]
    for row in res.values():
        assert row["host_us"] > 0 and row["wall_us"] == row["host_us"] and row["event_us"] is None
    assert res[str(copy)]["choices"] == {"route": "the copy"} and res["expert"]["choices"] == {}
    assert res["expert"]["path"].endswith("references/silu-and-mul/expert.py")
    from tasks.registry import get_task

    with pytest.raises(SystemExit, match="silu-and-mul has no workload 'W9'"):
        _load("host_overhead").measure(get_task("silu-and-mul"), "W9", ["expert"], 1, 0, 0.0, torch.device("cpu"))


def test_w4a16_gemm_probe_times_every_part_against_the_experts_internals(tmp_path) -> None:
    """The w4a16 prefill probe (scripts/w4a16_gemm_probe.py) on the CPU at smoke S4: it reaches
    the expert's unpack kernel, pointer GEMM and every persistent candidate by the names it uses
    on the device, each GEMM matches ``torch.mm``, and nothing failed to build."""
    out = tmp_path / "probe.json"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, str(REPO_ROOT / "scripts/w4a16_gemm_probe.py"), "--workload", "S4", "--device", "cpu",
           "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["M"], row["N"], row["K"]) == (144, 72, 256)
    assert not [k for k, v in row.items() if isinstance(v, str) and v.startswith("failed")]
    errors = {k: v for k, v in row.items() if k.endswith(" error")}
    persistent = [k for k in errors if k.startswith("persistent ")]
    spec = importlib.util.spec_from_file_location("_w4a16_expert", REPO_ROOT / "references/w4a16-awq-gemm/expert.py")
    expert = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(expert)
    assert len(persistent) >= len(expert._PERSISTENT_CONFIGS)
    assert any(k.startswith("tile-a-program ") for k in errors) and "pointer gemm error" in errors
    assert all(v < 1e-3 for v in errors.values()), errors
    assert row["unpack"] > 0 and row["compile"] == "not timed on the CPU"


def test_first_call_probe_alternates_plain_and_recorded_first_calls_on_fresh_modules(tmp_path) -> None:
    """The first-call probe (scripts/first_call_probe.py) on the CPU: each round loads the kernel
    afresh and calls it once plain and once inside the ATen recorder, the order alternating; the
    recorded call reports the ops it saw (the launcher's allocation at least), and each row holds
    the picks of its own module, read as the worker reads them (``timed_picks``); the host cost of
    an ATen op is reported plain and recorded."""
    copy = tmp_path / "copy.py"
    copy.write_text((REPO_ROOT / "references/silu-and-mul/expert.py").read_text()
                    + "\nTIMED_CHOICES = {'route': 'the copy'}\n")
    out, md = tmp_path / "fcp.json", tmp_path / "fcp.md"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, str(REPO_ROOT / "scripts/first_call_probe.py"), "silu-and-mul", "S1", "--rounds", "2",
           "--file", str(copy), "--device", "cpu", "--json", str(out), "--markdown", str(md)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [(r["round"], r["mode"]) for r in rows] == [(0, "plain"), (0, "recorded"), (1, "recorded"), (1, "plain")]
    # The recorder's Python callback makes every dispatched op dearer on the host (7x here).
    assert 0 < report["host_cost_us"]["plain"] < report["host_cost_us"]["recorded"]
    for row in rows:
        assert row["picks"] == {"choice route": "the copy"}
        assert row["first_call_ms"] > 0
        assert bool(row["ops"]) == (row["mode"] == "recorded")
    assert any(op.startswith("aten::empty") for op in rows[1]["ops"]), rows[1]["ops"]
    assert "| 1 | recorded | the copy |" in md.read_text()
