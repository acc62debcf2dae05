"""The worker's job: run the engine over one attempt, reporting through actions as it goes.

The engine (:func:`evaluator.runner.run`) already runs each task in its own sandboxed child
process; nothing of the submission is imported here. Kernels are written from the database
(the validated source) into a private temporary folder. A heartbeat thread writes progress
every ``D2K_HEARTBEAT_S`` seconds even while one long workload runs; if the attempt was taken
away (cancelled, or reaped and handed to another delivery) the heartbeat says so and no further
result is written.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from evaluator import hardware as engine_hardware
from evaluator.result import ChildReport
from evaluator.result import TaskResult as EngineTaskResult
from evaluator.runner import RunOptions, gpu_present, run
from portal.submissions import actions
from portal.submissions.constants import INFRA_HARDWARE, INFRA_WORKER
from portal.submissions.judging import judge_attempt
from portal.submissions.models import EvaluationAttempt, SubmissionTask, WorkerBeacon
from tasks.registry import TaskLoadError, get_task

log = logging.getLogger(__name__)


class ClaimLost(Exception):
    """The attempt no longer belongs to this delivery; stop without writing."""


@dataclass
class RunState:
    """Per-run data (the Celery task object is shared between runs, so nothing lives on it)."""

    attempt_id: int
    claim: str
    task_count: int
    task_index: int = 0
    progress: dict[str, Any] = field(default_factory=dict)
    lost: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def snapshot(self) -> dict[str, Any]:
        return {"task_index": self.task_index, "task_count": self.task_count, **self.progress}


def _beat(state: RunState) -> None:
    try:
        while not state.stop.wait(settings.D2K_HEARTBEAT_S):
            if not actions.do_heartbeat(state.attempt_id, state.claim, state.snapshot()):
                state.lost.set()
                return
    finally:
        connection.close()  # this thread's own connection


def _options(hardware: str, task_count: int) -> RunOptions:
    """Interpreter (correctness only) or timed GPU run, by profile. Each task's limit is capped so
    that all of them fit inside Celery's soft time limit: the engine, not Celery, must be the one
    to stop a kernel, since only the engine kills its child's whole process group."""
    interpret = not engine_hardware.PROFILES[hardware].timing
    share = (settings.CELERY_TASK_SOFT_TIME_LIMIT - 120) / max(task_count, 1)
    # A timing-integrity rejection is judged again only in the time the other tasks left over.
    deadline = time.monotonic() + settings.CELERY_TASK_SOFT_TIME_LIMIT - 120
    return RunOptions(command="check" if interpret else "bench", smoke=interpret, interpret=interpret,
                      timeout_s=float(max(60, min(settings.D2K_TASK_TIMEOUT_S, share))), deadline=deadline)


def evaluate_attempt(submission_id: int, number: int, *, worker: str, delivery: str = "",
                     redelivered: bool = False) -> str:
    """Run one attempt end to end; returns what happened (for the log)."""
    claim = actions.do_start_evaluation(submission_id, number, worker=worker, delivery=delivery,
                                        redelivered=redelivered)
    if claim is None:
        return "skipped: finished, superseded or running elsewhere"
    attempt = EvaluationAttempt.objects.select_related("submission").get(submission_id=submission_id, number=number)
    hardware = attempt.submission.hardware
    rows = list(SubmissionTask.objects.filter(submission_id=submission_id).select_related("task").order_by("position"))
    if attempt.submission.mode == "design":
        return _with_heartbeat(attempt.pk, claim, len(rows), worker, submission_id, number,
                               lambda state: judge_attempt(rows, attempt.pk, claim, state.progress))
    opts = _options(hardware, len(rows))
    if not opts.interpret and not gpu_present():
        actions.do_record_infra_error(attempt.pk, claim, INFRA_HARDWARE, f"{worker} has no GPU for profile {hardware}")
        return "error: no GPU"
    return _with_heartbeat(attempt.pk, claim, len(rows), worker, submission_id, number,
                           lambda state: _run(rows, opts, state, hardware))


def _with_heartbeat(attempt_id: int, claim: str, task_count: int, worker: str, submission_id: int, number: int,
                    job: Callable[[RunState], str]) -> str:
    """Run ``job`` with the heartbeat thread beating; our own failures become infrastructure errors."""
    state = RunState(attempt_id=attempt_id, claim=claim, task_count=task_count)
    beater = threading.Thread(target=_beat, args=(state,), name=f"heartbeat-{attempt_id}", daemon=True)
    beater.start()
    WorkerBeacon.objects.filter(hostname=worker).update(current=f"#{submission_id}.{number}")
    try:
        return job(state)
    except ClaimLost:
        return "stopped: the attempt was cancelled or handed to another delivery"
    except Exception as exc:  # noqa: BLE001 - anything here is our fault, never the kernel's (it runs in a child)
        log.exception("evaluation of %s.%s failed on our side", submission_id, number)
        outcome = actions.do_record_infra_error(attempt_id, claim, INFRA_WORKER, f"{type(exc).__name__}: {exc}")
        return f"infrastructure error: {outcome}"
    finally:
        state.stop.set()
        beater.join(timeout=10)
        WorkerBeacon.objects.filter(hostname=worker).update(current="")


def _run(rows: list[SubmissionTask], opts: RunOptions, state: RunState, hardware: str) -> str:
    root = Path(settings.D2K_TASKS_ROOT)
    try:
        tasks = [get_task(row.task.slug, root) for row in rows]
    except TaskLoadError as exc:
        outcome = actions.do_record_infra_error(state.attempt_id, state.claim, "eval:infra:task-invalid", str(exc))
        return f"infrastructure error: {outcome}"
    with tempfile.TemporaryDirectory(prefix="d2k-eval-") as tmp:
        paths: dict[str, Path] = {}
        for row in rows:
            path = Path(tmp) / row.task.slug / "kernel.py"
            path.parent.mkdir(parents=True)
            path.write_text(row.kernel_source, encoding="utf-8")
            paths[row.task.slug] = path

        def on_progress(slug: str, report: ChildReport) -> None:
            # Never raise here: the engine is reading its child's channel, and only it may stop the child.
            state.progress = {"task": slug, "workload": report.workload, "phase": report.phase,
                              "workload_done": report.done, "workload_total": report.total}

        def on_task_done(result: EngineTaskResult) -> None:
            close_old_connections()
            if state.lost.is_set() or not actions.do_record_task_result(state.attempt_id, state.claim, result):
                raise ClaimLost
            state.task_index += 1
            state.progress = {"task": result.slug, "phase": "done"}

        state.progress = {"task": rows[0].task.slug if rows else "", "phase": "starting"}
        actions.do_heartbeat(state.attempt_id, state.claim, state.snapshot())
        result = run(tasks, lambda t: paths[t.slug], opts, on_progress=on_progress, on_task_done=on_task_done)
    profile = engine_hardware.PROFILES[hardware]
    if profile.timing and profile.gpu_match and profile.gpu_match not in result.fingerprint.gpu_name:
        outcome = actions.do_record_infra_error(state.attempt_id, state.claim, INFRA_HARDWARE,
                                                f"ran on {result.fingerprint.gpu_name!r}, not a {profile.gpu_match}")
        return f"infrastructure error: {outcome}"
    outcome = actions.do_finish_evaluation(state.attempt_id, state.claim, result)
    return f"finished: {outcome}" if outcome else "stopped: the attempt was taken away before the end"
