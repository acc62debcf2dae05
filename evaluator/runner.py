"""The parent side of a run: one child process per task, a timeout, and the result assembled.

The parent never imports the kernel under test. It draws the secret seed schedule, starts
``python -m evaluator.child`` in a new session (so a timeout kills the whole process group,
grandchildren included), drains the child's stdout and stderr into bounded buffers (a kernel
that floods its output cannot fill memory or disk), reads JSON lines from a private pipe, and
validates every line. A child that dies, hangs or exits without a valid report fails its task
with a reason, and the next task runs in a fresh process.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from evaluator import ENGINE_VERSION, errors, hardware, sandbox
from evaluator.result import Candidate, ChildReport, Finding, Fingerprint, RunResult, TaskResult
from evaluator.tails import TailBuffer, drain
from evaluator.timing_config import TimingConfig
from tasks.registry import REPO_ROOT, Task

OUTPUT_CAP = 64 * 1024  # bytes of a child's stdout/stderr kept (the tail)
REPORT_LINE_CAP = 8 * 2**20  # a single report line larger than this is a protocol error
TIMING_SEEDS = 6  # extra seeds per workload for the rotated timing input sets


@dataclass
class RunOptions:
    command: str = "check"  # "check" | "bench"
    smoke: bool = False
    compare: list[str] = field(default_factory=list)
    timeout_s: float = 900.0
    interpret: bool | None = None  # None: decide from whether a GPU is present
    timing: dict[str, float | list[float]] = field(default_factory=dict)  # TimingConfig overrides
    workloads: list[str] = field(default_factory=list)
    label: str = "candidate"
    cpu_timing: bool = False  # bench on the CPU with the host clock: tests of the timing protocol only
    # time.monotonic() by which the whole run must be over (the portal's Celery limit), or None. The
    # per-task limits are the caller's to fit inside it; this only stops a timing-integrity rerun
    # (TimingConfig.integrity_reruns) that could not finish in time.
    deadline: float | None = None


ProgressFn = Callable[[str, ChildReport], None]


def gpu_present() -> bool:
    """True when CUDA devices are visible (without creating a context in the parent)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        import torch

        return torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001 - no torch CUDA at all means no GPU
        return False


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_task(task: Task, candidate: Path, opts: RunOptions, interpret: bool,
             seeds: dict[str, list[int]], on_progress: ProgressFn | None = None,
             sandboxing: tuple[bool, str] | None = None) -> tuple[TaskResult, Fingerprint | None]:
    """Judge one task in a fresh judge process (which starts the sandboxed workers)."""
    sandboxed, note = sandboxing if sandboxing is not None else sandbox.decide()
    read_fd, write_fd = os.pipe()
    job = {
        "root": str(task.root), "slug": task.slug, "candidate": str(candidate), "command": opts.command,
        "smoke": opts.smoke, "interpret": interpret, "seeds": seeds, "compare": opts.compare,
        "result_fd": write_fd, "timing": opts.timing, "workloads": opts.workloads,
        "sandboxed": sandboxed, "sandbox_note": note, "cpu_timing": opts.cpu_timing,
        # The judge gives up first, with a precise reason, and still has time to clean up.
        "timeout_s": max(1.0, opts.timeout_s - max(8.0, 0.05 * opts.timeout_s)),
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluator.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, pass_fds=(write_fd,), env=env, cwd=str(task.root), start_new_session=True,
    )
    os.close(write_fd)
    out_buf, err_buf = TailBuffer(OUTPUT_CAP), TailBuffer(OUTPUT_CAP)
    assert proc.stdout is not None and proc.stderr is not None
    drains = [drain(proc.stdout, out_buf), drain(proc.stderr, err_buf)]
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job).encode())
    proc.stdin.close()

    final: ChildReport | None = None
    protocol_error = ""
    pending = b""
    timed_out = False
    deadline = started + opts.timeout_s
    with os.fdopen(read_fd, "rb", buffering=0) as channel:
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([channel], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = channel.read(65536)
            if not chunk:
                break
            pending += chunk
            if len(pending) > REPORT_LINE_CAP and b"\n" not in pending:
                protocol_error = "a report line exceeded the size cap"
                break
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                try:
                    report = ChildReport.model_validate_json(line)
                except ValidationError as exc:
                    protocol_error = f"an invalid report arrived on the result channel: {exc.errors()[0]['msg']}"
                    break
                if report.type == "result":
                    if final is not None:
                        protocol_error = "more than one result arrived on the result channel"
                        break
                    final = report
                elif on_progress:
                    on_progress(task.slug, report)
            if protocol_error:
                break
    if timed_out or protocol_error:
        _kill_group(proc)
    try:
        returncode = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        returncode = proc.wait()
    for t in drains:
        t.join(timeout=5)
    wall = time.perf_counter() - started
    tails = {"stdout_tail": out_buf.text()[-8000:], "stderr_tail": err_buf.text()[-8000:], "wall_s": wall}

    if timed_out:
        return TaskResult(slug=task.slug, status="timeout", error_code=errors.USER_TIMEOUT,
                          reason=f"no result within the {opts.timeout_s:.0f} s limit; the process group was killed",
                          **tails), None
    if protocol_error:
        return TaskResult(slug=task.slug, status="error", error_code=errors.INFRA_PROTOCOL,
                          reason=protocol_error, **tails), None
    if final is None or final.result is None:
        if returncode < 0:
            sig = signal.Signals(-returncode).name
            reason = f"the process died with {sig} before reporting"
            code = errors.USER_CRASH
        elif returncode == 0:
            reason, code = "the process exited cleanly without reporting a result (an early exit?)", errors.USER_EXIT
        else:
            reason, code = f"the process exited with status {returncode} before reporting", errors.USER_CRASH
        tail = err_buf.text().strip().splitlines()[-3:]
        if tail:
            reason += ": " + " | ".join(tail)[-1500:]
        return TaskResult(slug=task.slug, status="crashed", error_code=code, reason=reason, **tails), None
    # The workers' output (the kernel's prints) comes inside the result; the judge's own follows.
    merged = {"wall_s": wall,
              "stdout_tail": (final.result.stdout_tail + tails["stdout_tail"])[-8000:],
              "stderr_tail": (final.result.stderr_tail + tails["stderr_tail"])[-8000:]}
    result = final.result.model_copy(update=merged)
    return result, final.fingerprint


def _confirmed(first: TaskResult, rerun: TaskResult) -> tuple[TaskResult, bool]:
    """The one rule for a timing-integrity rejection judged again in fresh processes: whether it
    stands, and the result to report.

    It stands when the rerun fails too, for any reason: the report is the first rejection, its
    reason followed by how the rerun ended. Otherwise the rerun passed every check, so its result
    is the task's, with a finding that names the rejection it overrode. Reporting the passing
    run's own timings means a kernel that escapes the timer in some processes only gains nothing
    from the rerun: its reported times come from a run where nothing escaped beyond the thresholds.
    """
    if rerun.status == "correct" and not rerun.error_code:
        note = Finding(kind="timing-integrity",
                       message=f"a first run was rejected ({first.reason}); judged again in fresh processes, the "
                               "rejection did not repeat, and these are the second run's results")
        verdict = "suspicious" if rerun.verdict == "clean" else rerun.verdict  # a moderator looks at it
        return rerun.model_copy(update={"findings": [note, *rerun.findings], "verdict": verdict}), False
    how = "rejected again" if rerun.error_code == errors.USER_TIMING_INTEGRITY else f"ended {rerun.error_code or rerun.status}"
    reason = f"{first.reason} (confirmed in fresh processes: the rerun {how}: {rerun.reason})"
    return first.model_copy(update={"reason": reason[:4000]}), True


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def seed_schedule(task: Task, smoke: bool, workloads: list[str]) -> dict[str, list[int]]:
    """Secret per-run seeds: trials first, then the timing sets. Revealed in the result."""
    n = task.spec.trials + TIMING_SEEDS
    return {w.name: [secrets.randbits(62) for _ in range(n)] for w in task.workloads(smoke)
            if not workloads or w.name in workloads}


def _local_fingerprint() -> Fingerprint:
    import platform
    import socket

    try:
        import torch
        import triton

        tv, trv = torch.__version__, triton.__version__
    except Exception:  # noqa: BLE001
        tv = trv = "unavailable"
    return Fingerprint(engine_version=ENGINE_VERSION, python=platform.python_version(), torch=tv, triton=trv,
                       platform=platform.platform(),
                       hostname_hash=hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12])


def run(tasks: list[Task], candidate_for: Callable[[Task], Path], opts: RunOptions,
        on_progress: ProgressFn | None = None, on_task_done: Callable[[TaskResult], None] | None = None,
        candidate_path: Path | None = None) -> RunResult:
    """Judge ``tasks``, each against the kernel file ``candidate_for(task)``."""
    sandboxing = sandbox.decide()  # once per run; raises when the sandbox is required and missing
    interpret = (not gpu_present()) if opts.interpret is None else opts.interpret
    smoke = opts.smoke or interpret  # the interpreter only ever runs the smoke workloads
    opts = RunOptions(**{**opts.__dict__, "smoke": smoke})
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    reruns = TimingConfig.from_dict(opts.timing).integrity_reruns if opts.command == "bench" else 0
    results: list[TaskResult] = []
    schedule: dict[str, list[int]] = {}
    fp: Fingerprint | None = None
    for task in tasks:
        seeds = seed_schedule(task, smoke, opts.workloads)
        result, task_fp = run_task(task, candidate_for(task), opts, interpret, seeds, on_progress, sandboxing)
        for _ in range(reruns if result.error_code == errors.USER_TIMING_INTEGRITY else 0):
            if opts.deadline is not None and time.monotonic() + opts.timeout_s > opts.deadline:
                reason = f"{result.reason} (not judged again in fresh processes: the run has no time left for it)"
                result = result.model_copy(update={"reason": reason[:4000]})
                break
            again = seed_schedule(task, smoke, opts.workloads)
            second, second_fp = run_task(task, candidate_for(task), opts, interpret, again, on_progress, sandboxing)
            result, stood = _confirmed(result, second)
            if not stood:
                seeds, task_fp = again, second_fp
                break
        schedule.update({f"{task.slug}/{k}": v for k, v in seeds.items()})
        if task_fp is not None:  # the run's start is the first task's; its clocks at the end, the last's
            fp = task_fp if fp is None else fp.model_copy(update={"clocks_end": task_fp.clocks_end})
        results.append(result)
        if on_task_done:
            on_task_done(result)
    fp = fp or _local_fingerprint()
    profile = hardware.detect(fp.gpu_name or None) if not interpret else hardware.PROFILES["cpu-interpret"]
    timing_taken = opts.command == "bench" and (not interpret or opts.cpu_timing)
    note = ""
    if interpret and timing_taken:
        note = "CPU timing (a test of the timing protocol): host-clock times in Triton's interpreter, not a score"
    elif interpret:
        note = "no GPU: kernels ran in Triton's interpreter on the smoke workloads; no timing was taken"
    elif opts.command == "check":
        note = "correctness only; no timing was taken"
    cand = candidate_path or (candidate_for(tasks[0]) if tasks else Path("-"))
    return RunResult(
        engine_version=ENGINE_VERSION, command=opts.command, mode="interpreter" if interpret else "gpu",
        timing_taken=timing_taken, note=note, started_at=started,
        finished_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), smoke=smoke,
        candidate=Candidate(path=str(cand), sha256=file_sha256(cand) if cand.is_file() else "", label=opts.label),
        compare=list(opts.compare), hardware=profile.record(), fingerprint=fp, seed_schedule=schedule,
        timing=TimingConfig.from_dict(opts.timing).record() if timing_taken else {}, tasks=results,
    )
