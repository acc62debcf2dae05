"""The per-task judge process: ``python -m evaluator.child`` reads a job on stdin.

One judge process judges one task. It never imports the kernel under test: it starts a worker
process (``evaluator.worker``, sandboxed by ``evaluator.sandbox``) for the candidate, another for
the trusted providers it times (the baseline, torch.compile of it) and one for the expert kernel
when asked, and hands them calls (``evaluator.judge``). A hang, a segfault or an illegal memory
access costs that task only; the parent (``evaluator.runner``) kills the whole process group on
timeout. Reports go out as JSON lines on the file descriptor the job names, which no worker
inherits, and the parent re-validates each one.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from evaluator import ENGINE_VERSION, errors
from evaluator.hardware import set_sol
from evaluator.modules import load_module
from evaluator.result import ChildReport, Finding, Fingerprint, TaskResult, WorkloadResult


class Job(BaseModel):
    """What the parent asks of one child."""

    model_config = ConfigDict(extra="forbid")

    root: str
    slug: str
    candidate: str
    command: str  # "check" | "bench"
    smoke: bool
    interpret: bool
    seeds: dict[str, list[int]]  # workload name -> one seed per trial (then timing sets)
    compare: list[str] = []
    result_fd: int
    timing: dict[str, float | list[float]] = {}
    workloads: list[str] = []  # restrict to these names; empty = all
    sandboxed: bool = False  # workers run under bubblewrap (decided once by the parent)
    sandbox_note: str = ""  # why not, when they do not
    cpu_timing: bool = False  # time on the CPU with the host clock (tests of the timing protocol)
    timeout_s: float = 900.0


def _nvidia_smi(query: str) -> dict[str, str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(query.split(","), (v.strip() for v in out.split(",")), strict=False))


def fingerprint(device: Any) -> Fingerprint:
    import torch
    import triton

    fp = Fingerprint(
        engine_version=ENGINE_VERSION, python=platform.python_version(), torch=torch.__version__,
        triton=triton.__version__, platform=platform.platform(),
        hostname_hash=hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12],
    )
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        smi = _nvidia_smi("driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw")
        fp = fp.model_copy(update={
            "gpu_name": props.name, "gpu_count": torch.cuda.device_count(),
            "sm_count": props.multi_processor_count, "l2_bytes": getattr(props, "L2_cache_size", 0),
            "memory_bytes": props.total_memory, "cuda": torch.version.cuda or "",
            "driver": smi.pop("driver_version", ""), "clocks_start": smi,
        })
    return fp


class Reporter:
    def __init__(self, stream: TextIO):
        self.stream = stream

    def send(self, report: ChildReport) -> None:
        self.stream.write(report.model_dump_json() + "\n")
        self.stream.flush()


def _arena_bytes(task: Any, workloads: list[Any], sets: int, pool_bytes: int = 0) -> int:
    """Room for the timing sets of the largest workload's inputs and outputs, plus alignment: up to
    ``sets`` copies, as many as :func:`evaluator.shm.rotation_sets` keeps for ``pool_bytes``."""
    from evaluator.shm import rotation_sets, set_bytes

    need = 0
    for w in workloads:
        one = set_bytes(task.nbytes(w.params))
        need = max(need, one * (rotation_sets(sets, one, pool_bytes) if pool_bytes else sets))
    return need + (1 << 20)


def _worker(label: str, providers: dict[str, Any], task: Any, job: Job, device: Any, size: int,
            deadline: float, untrusted: bool, flush_bytes: int, arena: Any = None, ours: bool = False,
            spin_us: float = 0.0) -> Any:
    from evaluator.protocol import OutputSpec
    from evaluator.workerproc import WorkerConfig, WorkerProcess

    if arena is None:
        from evaluator.arena import new_arena

        arena = new_arena(size, device)
    cfg = WorkerConfig(label=label, providers=providers, device=device if isinstance(device, str) else device.type,
                       interpret=job.interpret,
                       sandboxed=job.sandboxed and untrusted, untrusted=untrusted, flush_bytes=flush_bytes,
                       spin_us=spin_us, deadline=deadline,
                       ours=ours, forbidden_ops=list(task.spec.forbidden.aten) if untrusted else [],
                       outputs=[OutputSpec(name=o.name, may_alias=o.may_alias) for o in task.spec.outputs],
                       inputs=[a.name for a in task.spec.inputs])
    return WorkerProcess(cfg, arena)


def _candidate_providers(job: Job, task: Any, timing: bool) -> dict[str, Any]:
    from evaluator.protocol import ProviderSpec

    entry = task.spec.entry_point
    cand = {"candidate": ProviderSpec(path=job.candidate, entry=entry)}
    if timing and "self" in job.compare:
        cand["candidate-again"] = ProviderSpec(path=job.candidate, entry=entry)
    return cand


def launch_early(job: Job, started: float) -> Any:
    """On the CPU, start the candidate's worker before this process imports torch, so that the
    two imports overlap. Returns the launched worker, or None (on a GPU the arena needs CUDA)."""
    if not job.interpret:
        return None
    from evaluator.shm import ArenaHandle, host_memfd, round_size
    from tasks.registry import get_task

    task = get_task(job.slug, Path(job.root))
    timing = job.command == "bench" and job.cpu_timing
    sets = int(job.timing.get("sets", 2)) if timing else 1  # type: ignore[arg-type]
    workloads = [w for w in task.workloads(job.smoke) if not job.workloads or w.name in job.workloads]
    size = round_size(_arena_bytes(task, workloads, sets))
    worker = _worker("candidate", _candidate_providers(job, task, timing), task, job, "cpu", size,
                     started + job.timeout_s, True, 0, arena=ArenaHandle(host_memfd(size), size))
    worker.launch()
    return worker


def judge_task(job: Job, reporter: Reporter, started: float | None = None, early: Any = None) -> TaskResult:
    import torch

    from evaluator.judge import Judge
    from evaluator.static_scan import scan_file
    from evaluator.timing_config import TimingConfig
    from evaluator.workerproc import WorkerFailure
    from tasks.registry import get_task

    root = Path(job.root)
    task = get_task(job.slug, root)
    device = torch.device("cpu") if job.interpret else torch.device("cuda", torch.cuda.current_device())
    findings = [Finding(kind=f.kind, message=f.message, line=f.line, file=f.file)
                for f in scan_file(Path(job.candidate), task.spec.forbidden.python)]
    if job.sandbox_note:
        findings.append(Finding(kind="sandbox", message=job.sandbox_note))
    baseline_mod = load_module(task.baseline_path, f"_d2k_baseline_{task.spec.id}")
    baseline_fn = getattr(baseline_mod, task.spec.entry_point)
    reference_fn = getattr(baseline_mod, "reference", baseline_fn)
    timing = job.command == "bench" and (not job.interpret or job.cpu_timing)
    cfg = TimingConfig.from_dict(job.timing)
    from evaluator.hardware import detect

    profile = detect(torch.cuda.get_device_name(device) if device.type == "cuda" else None)
    cfg.flush_bytes = profile.l2_flush_bytes
    workloads = [w for w in task.workloads(job.smoke) if not job.workloads or w.name in job.workloads]
    deadline = (started if started is not None else time.monotonic()) + job.timeout_s
    flush = cfg.flush_bytes if device.type == "cuda" else 0
    spin = cfg.spin_us if device.type == "cuda" else 0.0
    if timing and device.type == "cuda":
        # Up to three arenas (the candidate's, the trusted workers', the expert's); keep them all
        # within half the free memory.
        free, _ = torch.cuda.mem_get_info(device)
        if _arena_bytes(task, workloads, cfg.sets, cfg.pool_bytes) * 3 > free // 2:
            cfg.sets = 1
    size = _arena_bytes(task, workloads, cfg.sets, cfg.pool_bytes) if timing else _arena_bytes(task, workloads, 1)
    if early is not None:
        from evaluator.arena import map_host

        early.arena = map_host(early.arena.fd, early.arena.size)
        workers = [early]
    else:
        workers = [_worker("candidate", _candidate_providers(job, task, timing), task, job, device, size, deadline,
                           True, flush, spin_us=spin)]
    results: list[WorkloadResult] = []
    try:
        try:
            # The timing workers start now, beside the candidate's, so their imports overlap its
            # start and its correctness trials instead of following them (several seconds a task).
            timing_workers = _launch_timing_workers(job, task, device, size, deadline, flush, spin) if timing else {}
            workers += list({id(w): w for w in timing_workers.values()}.values())
            if early is not None:
                early.wait_ready()
            else:
                workers[0].start()
        except WorkerFailure as exc:
            return TaskResult(slug=task.slug, status="error", error_code=exc.code, reason=str(exc)[:4000],
                              findings=findings, **_tails(workers))
        judge = Judge(task, reference_fn, baseline_fn, baseline_mod, device, workers[0])
        all_ok = _judge_workloads(job, task, judge, workloads, timing, cfg, profile, reporter, timing_workers,
                                  results)
        for w in workers:
            if w.ready:  # a timing worker never needed (nothing was correct) is only closed
                w.finish()
    except WorkerFailure as exc:
        verdict = "rejected-cheat" if exc.code in (errors.USER_TAMPER, errors.USER_PROTOCOL, errors.USER_PROCESS) \
            else _failure_verdict(exc.code)
        status = "timeout" if exc.code == errors.USER_TIMEOUT else "crashed" if exc.code in (
            errors.USER_CRASH, errors.USER_EXIT) else "error"
        return TaskResult(slug=task.slug, status=status, error_code=exc.code, reason=_kept(str(exc), results, workloads),
                          verdict=verdict, findings=findings, workloads=results, **_tails(workers))
    except errors.SubmissionError as exc:
        cheat = exc.code in (errors.USER_TIMING_INTEGRITY, errors.USER_TIMED_MISMATCH, errors.USER_FORBIDDEN)
        # A cheat's results are void; an honest failure (out of memory while timing) keeps the
        # workloads judged before it, as a worker failure does.
        return TaskResult(slug=task.slug, status="incorrect", error_code=exc.code,
                          reason=str(exc)[:4000] if cheat else _kept(str(exc), results, workloads),
                          verdict="rejected-cheat" if cheat else _failure_verdict(exc.code), findings=findings,
                          workloads=[] if cheat else results, **_tails(workers))
    except errors.EvaluatorError as exc:  # ours: a trusted provider failed (judge.Judge.provider_failed)
        return TaskResult(slug=task.slug, status="error", error_code=exc.code, reason=_kept(str(exc), results, workloads),
                          findings=findings, workloads=results, **_tails(workers))
    finally:
        for w in workers:
            w.close()

    compute = sorted(judge.compute_ops - set(task.spec.forbidden.aten))
    if compute:
        findings.append(Finding(kind="torch-compute", message="PyTorch ops that compute ran in the launcher: "
                                + ", ".join(compute)))
    failed = next((t for w in results for t in w.trials if not t.passed), None)
    forbidden = failed is not None and failed.rule == "forbidden-op"
    # A missing sandbox is a fact about the run, not about the kernel: it is shown, not judged.
    about_kernel = [f for f in findings if f.kind != "sandbox"]
    verdict = "rejected-cheat" if forbidden else (
        "suspicious" if about_kernel or any(w.findings for w in results) else "clean")
    code = "" if all_ok else (errors.USER_FORBIDDEN if forbidden else _RULE_CODES.get(failed.rule if failed else "",
                                                                                     errors.USER_WRONG_ANSWER))
    return TaskResult(
        slug=task.slug, status="correct" if all_ok else "incorrect", error_code=code,
        reason="" if all_ok else _describe(results),
        verdict=verdict if all_ok or forbidden else "bug", workloads=results, findings=findings,
        aten_ops=sorted(judge.recorder_ops), autotune=judge.autotune, expert_autotune=judge.expert_autotune,
        **_tails(workers),
    )


_RULE_CODES = {"host-oom": errors.USER_HOST_OOM, "gpu-oom": errors.USER_GPU_OOM}


def _failure_verdict(code: str) -> str:
    """EVALUATION.md's label for a task that failed without cheating: ``bug`` when the kernel is at
    fault (an ``eval:user:*`` code: a wrong answer, a crash, a timeout), ``unjudged`` when we are."""
    return "bug" if code.startswith("eval:user:") else "unjudged"


def _kept(reason: str, results: list[WorkloadResult], workloads: list[Any]) -> str:
    """The reason of a task that failed as a whole, saying which workloads it had finished: their
    results are kept (a bench that runs out of time on its last workload still shows the others),
    while the task's status stays the failure's. A failed timed call of the candidate (a wrong
    answer or a timing cheat) keeps nothing: it condemns the whole submission."""
    if results:
        stopped = workloads[len(results)].name if len(results) < len(workloads) else "the end"
        reason += f" (stopped while judging {stopped}; kept: the results of {', '.join(w.name for w in results)})"
    return reason[:4000]


def _tails(workers: list[Any]) -> dict[str, str]:
    """The workers' captured stdout and stderr (the kernel's prints), labelled, last 8000 chars."""
    out = "".join(f"[{w.cfg.label}]\n{w.out.text()}" for w in workers if w.out.data or w.out.dropped)
    err = "".join(f"[{w.cfg.label}]\n{w.err.text()}" for w in workers if w.err.data or w.err.dropped)
    return {"stdout_tail": out[-8000:], "stderr_tail": err[-8000:]}


def _judge_workloads(job: Job, task: Any, judge: Any, workloads: list[Any], timing: bool, cfg: Any, profile: Any,
                     reporter: Reporter, timing_workers: dict[str, Any], results: list[WorkloadResult]) -> bool:
    """Judge ``workloads`` in order, appending each finished one to ``results`` as it completes (so
    a failure part-way leaves the caller the finished ones). True when every one was correct."""
    all_ok = True
    timed: dict[str, Any] = {}
    for i, w in enumerate(workloads):
        seeds = job.seeds[w.name]
        reporter.send(ChildReport(type="progress", workload=w.name, phase="correctness", done=i, total=len(workloads)))
        trials = [judge.run_trial(w, t, seeds[t]) for t in range(task.spec.trials)]
        judge.release({"candidate": judge.candidate}, w.name)
        ok = all(t.passed for t in trials)
        flops, nbytes = task.roofline(w.params)
        wr = WorkloadResult(name=w.name, smoke=job.smoke, model=w.model, params=dict(w.params), flops=flops,
                            bytes=nbytes, correct=ok, trials=trials)
        if ok and timing:
            if not timed:
                judge.ready(timing_workers, w.name)
                timed = {**timing_workers, "candidate": judge.candidate}
                if "self" in job.compare:
                    timed["candidate-again"] = judge.candidate

            def progress(phase: str, _w: str = w.name, _i: int = i) -> None:
                reporter.send(ChildReport(type="progress", workload=_w, phase=phase, done=_i, total=len(workloads)))

            timings, reason, wfind, untimed = judge.time_workload(w, seeds[task.spec.trials:], cfg, timed, progress)
            judge.release(timed, w.name)
            wr.untimed = untimed
            base = timings["baseline"].median_ms
            wr.timings = timings
            wr.stop_reason = reason
            wr.findings = wfind
            wr.speedup = {p: base / t.median_ms for p, t in timings.items() if t.median_ms > 0}
            if not job.interpret:
                set_sol(wr, profile, task.compute_dtype(w.params))
        all_ok &= ok
        results.append(wr)
    return all_ok


def _launch_timing_workers(job: Job, task: Any, device: Any, size: int, deadline: float,
                           flush: int, spin: float = 0.0) -> dict[str, Any]:
    """Provider name -> launched worker (not yet ready): the trusted worker (the baseline),
    torch.compile's when asked for, and the expert's; all run only our code (``ours``).

    torch.compile, an optional provider (judge.OPTIONAL_PROVIDERS), has a worker of its own, so
    that a compilation that hangs can be killed (and a crash of Inductor can die) without taking
    the baseline with it. It shares the trusted worker's arena: both are ours, and the judge
    calls one provider at a time.
    """
    from evaluator.protocol import ProviderSpec

    entry = task.spec.entry_point
    tw = _worker("trusted", {"baseline": ProviderSpec(path=str(task.baseline_path), entry=entry)}, task, job, device,
                 size, deadline, False, flush, ours=True, spin_us=spin)
    tw.launch()
    timed = {"baseline": tw}
    if "compile" in job.compare:
        cw = _worker("compile", {"compile": ProviderSpec(path=str(task.baseline_path), entry=entry, compile=True)},
                     task, job, device, size, deadline, False, flush, arena=tw.arena, ours=True, spin_us=spin)
        cw.launch()
        timed["compile"] = cw
    if "expert" in job.compare or not job.interpret:
        # Timed on every GPU bench, asked for or not: it runs in a worker set up exactly like the
        # candidate's, so its round-trip overhead is the floor the candidate's is compared with
        # (judge._residual_floor), and the result shows the expert's time from the same run.
        # The expert kernel is handed in as one file: its folder (references/) stays hidden.
        ew = _worker("expert", {"expert": ProviderSpec(path=str(task.expert_path), entry=entry)}, task, job, device,
                     size, deadline, True, flush, ours=True, spin_us=spin)
        ew.launch()
        timed["expert"] = ew
    return timed


def _describe(results: list[WorkloadResult]) -> str:
    for w in results:
        for t in w.trials:
            if not t.passed:
                where = f" at {t.worst.index} (got {t.worst.got}, expected {t.worst.expected})" if t.worst else ""
                out = f" output {t.output}:" if t.output else ""
                return f"workload {w.name}, trial {t.trial}: {t.rule}:{out} {t.message}{where}"
    return "incorrect"


def main() -> int:
    from evaluator.workerproc import become_subreaper

    job = Job.model_validate_json(sys.stdin.read())
    become_subreaper()
    started_monotonic = time.monotonic()
    try:
        early = launch_early(job, started_monotonic)
    except Exception:  # noqa: BLE001 - the normal start below reports whatever is wrong
        early = None
    stream = os.fdopen(job.result_fd, "w", buffering=1)
    reporter = Reporter(stream)
    started = time.perf_counter()
    import torch

    device = torch.device("cpu") if job.interpret else torch.device("cuda", torch.cuda.current_device())
    fp = fingerprint(device)
    try:
        result = judge_task(job, reporter, started_monotonic, early)
    except errors.SubmissionError as exc:
        result = TaskResult(slug=job.slug, status="incorrect", error_code=exc.code, reason=str(exc)[:4000])
    except Exception as exc:  # noqa: BLE001 - whatever broke, the parent gets a reason
        # No kernel runs in this process, so whatever raised here is the engine's fault.
        tb = traceback.format_exc(limit=8)
        code = exc.code if isinstance(exc, errors.EvaluatorError) else errors.INFRA_ERROR
        result = TaskResult(slug=job.slug, status="error", error_code=code,
                            reason=f"{type(exc).__name__}: {exc}\n{tb}"[:4000])
    result.wall_s = time.perf_counter() - started
    if device.type == "cuda":
        fp.clocks_end = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw")
    reporter.send(ChildReport(type="result", result=result, fingerprint=fp))
    stream.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
