"""The planted cheat corpus (tests/evaluator/cheats/): every trick fails with a readable reason.

Each file's docstring says what it tries and which mechanism catches it (EVALUATION.md,
Anti-cheat). These run the real engine in Triton's interpreter: a judge process per task and
the kernel in its own sandboxed worker. The tricks that only show in the timing phase run
``bench`` with CPU timing, which exercises the same protocol (fresh inputs per call, checked
timed calls, the judge's clock) with the host clock standing in for CUDA events.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest

from evaluator import errors, sandbox
from evaluator.runner import RunOptions, run
from evaluator.static_scan import scan_file
from tasks.registry import REPO_ROOT, get_task

pytestmark = pytest.mark.interpreter
CHEATS = Path(__file__).parent / "cheats"
TASK = "silu-and-mul"
SANDBOX_OK, SANDBOX_WHY = sandbox.probe()
# CI (scripts/test.sh) sets D2K_TEST_SANDBOX=require: there a missing sandbox fails these tests
# instead of skipping them, so a broken bubblewrap install cannot pass unnoticed.
if not SANDBOX_OK and os.environ.get("D2K_TEST_SANDBOX") == "require":
    raise RuntimeError(f"D2K_TEST_SANDBOX=require but bubblewrap is unusable here: {SANDBOX_WHY}")
needs_sandbox = pytest.mark.skipif(not SANDBOX_OK, reason=f"bubblewrap unusable here: {SANDBOX_WHY}")
# The interpreter's host-clock times are noisy on a loaded two-core machine: the escape thresholds
# are widened (ms), which still rejects the 300 ms that escape_after_timer.py hides per call.
CPU_TIMING = {"min_count": 24, "max_count": 60, "budget_s": 2.0, "warmup": 2, "check_probability": 0.3,
              "escape_finding": [1.0, 10.0], "escape_reject": [1.0, 20.0]}


def _judge(name: str | Path, command: str = "check", timeout_s: float = 120):
    path = name if isinstance(name, Path) else CHEATS / name
    opts = RunOptions(command=command, smoke=True, interpret=True, timeout_s=timeout_s,
                      cpu_timing=command == "bench", timing=CPU_TIMING if command == "bench" else {},
                      workloads=["S1"])
    (task,) = run([get_task(TASK)], lambda _t: path, opts, candidate_path=path).tasks
    return task


def _failed_rules(task) -> list[str]:
    return [t.rule for w in task.workloads for t in w.trials if not t.passed]


# (file, error codes accepted, text the reason must hold, the verdict or None)
CHECK_CASES = [
    ("torch_fallback.py", {errors.USER_FORBIDDEN}, "aten::", "rejected-cheat"),
    ("pointer_cache.py", {errors.USER_WRONG_ANSWER}, "tolerance", None),
    ("input_view.py", {errors.USER_WRONG_ANSWER}, "alias", None),
    ("lazy_output.py", {errors.USER_WRONG_ANSWER}, "plain torch.Tensor", None),
    ("patch_timer.py", {errors.USER_TAMPER}, "time.perf_counter", "rejected-cheat"),
    ("patch_harness_clock.py", {errors.USER_TAMPER}, "evaluator.worker._perf", "rejected-cheat"),
    ("patch_comparison.py", {errors.USER_WRONG_ANSWER}, "tolerance", None),
    ("forge_channel.py", {errors.USER_PROTOCOL}, "forged", "rejected-cheat"),
    ("early_exit.py", {errors.USER_EXIT}, "without reporting", None),
    ("segfault.py", {errors.USER_CRASH}, "SIGSEGV", None),
    ("host_oom.py", {errors.USER_HOST_OOM}, "MemoryError", None),
    ("gpu_oom.py", {errors.USER_HOST_OOM}, "allocate", None),  # on a GPU: eval:user:gpu-oom
    ("spawn.py", {errors.USER_PROCESS}, "sleep", "rejected-cheat"),
    ("fork_python.py", {errors.USER_PROCESS}, "evaluator.worker", "rejected-cheat"),
    ("stdout_flood.py", {errors.USER_OUTPUT_FLOOD}, "MiB", None),
    # In the interpreter a wild store faults on the host: the worker crashes or raises.
    ("illegal_address.py", {errors.USER_CRASH, errors.USER_WRONG_ANSWER, errors.USER_ILLEGAL_ADDRESS}, "", None),
]


@pytest.fixture(scope="module")
def check_results():
    """Every check-mode cheat judged once, two at a time: the cost is mostly process start-up."""
    names = [c[0] for c in CHECK_CASES]
    with cf.ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(zip(names, pool.map(_judge, names), strict=True))


# One xdist group: under --dist loadgroup each case would otherwise be dealt out alone, and every
# worker that took one (or took it after another module's test) would judge the whole corpus again.
@pytest.mark.xdist_group("cheats-check")
@pytest.mark.parametrize("name, codes, text, verdict", CHECK_CASES, ids=[c[0].removesuffix(".py") for c in CHECK_CASES])
def test_cheat_fails_check(check_results, name, codes, text, verdict):
    task = check_results[name]
    assert task.status != "correct"
    assert task.error_code in codes, f"{task.error_code}: {task.reason}"
    assert text in task.reason, task.reason
    assert task.verdict == (verdict or "bug")  # a failure that is not a cheat is the kernel's bug


def test_a_gemm_by_another_name_is_a_forbidden_gemm():
    """A GEMM task lists the matmul routes it forbids; a 1x1 convolution is the same library GEMM
    under another name, and the task's forbidden family covers it."""
    path = CHEATS / "conv_gemm.py"
    opts = RunOptions(command="check", smoke=True, interpret=True, timeout_s=120, workloads=["S1"])
    (task,) = run([get_task("w4a16-awq-gemm")], lambda _t: path, opts, candidate_path=path).tasks
    assert task.error_code == errors.USER_FORBIDDEN, f"{task.error_code}: {task.reason}"
    assert "aten::convolution" in task.reason and task.verdict == "rejected-cheat"


BENCH_CASES = [
    ("count_calls.py", {errors.USER_TIMED_MISMATCH}, "timed call"),
    ("escape_after_timer.py", {errors.USER_TIMING_INTEGRITY}, "escaped the timer"),
    ("probe_recorder.py", {errors.USER_FORBIDDEN}, "called a forbidden op: ForbiddenOpError: aten::silu is forbidden"),
    ("unblock_library.py", {errors.USER_TAMPER}, "the forbidden-op block was removed or overridden"),
    # A thread's output is unfinished when the harness copies it, or its work shows on the judge's clock.
    ("side_stream.py", {errors.USER_WRONG_ANSWER, errors.USER_TIMED_MISMATCH, errors.USER_TIMING_INTEGRITY}, ""),
]


@pytest.mark.parametrize("name, codes, text", BENCH_CASES, ids=[c[0].removesuffix(".py") for c in BENCH_CASES])
def test_cheat_fails_bench(name, codes, text):
    task = _judge(name, "bench")
    assert task.status != "correct"
    assert task.error_code in codes, f"{task.error_code}: {task.reason}"
    assert text in task.reason, task.reason
    if task.error_code == errors.USER_TIMING_INTEGRITY:  # judged again in fresh processes: it escapes every time
        assert "(confirmed in fresh processes: the rerun rejected again: " in task.reason, task.reason


def test_expert_passes_bench_with_cpu_timing():
    """The same protocol leaves a legitimate kernel alone: correct, timed, no finding."""
    path = get_task(TASK).expert_path
    opts = RunOptions(command="bench", smoke=True, interpret=True, cpu_timing=True, timing=CPU_TIMING,
                      workloads=["S1"], timeout_s=120, compare=["self"])
    result = run([get_task(TASK)], lambda _t: path, opts, candidate_path=path)
    (task,) = result.tasks
    assert task.status == "correct", task.reason
    (w,) = task.workloads
    assert set(w.timings) == {"baseline", "candidate", "candidate-again"}
    assert w.timings["candidate"].checked_calls >= 1
    assert not w.findings and task.verdict == "clean", (w.findings, task.findings)


@needs_sandbox
def test_reading_references_is_blocked():
    task = _judge("read_reference.py")
    assert task.error_code == errors.USER_IMPORT
    assert "No such file" in task.reason and "references" in task.reason


@needs_sandbox
def test_writing_outside_the_workdir_is_blocked():
    target = REPO_ROOT / "evaluator" / "pwned_by_kernel.py"
    task = _judge("write_outside.py")
    assert task.status == "incorrect" and "Read-only file system" in task.reason, task.reason
    assert not target.exists()


@needs_sandbox
def test_network_is_blocked(tmp_path: Path):
    """A server on the host's loopback gets no connection: the sandbox has its own network.

    The server takes a free port and the cheat is copied with that port written in, so the
    test runs (and can fail) wherever it runs, whichever ports are taken."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    source = (CHEATS / "network.py").read_text(encoding="utf-8")
    assert "TEST_PORT = 47651" in source
    cheat = tmp_path / "network.py"
    cheat.write_text(source.replace("TEST_PORT = 47651", f"TEST_PORT = {port}"), encoding="utf-8")
    server.settimeout(30)
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(server.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        task = _judge(cheat)
    finally:
        server.close()
    thread.join(timeout=5)
    assert task.status == "incorrect" and "Connection refused" in task.reason, task.reason
    assert not accepted


def test_static_scan_flags_the_corpus():
    """The upload-time layer: the obvious tricks are findings with line numbers."""
    forbidden = get_task(TASK).spec.forbidden.python
    expect = {"torch_fallback.py": "forbidden", "side_stream.py": "import", "spawn.py": "import",
              "network.py": "import", "early_exit.py": "call", "patch_timer.py": "patch",
              "patch_harness_clock.py": "harness", "read_reference.py": "harness", "forge_channel.py": "call"}
    for name, kind in expect.items():
        kinds = {f.kind for f in scan_file(CHEATS / name, forbidden)}
        assert kind in kinds, (name, kinds)


#: Honest in the correctness trials, then out of device memory when timed: an honest failure (the
#: GPU is shared with the other providers' workers while timing), not a cheat.
OOM_WHEN_TIMED = '''

_CALLS = {}


def silu_and_mul(x):
    key = tuple(x.shape)
    _CALLS[key] = _CALLS.get(key, 0) + 1
    if _CALLS[key] > 3:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return _honest(x)
'''


def test_running_out_of_memory_while_timed_is_a_failure_not_a_cheat(tmp_path: Path):
    source = (CHEATS / "count_calls.py").read_text()
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source[:source.index("_SEEN = {}")] + OOM_WHEN_TIMED)
    task = _judge(kernel, "bench")
    assert task.status == "incorrect" and task.error_code == errors.USER_GPU_OOM, (task.error_code, task.reason)
    assert task.verdict == "bug" and "ran out of memory" in task.reason
