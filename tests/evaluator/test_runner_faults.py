"""A kernel that hangs, crashes, exits early or floods its output fails its task with a reason,
and the next task still runs in a fresh process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from evaluator.runner import OUTPUT_CAP, RunOptions, run
from tasks.registry import get_task

pytestmark = pytest.mark.interpreter

HEADER = "import os, sys, time, signal\nimport torch\nimport triton\n\n@triton.jit\ndef _k(x):\n    pass\n\n"
EXPERT = get_task("silu-and-mul").expert_path


def _kernel(tmp_path: Path, name: str, body: str, entry: str = "silu_and_mul") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + f"def {entry}(x):\n{body}\n")
    return path


def _run(paths: list[Path], timeout_s: float = 60):
    task = get_task("silu-and-mul")
    by_call = iter(paths)
    return run([task] * len(paths), lambda _t: next(by_call),
               RunOptions(command="check", smoke=True, interpret=True, timeout_s=timeout_s), candidate_path=paths[0])


def test_hang_is_killed_with_its_process_group_and_the_next_task_runs(tmp_path):
    hang = _kernel(tmp_path, "hang", "    time.sleep(3600)")
    started = time.monotonic()
    result = _run([hang, EXPERT], timeout_s=20)
    assert time.monotonic() - started < 120
    first, second = result.tasks
    assert first.status == "timeout" and first.error_code == "eval:user:timeout"
    assert "process group was killed" in first.reason
    assert second.status == "correct"


def test_a_forked_child_fails_the_task_and_dies_with_it(tmp_path):
    body = "    if os.fork() == 0:\n        os.setsid()\n        time.sleep(3600)\n    time.sleep(3)\n    raise RuntimeError('x')"
    result = _run([_kernel(tmp_path, "fork", body), EXPERT], timeout_s=60)
    first, second = result.tasks
    assert first.error_code == "eval:user:process", first.reason
    assert "may not start processes" in first.reason and first.verdict == "rejected-cheat"
    assert second.status == "correct"


@pytest.mark.parametrize("name, body, status, code, text", [
    ("segfault", "    os.kill(os.getpid(), signal.SIGSEGV)", "crashed", "eval:user:crash", "SIGSEGV"),
    ("early-exit", "    os._exit(0)", "crashed", "eval:user:exit", "without reporting"),
    ("exit-nonzero", "    os._exit(3)", "crashed", "eval:user:crash", "status 3"),
    ("raises", "    raise RuntimeError('boom')", "incorrect", "eval:user:wrong-answer", "RuntimeError: boom"),
])
def test_crashes_fail_with_a_reason(tmp_path, name, body, status, code, text):
    result = _run([_kernel(tmp_path, name, body), EXPERT])
    first, second = result.tasks
    assert (first.status, first.error_code) == (status, code)
    assert text in first.reason
    assert second.status == "correct"


def test_system_exit_at_import_is_an_import_failure(tmp_path):
    path = tmp_path / "exits.py"
    path.write_text("import sys\nsys.exit(0)\n")
    (task,) = _run([path]).tasks
    assert task.status == "error" and task.error_code == "eval:user:import"


def test_missing_entry_point(tmp_path):
    (task,) = _run([_kernel(tmp_path, "other", "    return x", entry="something_else")]).tasks
    assert task.error_code == "eval:user:entry-point" and "silu_and_mul" in task.reason


def test_output_flood_fails_the_task_and_the_tail_is_capped(tmp_path):
    body = "    sys.stdout.write('x' * (1 << 20) * 8)\n    sys.stdout.flush()\n    time.sleep(5)\n    raise RuntimeError('x')"
    (task,) = _run([_kernel(tmp_path, "flood", body)]).tasks
    assert task.error_code == "eval:user:output-flood", task.reason
    assert len(task.stdout_tail) <= 8000 + 100
    assert OUTPUT_CAP < 8 * 2**20


def test_forged_result_line_on_stdout_is_ignored(tmp_path):
    forged = '{"type": "result", "result": {"slug": "silu-and-mul", "status": "correct"}}'
    body = f"    print({forged!r})\n    raise RuntimeError('wrong')"
    (task,) = _run([_kernel(tmp_path, "forge", body)]).tasks
    assert task.status == "incorrect"


def test_a_timeout_part_way_keeps_the_workloads_already_judged(tmp_path):
    """The expert's code, made to hang on the second shape it sees: S1 is judged and kept, the task
    still times out, and the reason names where it stopped (a bench that runs out of time on its
    last workload no longer loses the others)."""
    path = tmp_path / "late_hang.py"
    path.write_text(EXPERT.read_text() + (
        "\n\n_expert_entry = silu_and_mul\n_shapes = []\n\n\ndef silu_and_mul(x):\n"
        "    import time\n    if tuple(x.shape) not in _shapes:\n        _shapes.append(tuple(x.shape))\n"
        "    if len(_shapes) > 1:\n        time.sleep(3600)\n    return _expert_entry(x)\n"))
    (task,) = _run([path], timeout_s=40).tasks
    assert task.status == "timeout" and task.error_code == "eval:user:timeout"
    assert [w.name for w in task.workloads] == ["S1"] and task.workloads[0].correct
    assert "stopped while judging S2; kept: the results of S1" in task.reason


def test_a_multi_task_run_records_the_clocks_at_its_end(monkeypatch):
    """The fingerprint's clocks_start is the first task's, clocks_end the last task's."""
    from evaluator import runner
    from evaluator.result import Fingerprint, TaskResult

    stamps = iter([({"sm": "1980"}, {"sm": "1755"}), ({"sm": "1755"}, {"sm": "1410"})])

    def fake_run_task(task, candidate, opts, interpret, seeds, on_progress, sandboxing):  # noqa: ANN001
        start, end = next(stamps)
        fp = Fingerprint(engine_version="t", python="3", torch="t", triton="t", platform="p", hostname_hash="h",
                         clocks_start=start, clocks_end=end)
        return TaskResult(slug=task.slug, status="correct"), fp

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    tasks = [get_task("silu-and-mul"), get_task("fused-add-rmsnorm")]
    result = runner.run(tasks, lambda t: t.expert_path, RunOptions(command="check", smoke=True, interpret=True))
    assert result.fingerprint.clocks_start == {"sm": "1980"} and result.fingerprint.clocks_end == {"sm": "1410"}


def _integrity_runs(monkeypatch, outcomes):  # noqa: ANN001
    """``runner.run_task`` replaced by one that returns ``outcomes`` in turn (one per judge process),
    recording the seeds each got."""
    from evaluator import runner
    from evaluator.result import TaskResult

    runs = iter(outcomes)
    seen: list[dict] = []

    def fake_run_task(task, candidate, opts, interpret, seeds, on_progress, sandboxing):  # noqa: ANN001
        seen.append(seeds)
        status, code, reason = next(runs)
        return TaskResult(slug=task.slug, status=status, error_code=code, reason=reason,
                          verdict="clean" if status == "correct" else "rejected-cheat"), None

    monkeypatch.setattr(runner, "run_task", fake_run_task)
    return runner, seen


ESCAPED = ("incorrect", "eval:user:timing-integrity", "candidate at W2: the judge's clock saw 837 us per call more")


def test_a_timing_integrity_rejection_that_does_not_repeat_gives_the_reruns_result(monkeypatch):
    """Judged again in fresh processes, the honest kernel passes: the task's result is the rerun's
    (its seeds in the schedule), marked suspicious with a finding that quotes the first rejection."""
    runner, seen = _integrity_runs(monkeypatch, [ESCAPED, ("correct", "", "")])
    task = get_task("silu-and-mul")
    result = runner.run([task], lambda t: t.expert_path, RunOptions(command="bench", smoke=True, interpret=True))
    (only,) = result.tasks
    assert len(seen) == 2 and seen[0] != seen[1]
    assert only.status == "correct" and not only.error_code and only.verdict == "suspicious"
    assert only.findings[0].kind == "timing-integrity" and "837 us" in only.findings[0].message
    assert "did not repeat" in only.findings[0].message
    assert all(result.seed_schedule[f"silu-and-mul/{k}"] == v for k, v in seen[1].items())


def test_a_timing_integrity_rejection_that_repeats_stands(monkeypatch):
    runner, seen = _integrity_runs(monkeypatch, [ESCAPED, ESCAPED])
    result = runner.run([get_task("silu-and-mul")], lambda t: t.expert_path,
                        RunOptions(command="bench", smoke=True, interpret=True))
    (only,) = result.tasks
    assert len(seen) == 2 and only.error_code == "eval:user:timing-integrity" and only.verdict == "rejected-cheat"
    assert only.reason.startswith("candidate at W2") and "confirmed in fresh processes: the rerun rejected again" in only.reason
    assert all(result.seed_schedule[f"silu-and-mul/{k}"] == v for k, v in seen[0].items())


def test_a_rerun_that_fails_otherwise_confirms_the_rejection(monkeypatch):
    runner, seen = _integrity_runs(monkeypatch, [ESCAPED, ("crashed", "eval:user:crash", "died with SIGSEGV")])
    result = runner.run([get_task("silu-and-mul")], lambda t: t.expert_path,
                        RunOptions(command="bench", smoke=True, interpret=True))
    (only,) = result.tasks
    assert only.error_code == "eval:user:timing-integrity"
    assert "the rerun ended eval:user:crash: died with SIGSEGV" in only.reason


def test_no_rerun_when_turned_off_or_for_other_failures(monkeypatch):
    runner, seen = _integrity_runs(monkeypatch, [ESCAPED])
    opts = RunOptions(command="bench", smoke=True, interpret=True, timing={"integrity_reruns": 0.0})
    assert runner.run([get_task("silu-and-mul")], lambda t: t.expert_path, opts).tasks[0].error_code == ESCAPED[1]
    runner, seen = _integrity_runs(monkeypatch, [("incorrect", "eval:user:wrong-answer", "wrong")])
    runner.run([get_task("silu-and-mul")], lambda t: t.expert_path, RunOptions(command="bench", smoke=True, interpret=True))
    assert len(seen) == 1


def test_no_rerun_past_the_runs_deadline(monkeypatch):
    """The portal passes its Celery limit as the run's deadline: a rerun that could not finish
    inside it is not started, and the rejection says so."""
    runner, seen = _integrity_runs(monkeypatch, [ESCAPED])
    opts = RunOptions(command="bench", smoke=True, interpret=True, timeout_s=600, deadline=time.monotonic() + 300)
    (only,) = runner.run([get_task("silu-and-mul")], lambda t: t.expert_path, opts).tasks
    assert len(seen) == 1 and only.error_code == ESCAPED[1]
    assert "not judged again in fresh processes: the run has no time left for it" in only.reason
