"""Judging one workload: correctness trials, then interleaved timing of every provider.

Runs inside the per-task child process (``evaluator.child``). Correctness follows
EVALUATION.md: fresh seeded inputs per trial, a reference in higher precision, the eager
baseline's own error as the floor of the tolerance, and the structural checks (exceptions,
shapes, dtypes, aliasing, read-only inputs, non-finite values, unwritten elements). Timing only
follows a correct workload.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator import compare, errors, stats
from evaluator.aten_record import AtenRecorder
from evaluator.inputs import TORCH_DTYPES, Inputs, clone_inputs, make_inputs, tensor_bytes, upcast
from evaluator.result import Timing, TrialResult, Worst
from tasks.registry import Task
from tasks.spec import Workload

Fn = Callable[..., Any]
MAX_RATIO = 1e9  # error ratios are capped so results stay valid JSON (no inf)


@dataclass
class TimingConfig:
    """The stopping rule and its guards (EVALUATION.md, Timing)."""

    target_rel_stderr: float = 0.005
    min_count: int = 20
    max_count: int = 2000
    budget_s: float = 4.0  # device time per workload, all providers together
    warmup: int = 3
    check_probability: float = 0.1  # chance that a timed candidate call is also compared
    max_sets: int = 6
    memory_fraction: float = 0.25  # of free device memory for rotated input sets
    flush_bytes: int = 256 * 2**20  # written before every timed call to empty the L2


@dataclass
class Sides:
    """The callables judged on one task."""

    reference: Fn
    baseline: Fn
    candidate: Fn
    extra: dict[str, Fn] = field(default_factory=dict)  # "compile", "expert", "candidate-again"


def as_outputs(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else tuple(value) if isinstance(value, list) else (value,)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _poison_allocator(device: torch.device, nbytes: int) -> None:
    """Leave NaN in the blocks the caching allocator will hand out next, so an output element
    the kernel never writes reads back as NaN instead of a plausible stale value."""
    if device.type != "cuda" or nbytes <= 0:
        return
    blocks = [torch.full((max(1, nbytes // 4),), float("nan"), dtype=torch.float32, device=device) for _ in range(2)]
    del blocks


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def _storage_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


class Judge:
    """Judges one task's workloads with the sides it is given."""

    def __init__(self, task: Task, sides: Sides, baseline_module: Any, device: torch.device):
        self.task = task
        self.sides = sides
        self.baseline_module = baseline_module
        self.device = device
        self.recorder_ops: set[str] = set()
        self.compute_ops: set[str] = set()
        # Wall time of the candidate's first call per workload: where its compilation and
        # autotuning happen (the timing phase's warm-up finds it already compiled).
        self.first_call_s: dict[str, float] = {}

    # --- correctness -----------------------------------------------------------------------
    def reference_outputs(self, inputs: Inputs, params: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        mode = self.task.spec.reference.mode
        if mode == "function":
            outs = as_outputs(self.sides.reference(**clone_inputs(inputs)))
        else:
            dtype = torch.float64 if mode == "baseline_fp64" else torch.float32
            outs = as_outputs(self.sides.baseline(**upcast(clone_inputs(inputs), dtype)))
        return self.canonical(outs, inputs, params)

    def canonical(self, outs: tuple[Any, ...], inputs: Inputs, params: Mapping[str, Any]) -> tuple[Any, ...]:
        """The task's ``canonicalize`` hook (task.toml ``canonicalize = true``), or the outputs as they are.

        ``inputs`` are the pristine inputs of the call: a candidate may have overwritten its own.
        """
        if not self.task.spec.canonicalize:
            return outs
        canon = as_outputs(self.baseline_module.canonicalize(tuple(outs), clone_inputs(inputs), dict(params)))
        if len(canon) != len(self.task.spec.outputs):
            raise RuntimeError(f"{self.task.slug}: canonicalize() returned {len(canon)} tensors, "
                               f"the task has {len(self.task.spec.outputs)} outputs")
        return canon

    def _output_dtype(self, i: int, params: Mapping[str, Any]) -> str:
        return self.task.dtype_of(self.task.spec.outputs[i].dtype, params)

    def check_outputs(self, outs: tuple[Any, ...], ref: tuple[torch.Tensor, ...], cand_inputs: Inputs,
                      pristine: Inputs, params: Mapping[str, Any],
                      allowed: list[float] | None) -> tuple[TrialResult | None, dict[str, float]]:
        """Structural and numerical checks of one call; returns (failure or None, error ratios)."""
        spec = self.task.spec
        if len(outs) != len(spec.outputs):
            return TrialResult(trial=0, seed=0, passed=False, rule="arity",
                               message=f"returned {len(outs)} outputs, the task has {len(spec.outputs)}"), {}
        ratios: dict[str, float] = {}
        for i, (out, decl) in enumerate(zip(outs, spec.outputs, strict=True)):
            if type(out) is not torch.Tensor:
                return _fail("type", decl.name, f"output is {type(out).__name__}, not a plain torch.Tensor"), ratios
            want_shape = self.task.shape_of(decl.shape, params)
            if tuple(out.shape) != want_shape:
                return _fail("shape", decl.name, f"shape {tuple(out.shape)}, expected {want_shape}"), ratios
            want_dtype = TORCH_DTYPES[self._output_dtype(i, params)]
            if out.dtype != want_dtype:
                return _fail("dtype", decl.name, f"dtype {out.dtype}, expected {want_dtype}"), ratios
            if out.device != self.device:
                return _fail("device", decl.name, f"on {out.device}, expected {self.device}"), ratios
            for name, value in cand_inputs.items():
                if isinstance(value, torch.Tensor) and name != decl.may_alias and _storage_overlaps(out, value):
                    return _fail("alias", decl.name, f"shares memory with input {name!r}"), ratios
            for j, other in enumerate(outs[:i]):
                if isinstance(other, torch.Tensor) and _storage_overlaps(out, other):
                    return _fail("alias", decl.name, f"shares memory with output {spec.outputs[j].name!r}"), ratios
        for arg in spec.inputs:
            if not arg.writable and not _bits_equal(cand_inputs[arg.name], pristine[arg.name]):
                return _fail("read-only", arg.name, "a read-only input was modified"), ratios
        try:
            outs = self.canonical(outs, pristine, params)
        except Exception as exc:  # outputs of the right shape and dtype can still be nonsense
            return _fail("canonicalize", "", f"outputs could not be put in canonical form: "
                                             f"{type(exc).__name__}: {exc}"[:2000]), ratios
        for i, (out, decl) in enumerate(zip(outs, spec.outputs, strict=True)):
            outcome = compare.error_ratio(out, ref[i], self._output_dtype(i, params), decl.compare)
            limit = allowed[i] if allowed else 1.0
            ratios[decl.name] = min(outcome.ratio / limit, MAX_RATIO)
            if not outcome.ratio <= limit:
                worst = None
                if outcome.worst_index is not None:
                    worst = Worst(index=list(outcome.worst_index), got=f"{outcome.got:.6g}",
                                  expected=f"{outcome.expected:.6g}")
                msg = outcome.message + (f"; allowed ratio {limit:.3g} (eager's own error)" if limit > 1 else "")
                return TrialResult(trial=0, seed=0, passed=False, rule=outcome.rule, output=decl.name,
                                   message=msg, worst=worst, error_ratio=ratios), ratios
        return None, ratios

    def baseline_allowance(self, inputs: Inputs, ref: tuple[torch.Tensor, ...],
                           params: Mapping[str, Any]) -> list[float]:
        """Per output: the ratio the candidate may reach, from eager's own error (TASKS.md 0.5)."""
        outs = self.canonical(as_outputs(self.sides.baseline(**clone_inputs(inputs))), inputs, params)
        allowed = []
        for i, decl in enumerate(self.task.spec.outputs):
            base = compare.error_ratio(outs[i], ref[i], self._output_dtype(i, params), decl.compare)
            allowed.append(compare.allowed_ratio(decl.compare, base.ratio))
        return allowed

    def run_trial(self, workload: Workload, trial: int, seed: int) -> TrialResult:
        params = workload.params
        inputs = make_inputs(self.task, params, seed, self.device, self.baseline_module)
        ref = self.reference_outputs(inputs, params)
        allowed = self.baseline_allowance(inputs, ref, params)
        cand_inputs = clone_inputs(inputs)
        out_bytes = sum(r.numel() * r.element_size() for r in ref)
        _poison_allocator(self.device, out_bytes)
        _sync(self.device)
        recorder = AtenRecorder()
        t0 = time.perf_counter()
        try:
            with recorder:
                outs = as_outputs(self.sides.candidate(**cand_inputs))
            _sync(self.device)
            self.first_call_s.setdefault(workload.name, time.perf_counter() - t0)
        except Exception as exc:  # the candidate's exception is a result, not a crash of ours
            return TrialResult(trial=trial, seed=seed, passed=False, rule="exception",
                               message=f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            self.recorder_ops |= recorder.ops
            self.compute_ops |= recorder.compute_ops()
        forbidden = set(self.task.spec.forbidden.aten) & recorder.ops
        if forbidden:
            return TrialResult(trial=trial, seed=seed, passed=False, rule="forbidden-op",
                               message=f"called {', '.join(sorted(forbidden))}: {self.task.spec.forbidden.reason}")
        failure, ratios = self.check_outputs(outs, ref, cand_inputs, inputs, params, allowed)
        if failure is not None:
            return failure.model_copy(update={"trial": trial, "seed": seed})
        return TrialResult(trial=trial, seed=seed, passed=True, error_ratio=ratios)

    # --- timing ------------------------------------------------------------------------------
    def time_workload(self, workload: Workload, seeds: list[int], cfg: TimingConfig,
                      progress: Callable[[str], None]) -> tuple[dict[str, Timing], str, list[str]]:
        """Interleaved timing of baseline, candidate and extras; returns timings, stop reason, findings."""
        params = workload.params
        dev = self.device
        first = make_inputs(self.task, params, seeds[0], dev, self.baseline_module)
        set_bytes = max(1, tensor_bytes(first))
        free, _ = torch.cuda.mem_get_info(dev)
        n_sets = int(max(2, min(cfg.max_sets, (free * cfg.memory_fraction) // (3 * set_bytes))))
        sets: list[Inputs] = [first] + [
            make_inputs(self.task, params, s, dev, self.baseline_module) for s in seeds[1:n_sets]
        ]
        n_sets = len(sets)
        writable = [a.name for a in self.task.spec.inputs if a.writable]
        refs = [tuple(r.float() if r.is_floating_point() else r for r in self.reference_outputs(s, params))
                for s in sets]
        allowed = [self.baseline_allowance(s, refs[k], params) for k, s in enumerate(sets)]
        work = [clone_inputs(s) for s in sets]
        flush = torch.empty(cfg.flush_bytes // 4, dtype=torch.float32, device=dev)

        providers: dict[str, Fn] = {"baseline": self.sides.baseline, "candidate": self.sides.candidate,
                                    **self.sides.extra}
        times: dict[str, list[float]] = {p: [] for p in providers}
        host: dict[str, list[float]] = {p: [] for p in providers}
        compile_s: dict[str, float] = {}
        checked: dict[str, int] = {p: 0 for p in providers}
        findings: list[str] = []
        rng = random.Random(seeds[-1])

        def call(name: str, k: int, timed: bool) -> tuple[float, float, Any]:
            args = work[k]
            for n in writable:
                args[n].copy_(sets[k][n])
            torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # The flush is queued and the call launched behind it without waiting: the host's
            # launch latency overlaps the flush, so the events time the device work alone.
            t0 = time.perf_counter()
            flush.zero_()
            start.record()
            out = providers[name](**args)
            end.record()
            torch.cuda.synchronize(dev)  # device-wide: work on a side stream is waited for too
            t1 = time.perf_counter()
            return start.elapsed_time(end), (t1 - t0) * 1e3, out

        flush_ms = _flush_time_ms(flush)
        for name in providers:
            progress(f"warm-up {name}")
            t0 = time.perf_counter()
            call(name, 0, False)
            compile_s[name] = time.perf_counter() - t0
            if name.startswith("candidate"):
                compile_s[name] = max(compile_s[name], self.first_call_s.get(workload.name, 0.0))
            for i in range(cfg.warmup - 1):
                call(name, (i + 1) % n_sets, False)

        peak: dict[str, int] = {}
        if self.task.spec.peak_memory:
            for name in providers:
                torch.cuda.synchronize(dev)
                before = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                out = call(name, 0, False)[2]
                peak[name] = max(0, torch.cuda.max_memory_allocated(dev) - before)
                del out

        spent_ms = 0.0
        reason = "max count"
        order = list(providers)
        for rnd in range(cfg.max_count):
            rng.shuffle(order)
            k = rnd % n_sets
            for name in order:
                ms, host_ms, out = call(name, k, True)
                times[name].append(ms)
                host[name].append(host_ms)
                spent_ms += ms
                if name.startswith("candidate") and (rng.random() < cfg.check_probability or rnd == 0):
                    checked[name] += 1
                    failure, _ = self.check_outputs(as_outputs(out), refs[k], work[k], sets[k], params, allowed[k])
                    if failure is not None:
                        raise errors.SubmissionError(
                            f"a timed call of {name} on input set {k} gave a wrong answer: "
                            f"{failure.rule} on {failure.output}: {failure.message}",
                            code=errors.USER_TIMED_MISMATCH)
                del out
            if rnd + 1 >= cfg.min_count and all(
                stats.converged(v, cfg.target_rel_stderr, cfg.min_count) for v in times.values()
            ):
                reason = "converged"
                break
            if spent_ms / 1e3 > cfg.budget_s and rnd + 1 >= cfg.min_count:
                reason = "time budget"
                break
            if rnd % 10 == 0:
                progress(f"timing round {rnd + 1}")

        result: dict[str, Timing] = {}
        for name, values in times.items():
            s = sorted(values)
            med = statistics.median(s)
            # Host time covers the queued flush too; take it out before comparing with the events.
            host_ms = max(0.0, statistics.median(host[name]) - flush_ms)
            ratio = min(host_ms / med, MAX_RATIO) if med > 0 else MAX_RATIO
            if name.startswith("candidate") and ratio > 3.0 and host_ms > 0.5:
                findings.append(f"{name}: host time is {ratio:.1f}x the event time (work outside the timed stream?)")
            result[name] = Timing(
                median_ms=med, q1_ms=stats.quantile(s, 0.25), q3_ms=stats.quantile(s, 0.75),
                mean_ms=statistics.fmean(s), min_ms=s[0], count=len(s), rel_stderr=stats.rel_stderr(s),
                host_over_device=ratio, compile_s=compile_s[name], checked_calls=checked[name],
                peak_mem_bytes=peak.get(name),
            )
        sets.clear()
        work.clear()
        refs.clear()
        return result, reason, findings


def _fail(rule: str, output: str, message: str) -> TrialResult:
    return TrialResult(trial=0, seed=0, passed=False, rule=rule, output=output, message=message)


def _flush_time_ms(flush: torch.Tensor) -> float:
    """Median device time of one L2 flush, subtracted from host times (which include it)."""
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        flush.zero_()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
