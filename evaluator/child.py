"""The per-task child process: ``python -m evaluator.child`` reads a job on stdin.

One child judges one task, so a hang, a segfault or an illegal memory access costs that task
only; the parent (``evaluator.runner``) kills the whole process group on timeout. Reports go
out as JSON lines on the file descriptor the job names (not stdout, which the kernel under test
may print to freely), and the parent re-validates each one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from evaluator import ENGINE_VERSION, errors
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
    timing: dict[str, float] = {}
    workloads: list[str] = []  # restrict to these names; empty = all


def load_module(path: Path, name: str) -> ModuleType:
    """Import a Python file under a private module name (two tasks never share a module)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


def _autotune_configs(module: ModuleType) -> dict[str, str]:
    from triton.runtime.autotuner import Autotuner

    found = {}
    for name, value in vars(module).items():
        if isinstance(value, Autotuner) and getattr(value, "best_config", None) is not None:
            found[name] = str(value.best_config)
    return found


def judge_task(job: Job, reporter: Reporter) -> TaskResult:
    import torch

    from evaluator.judge import Judge, Sides, TimingConfig
    from evaluator.static_scan import scan_file
    from tasks.registry import get_task

    root = Path(job.root)
    task = get_task(job.slug, root)
    device = torch.device("cpu") if job.interpret else torch.device("cuda", torch.cuda.current_device())
    findings = [Finding(kind=f.kind, message=f.message, line=f.line)
                for f in scan_file(Path(job.candidate), task.spec.forbidden.python)]

    baseline_mod = load_module(task.baseline_path, f"_d2k_baseline_{task.spec.id}")
    try:
        cand_mod = load_module(Path(job.candidate), f"_d2k_candidate_{task.spec.id}")
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are the candidate's fault too
        return TaskResult(slug=task.slug, status="error", error_code=errors.USER_IMPORT,
                          reason=f"the kernel file does not import: {type(exc).__name__}: {exc}"[:4000],
                          findings=findings)
    entry = getattr(cand_mod, task.spec.entry_point, None)
    if not callable(entry):
        return TaskResult(slug=task.slug, status="error", error_code=errors.USER_ENTRY_POINT,
                          reason=f"the kernel file defines no function {task.spec.entry_point}()", findings=findings)

    baseline_fn = getattr(baseline_mod, task.spec.entry_point)
    reference_fn = getattr(baseline_mod, "reference", baseline_fn)
    extra: dict[str, Any] = {}
    timing = job.command == "bench" and not job.interpret
    if timing:
        if "compile" in job.compare:
            extra["compile"] = torch.compile(baseline_fn, dynamic=False)
        if "expert" in job.compare:
            extra["expert"] = getattr(load_module(task.expert_path, f"_d2k_expert_{task.spec.id}"),
                                      task.spec.entry_point)
        if "self" in job.compare:
            extra["candidate-again"] = entry
    judge = Judge(task, Sides(reference=reference_fn, baseline=baseline_fn, candidate=entry, extra=extra),
                  baseline_mod, device)
    cfg = TimingConfig(**job.timing) if job.timing else TimingConfig()

    from evaluator.hardware import detect

    profile = detect(torch.cuda.get_device_name(device) if device.type == "cuda" else None)
    cfg.flush_bytes = profile.l2_flush_bytes
    workloads = [w for w in task.workloads(job.smoke) if not job.workloads or w.name in job.workloads]
    results: list[WorkloadResult] = []
    all_ok = True
    for i, w in enumerate(workloads):
        seeds = job.seeds[w.name]
        reporter.send(ChildReport(type="progress", workload=w.name, phase="correctness", done=i, total=len(workloads)))
        trials = [judge.run_trial(w, t, seeds[t]) for t in range(task.spec.trials)]
        ok = all(t.passed for t in trials)
        flops, nbytes = task.roofline(w.params)
        wr = WorkloadResult(name=w.name, smoke=job.smoke, model=w.model, params=dict(w.params), flops=flops,
                            bytes=nbytes, correct=ok, trials=trials)
        if ok and timing:
            def progress(phase: str, _w: str = w.name, _i: int = i) -> None:
                reporter.send(ChildReport(type="progress", workload=_w, phase=phase, done=_i, total=len(workloads)))

            timings, reason, wfind = judge.time_workload(w, seeds[task.spec.trials:], cfg, progress)
            base = timings["baseline"].median_ms
            sol_s = profile.sol_seconds(flops, nbytes, task.compute_dtype(w.params))
            wr.timings = timings
            wr.stop_reason = reason
            wr.findings = wfind
            wr.speedup = {p: base / t.median_ms for p, t in timings.items() if t.median_ms > 0}
            if sol_s is not None:
                wr.sol_ms = sol_s * 1e3
                wr.sol_fraction = {p: wr.sol_ms / t.median_ms for p, t in timings.items() if t.median_ms > 0}
                for p, frac in wr.sol_fraction.items():
                    if frac > 1.0:
                        wr.findings.append(f"{p} ran faster than the speed of light ({frac:.2f}x SOL): "
                                           "impossible, so not a score")
        all_ok &= ok
        results.append(wr)

    compute = sorted(judge.compute_ops - set(task.spec.forbidden.aten))
    if compute:
        findings.append(Finding(kind="torch-compute", message="PyTorch ops that compute ran in the launcher: "
                                + ", ".join(compute)))
    failed = next((t for w in results for t in w.trials if not t.passed), None)
    forbidden = failed is not None and failed.rule == "forbidden-op"
    verdict = "rejected-cheat" if forbidden else (
        "suspicious" if findings or any(w.findings for w in results) else "clean")
    return TaskResult(
        slug=task.slug, status="correct" if all_ok else "incorrect",
        error_code="" if all_ok else (errors.USER_FORBIDDEN if forbidden else errors.USER_WRONG_ANSWER),
        reason="" if all_ok else _describe(results),
        verdict=verdict if all_ok or forbidden else "unjudged", workloads=results, findings=findings,
        aten_ops=sorted(judge.recorder_ops), autotune=_autotune_configs(cand_mod),
    )


def _describe(results: list[WorkloadResult]) -> str:
    for w in results:
        for t in w.trials:
            if not t.passed:
                where = f" at {t.worst.index} (got {t.worst.got}, expected {t.worst.expected})" if t.worst else ""
                out = f" output {t.output}:" if t.output else ""
                return f"workload {w.name}, trial {t.trial}: {t.rule}:{out} {t.message}{where}"
    return "incorrect"


def main() -> int:
    job = Job.model_validate_json(sys.stdin.read())
    stream = os.fdopen(job.result_fd, "w", buffering=1)
    reporter = Reporter(stream)
    started = time.perf_counter()
    import torch

    device = torch.device("cpu") if job.interpret else torch.device("cuda", torch.cuda.current_device())
    fp = fingerprint(device)
    try:
        result = judge_task(job, reporter)
    except errors.SubmissionError as exc:
        result = TaskResult(slug=job.slug, status="incorrect", error_code=exc.code, reason=str(exc)[:4000])
    except Exception as exc:  # noqa: BLE001 - whatever broke, the parent gets a reason
        tb = traceback.format_exc(limit=8)
        code = errors.INFRA_ERROR if isinstance(exc, errors.EvaluatorError) else errors.USER_EXCEPTION
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
