"""Judging one workload: correctness trials, then interleaved timing of every provider.

Runs in the judge process (``evaluator.child``), which never imports a kernel under test: every
provider runs in a worker process (``evaluator.worker``) and is reached through
:class:`evaluator.workerproc.WorkerProcess`. The judge generates the inputs, writes them into
the worker's arena, keeps the reference outputs, compares what the worker copied into its
slots, checks read-only inputs against its own pristine copies, and times each round trip on
its own clock. Correctness follows EVALUATION.md: fresh seeded inputs per trial, a reference in
higher precision, the eager baseline's own error as the floor of the tolerance, and the
structural checks (exceptions, shapes, dtypes, aliasing, read-only inputs, non-finite values,
unwritten elements). Timing only follows a correct workload.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import torch

from evaluator import compare, errors, op_block, stats
from evaluator.aten_record import LAUNCHER_OPS
from evaluator.inputs import TORCH_DTYPES, Inputs, clone_inputs, make_inputs, upcast
from evaluator.protocol import Call, Done, TensorRef
from evaluator.result import Timing, TrialResult, Worst
from evaluator.shm import rotation_sets, set_bytes
from evaluator.timing_config import TimingConfig
from evaluator.workerproc import WorkerFailure, WorkerProcess
from tasks.registry import Task
from tasks.spec import Workload

Fn = Callable[..., Any]
MAX_RATIO = 1e9  # error ratios are capped so results stay valid JSON (no inf)


#: Trusted providers that are comparisons, not the measurement (name -> what it is). torch.compile
#: cannot compile every eager baseline (in-place writes through views of another dtype, say), and
#: compiling one whose Python loops unroll into a huge graph can outlast any sensible limit. When
#: one fails in any way (an exception, out of memory, a call past ``TimingConfig.optional_call_s``,
#: its worker's death) that is a fact about it, recorded in ``untimed``, and the other providers
#: are still timed: :meth:`Judge.provider_failed` is the rule. Each runs in a worker of its own
#: (evaluator.child), so that stopping it never stops the baseline.
OPTIONAL_PROVIDERS: Mapping[str, str] = MappingProxyType({"compile": "torch.compile of the baseline"})


def as_outputs(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else tuple(value) if isinstance(value, list) else (value,)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def compute_ops(ops: set[str]) -> set[str]:
    """The recorded ATen ops that compute something (not allocation, views or copies)."""
    return {op for op in ops if op.removeprefix("aten::") not in LAUNCHER_OPS}


def call_failure(done: Done) -> tuple[str, str, bool]:
    """(rule, message, sticky) for a call the worker could not complete. ``sticky``: a CUDA error
    (an illegal address) that leaves the worker's context unusable."""
    text = done.message
    if done.rule != "exception":
        return done.rule, text, False
    if "illegal memory access" in text or "illegal address" in text or done.exc_type == "AcceleratorError":
        return "illegal-address", text, True
    if done.exc_type == op_block.ERROR_NAME:
        return "forbidden-op", text, False
    if done.exc_type == "OutOfMemoryError" or "CUDA out of memory" in text:
        return "gpu-oom", text, False
    if done.exc_type == "MemoryError" or "can't allocate memory" in text:
        return "host-oom", text, False
    return done.rule, text, False


def failed_call(done: Done, who: str) -> tuple[str, str]:
    """(rule, message) for a call of the candidate's that its worker could not complete. A sticky
    CUDA error leaves the worker's context unusable, so it ends the task at once."""
    rule, text, sticky = call_failure(done)
    if sticky:
        raise WorkerFailure(f"the {who} triggered a CUDA error: {text}", code=errors.USER_ILLEGAL_ADDRESS)
    return rule, text


#: A candidate's call that ran out of memory: its own failure code, never the timed-call mismatch
#: that marks a cheat.
_OOM_CODES = {"gpu-oom": errors.USER_GPU_OOM, "host-oom": errors.USER_HOST_OOM}


class _ProviderFailure(Exception):
    """A call of a provider other than the candidate's failed (see :meth:`Judge.provider_failed`)."""

    def __init__(self, why: str, gone: bool):
        super().__init__(why)
        self.why = why
        self.gone = gone


class Judge:
    """Judges one task's workloads: the reference and the baseline run here, the candidate in
    its worker, and for timing every provider in the worker that holds it."""

    def __init__(self, task: Task, reference: Fn, baseline: Fn, baseline_module: Any, device: torch.device,
                 candidate: WorkerProcess):
        self.task = task
        self.reference = reference
        self.baseline = baseline
        self.baseline_module = baseline_module
        self.device = device
        self.candidate = candidate
        self.recorder_ops: set[str] = set()
        self.compute_ops: set[str] = set()
        self.autotune: dict[str, str] = {}
        # The expert's own picks where it is timed beside the candidate (ours, so not capped as a
        # claim): an A/B run benches an expert's earlier file as the candidate, and this says
        # which candidate launch the current expert's tuners took in the same run.
        self.expert_autotune: dict[str, str] = {}
        # Wall time of the candidate's first call per workload: where its compilation and
        # autotuning happen (the timing phase's warm-up finds it already compiled).
        self.first_call_s: dict[str, float] = {}
        # Optional providers left untimed for the rest of the task (their worker was stopped): why.
        self.lost: dict[str, str] = {}

    # --- providers other than the candidate's -----------------------------------------------
    def provider_failed(self, name: str, why: str, workload: str, gone: bool) -> str:
        """The one rule for a timed provider other than the candidate's that failed.

        Those providers run our code (the baseline, torch.compile of it, the expert), so their
        failure is never the submission's fault, whatever it was: an exception, running out of
        device memory beside the other providers, a call past its limit, a crash, a protocol
        error. A provider in :data:`OPTIONAL_PROVIDERS` is left untimed: this returns the reason
        for ``WorkloadResult.untimed``, and the candidate is judged and timed as usual. Any other
        (the baseline, which speedups are relative to; the expert, whose worker's overhead is the
        floor of the escape check) ends the task with ``eval:infra:trusted-provider``, retried.

        ``gone``: its worker was killed (a call past its limit) or can no longer be trusted (it
        died, or hit a sticky CUDA error). The provider then stays untimed for the rest of the
        task instead of being restarted: a torch.compile that hung or crashed on one workload
        most likely does so again on the next, each try would cost up to ``optional_call_s`` of
        the task's time that the candidate's own timing needs, and a restart means a new
        process, CUDA context and compilation in the middle of the timing, all for a comparison.
        """
        if name not in OPTIONAL_PROVIDERS:
            raise errors.EvaluatorError(f"the trusted provider {name} failed on workload {workload} (our code, not "
                                        f"the submission's): {why}"[:3000], code=errors.INFRA_TRUSTED)
        lines = [ln.strip() for ln in why.splitlines() if ln.strip()]
        text = " ".join(lines[:2])[:500]
        what = OPTIONAL_PROVIDERS[name]
        if gone:
            self.lost[name] = f"{what} is left untimed since workload {workload}, where it failed: {text}"
        return f"{what} failed: {text}"

    def ready(self, workers: Mapping[str, WorkerProcess], workload: str) -> None:
        """Wait until the timing workers (name -> worker) have loaded their providers (an import of
        the baseline's file, the same in torch.compile's worker: its compilation waits for a call)."""
        for w in {id(w): w for w in workers.values()}.values():
            try:
                w.wait_ready()
            except errors.EvaluatorError as exc:  # a worker of ours did not start
                for name in [n for n, x in workers.items() if x is w]:
                    self.provider_failed(name, str(exc), workload, gone=True)

    def release(self, workers: Mapping[str, WorkerProcess], workload: str) -> None:
        """Between workloads (after the trials, after the timing), the judge and each worker give
        the device memory their caching allocators keep back to the driver.

        The providers take turns on one GPU in separate processes, and each keeps the blocks of
        its largest temporaries: on the H200 an eager baseline materializing [tokens, vocab]
        fp32 logits left tens of GiB cached in the judge and the trusted worker, and the expert
        ran out of memory beside them. Never between timed calls: the next call would pay for
        fresh allocations inside its timed region (the warm-up calls fill the caches again).
        """
        if self.device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
        for w in {id(w): w for n, w in workers.items() if n not in self.lost and w.ready}.values():
            try:
                w.release()
            except errors.EvaluatorError as exc:  # a worker of ours failed (the candidate's raise SubmissionError)
                for name in [n for n, x in workers.items() if x is w]:
                    self.provider_failed(name, str(exc), workload, gone=True)

    def _call_limit(self, name: str, w: WorkerProcess, cfg: TimingConfig) -> float | None:
        """The longest one call of ``name`` may take: ``optional_call_s`` for an optional provider,
        and never more than half of the task's time left, so that the candidate's timing still
        fits after one hung; None (the task's deadline) for the others."""
        if name not in OPTIONAL_PROVIDERS:
            return None
        return max(1.0, min(cfg.optional_call_s, 0.5 * (w.cfg.deadline - time.monotonic())))

    # --- correctness -----------------------------------------------------------------------
    def reference_outputs(self, inputs: Inputs, params: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        mode = self.task.spec.reference.mode
        if mode == "function":
            outs = as_outputs(self.reference(**clone_inputs(inputs)))
        else:
            dtype = torch.float64 if mode == "baseline_fp64" else torch.float32
            outs = as_outputs(self.baseline(**upcast(clone_inputs(inputs), dtype)))
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

    def check_values(self, outs: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...], cand_inputs: Inputs,
                     pristine: Inputs, params: Mapping[str, Any],
                     allowed: list[float] | None) -> tuple[TrialResult | None, dict[str, float]]:
        """The checks the judge makes on its own memory: read-only inputs, inputs updated in place,
        then each output (copied by the worker into the judge's slots) against the reference."""
        spec = self.task.spec
        ratios: dict[str, float] = {}
        for arg in spec.inputs:
            if not arg.writable and not _bits_equal(cand_inputs[arg.name], pristine[arg.name]):
                return _fail("read-only", arg.name, "a read-only input was modified"), ratios
        updated = {a.name for a in spec.inputs if a.updated}
        for out, decl in zip(outs, spec.outputs, strict=True):
            # A kernel that returns a fresh copy but leaves the cache (or state) unwritten would be
            # useless in the server it comes from, whatever its returned values.
            if decl.may_alias in updated and not _bits_equal(cand_inputs[decl.may_alias], out):
                return _fail("in-place", decl.may_alias, f"{decl.may_alias} must be updated in place, but after the "
                                                         f"call it does not hold the returned {decl.name}"), ratios
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
        outs = self.canonical(as_outputs(self.baseline(**clone_inputs(inputs))), inputs, params)
        allowed = []
        for i, decl in enumerate(self.task.spec.outputs):
            base = compare.error_ratio(outs[i], ref[i], self._output_dtype(i, params), decl.compare)
            allowed.append(compare.allowed_ratio(decl.compare, base.ratio))
        return allowed

    def output_shapes(self, params: Mapping[str, Any]) -> list[tuple[tuple[int, ...], torch.dtype]]:
        return [(self.task.shape_of(o.shape, params), TORCH_DTYPES[self._output_dtype(i, params)])
                for i, o in enumerate(self.task.spec.outputs)]

    def run_trial(self, workload: Workload, trial: int, seed: int) -> TrialResult:
        """One correctness trial of the candidate on fresh inputs from ``seed``.

        The candidate's first call of a workload runs without the ATen-op recorder. That call is
        where a kernel compiles and times its own choices (an autotuner, a route pick), and the
        recorder, a Python dispatch mode, adds host time to every ATen op the timing loop
        dispatches (the L2 flush, the launcher's allocations): on an H100 it made fp8-blockwise's
        expert pick a slower decode tile in 3 of 6 recorded first calls and in none of 6 plain
        ones (docs/results/h100-runs/s35-fcp-fp8-blockwise-gemm-W4.md). The expert's first call,
        its warm-up, never had the recorder, so without this a self-tuning submission was timed
        with a handicap the bar it is compared with did not carry. Nothing is lost to cheats: the task's forbidden
        ops are refused in the dispatcher on every call (``evaluator.op_block``), and the
        workload's later trials are recorded (a task has at least three).
        """
        params = workload.params
        first = workload.name not in self.first_call_s
        inputs = make_inputs(self.task, params, seed, self.device, self.baseline_module)
        ref = self.reference_outputs(inputs, params)
        allowed = self.baseline_allowance(inputs, ref, params)
        arena = self.candidate.arena
        arena.reset()
        args: dict[str, Any] = {}
        views: Inputs = {}
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor):
                args[name], views[name] = arena.place(value)
            else:
                args[name] = views[name] = value
        slots = [arena.slot(shape, dtype) for shape, dtype in self.output_shapes(params)]
        _sync(self.device)
        done, _ = self.candidate.call(Call(seq=0, provider="candidate", mode="check", args=args,
                                           outs=[r for r, _ in slots], record=not first))
        self.recorder_ops |= set(done.ops)
        self.compute_ops |= compute_ops(set(done.ops))
        self.autotune.update(done.autotune)
        self.first_call_s.setdefault(workload.name, done.device_ms / 1e3)
        if not done.ok:
            rule, message = failed_call(done, "kernel")
            return TrialResult(trial=trial, seed=seed, passed=False, rule=rule, output=done.output,
                               message=message[:2000])
        forbidden = set(self.task.spec.forbidden.aten) & set(done.ops)
        if forbidden:
            return TrialResult(trial=trial, seed=seed, passed=False, rule="forbidden-op",
                               message=f"called {', '.join(sorted(forbidden))}: {self.task.spec.forbidden.reason}")
        outs = tuple(v.clone() for _, v in slots)
        failure, ratios = self.check_values(outs, ref, views, inputs, params, allowed)
        if failure is not None:
            return failure.model_copy(update={"trial": trial, "seed": seed})
        return TrialResult(trial=trial, seed=seed, passed=True, error_ratio=ratios)

    # --- timing ------------------------------------------------------------------------------
    def time_workload(self, workload: Workload, seeds: list[int], cfg: TimingConfig, workers: dict[str, WorkerProcess],
                      progress: Callable[[str], None]) -> tuple[dict[str, Timing], str, list[str], dict[str, str]]:
        """Interleaved timing of every provider in ``workers`` (name -> the worker holding it).

        Every call gets fresh secret inputs, written into the worker's arena by the judge, so a
        cache keyed on pointers or content never hits; a random sample of the candidate's timed
        calls is compared with the reference (the worker copies every call's outputs, so it cannot
        tell which). A provider other than the candidate's that fails follows
        :meth:`provider_failed`. Returns timings, the stop reason, findings and the providers left
        untimed (why).
        """
        params = workload.params
        dev = self.device
        untimed: dict[str, str] = {p: self.lost[p] for p in workers if p in self.lost}  # why, not a finding
        workers = {p: w for p, w in workers.items() if p not in self.lost}  # dropped below: this workload only
        rng = random.Random(seeds[-1])
        template = make_inputs(self.task, params, seeds[0], dev, self.baseline_module)
        outputs = self.output_shapes(params)
        sets = rotation_sets(cfg.sets, set_bytes(self.task.nbytes(params)), cfg.pool_bytes)
        # Per arena: torch.compile's worker shares the baseline's (both ours, never called at once).
        layout: dict[int, list[tuple[dict[str, Any], list[TensorRef]]]] = {}
        for arena in {id(w.arena): w.arena for w in workers.values()}.values():
            arena.reset()
            rows = []
            for _ in range(sets):
                args = {n: (arena.alloc(tuple(v.shape), tuple(v.stride()), v.dtype) if isinstance(v, torch.Tensor)
                            else v) for n, v in template.items()}
                outs = [arena.slot(shape, dtype)[0] for shape, dtype in outputs]
                rows.append((args, outs))
            layout[id(arena)] = rows
        flush = torch.empty(cfg.flush_bytes // 4, dtype=torch.float32, device=dev) if dev.type == "cuda" else None
        times: dict[str, list[float]] = {p: [] for p in workers}
        walls: dict[str, list[float]] = {p: [] for p in workers}
        compile_s: dict[str, float] = {}
        checked: dict[str, int] = {p: 0 for p in workers}
        peak: dict[str, int] = {}
        findings: list[str] = []
        kept: dict[tuple[str, int], Inputs] = {}  # the values reused per set when fresh_inputs is off

        def call(name: str, k: int, mode: str, check: bool = False, measure_peak: bool = False) -> Done:
            w = workers[name]
            args, outs = layout[id(w.arena)][k]
            seed = rng.getrandbits(62)
            if cfg.fresh_inputs or check or (name, k) not in kept:
                fresh = make_inputs(self.task, params, seed, dev, self.baseline_module)
                if not cfg.fresh_inputs and not check:
                    kept[(name, k)] = fresh
            else:
                fresh = kept[(name, k)]
            views = {n: (w.arena.view(r) if isinstance(r, TensorRef) else r) for n, r in args.items()}
            for n, v in fresh.items():
                if isinstance(v, torch.Tensor):
                    views[n].copy_(v)
            if flush is not None and cfg.judge_flush:
                flush.zero_()
            _sync(dev)
            ours = w is not self.candidate
            try:
                done, wall = w.call(Call(seq=0, provider=name, mode=mode, args=args, outs=outs,
                                         measure_peak=measure_peak), limit_s=self._call_limit(name, w, cfg))
            except errors.EvaluatorError as exc:  # a worker of ours hung, died or misbehaved (the
                # candidate's worker raises SubmissionError instead, which keeps its user code)
                raise _ProviderFailure(str(exc), gone=True) from exc
            if not done.ok:
                if ours:
                    rule, message, sticky = call_failure(done)
                    where = f"{done.output}: " if done.output else ""
                    raise _ProviderFailure(f"{rule}: {where}{message}", gone=sticky)
                rule, message = failed_call(done, name)
                if rule == "forbidden-op":
                    raise errors.SubmissionError(f"a timed call of {name} called a forbidden op: {message}"[:3000],
                                                 code=errors.USER_FORBIDDEN)
                if rule in _OOM_CODES:  # an honest failure (the GPU is shared with the other providers'
                    # workers while timing), not a kernel behaving differently when timed
                    raise errors.SubmissionError(f"a timed call of {name} ran out of memory: {message}"[:3000],
                                                 code=_OOM_CODES[rule])
                raise errors.SubmissionError(f"a timed call of {name} failed: {rule}: {done.output} {message}"[:3000],
                                             code=errors.USER_TIMED_MISMATCH)
            if name == "expert":
                self.expert_autotune.update(done.autotune)
            if mode == "time":
                times[name].append(done.device_ms)
                walls[name].append(wall)
            if check:
                checked[name] += 1
                ref = self.reference_outputs(fresh, params)
                allowed = self.baseline_allowance(fresh, ref, params)
                got = tuple(w.arena.view(r).clone() for r in outs)
                failure, _ = self.check_values(got, ref, views, fresh, params, allowed)
                del ref, got
                if dev.type == "cuda":
                    # The reference and the eager baseline just ran here: give their temporaries back
                    # before the next timed call, which another process may need the memory for.
                    torch.cuda.empty_cache()
                if failure is not None:
                    raise errors.SubmissionError(
                        f"a timed call of {name} on fresh inputs gave a wrong answer: "
                        f"{failure.rule} on {failure.output}: {failure.message}", code=errors.USER_TIMED_MISMATCH)
            return done

        def attempt(name: str, k: int, mode: str, **kw: bool) -> Done | None:
            """``call``; None when the provider failed and was dropped (:meth:`provider_failed`)."""
            try:
                return call(name, k, mode, **kw)
            except _ProviderFailure as exc:
                untimed[name] = self.provider_failed(name, exc.why, workload.name, exc.gone)
                for table in (workers, times, walls, checked, compile_s, peak):
                    table.pop(name, None)
                return None

        for name in list(workers):
            progress(f"warm-up {name}")
            done = attempt(name, 0, "warm")
            if done is None:
                continue
            compile_s[name] = done.device_ms / 1e3
            if name.startswith("candidate"):
                compile_s[name] = max(compile_s[name], self.first_call_s.get(workload.name, 0.0))
            for i in range(cfg.warmup - 1):
                if attempt(name, (i + 1) % sets, "warm") is None:
                    break
            if name in workers and self.task.spec.peak_memory and dev.type == "cuda":
                done = attempt(name, 0, "warm", measure_peak=True)
                if done is not None:
                    peak[name] = done.peak_mem_bytes or 0

        spent_ms = 0.0
        reason = "max count"
        loop_start = time.perf_counter()
        order = list(workers)
        drawn = _drawn_rounds(rng, cfg)
        for rnd in range(cfg.max_count):
            rng.shuffle(order)
            k = rnd % sets
            for name in list(order):
                check = name.startswith("candidate") and checked[name] < cfg.max_checks and (
                    rnd in drawn or rng.random() < cfg.check_probability)
                done = attempt(name, k, "time", check=check)
                if done is None:
                    order.remove(name)
                    continue
                spent_ms += done.device_ms
            if rnd + 1 >= cfg.min_count and all(
                stats.converged(v, cfg.target_rel_stderr, cfg.min_count) for v in times.values()
            ):
                reason = "converged"
                break
            if spent_ms / 1e3 > cfg.budget_s and rnd + 1 >= cfg.min_count:
                reason = "time budget"
                break
            if time.perf_counter() - loop_start > cfg.wall_budget_s and rnd + 1 >= cfg.min_count:
                reason = "wall budget"
                break
            if rnd % 10 == 0:
                progress(f"timing round {rnd + 1}")

        gaps = {p: [w - t for w, t in zip(walls[p], times[p], strict=True)] for p in workers}
        residual = {p: statistics.median(g) for p, g in gaps.items()}
        floor = _residual_floor(residual, workers)
        result: dict[str, Timing] = {}
        for name, values in times.items():
            s = sorted(values)
            med = statistics.median(s)
            excess = residual[name] - floor
            if name.startswith("candidate"):
                findings += _escape_check(name, workload.name, med, excess, floor, cfg)
            host_ms = med + max(0.0, excess)
            result[name] = Timing(
                median_ms=med, q1_ms=stats.quantile(s, 0.25), q3_ms=stats.quantile(s, 0.75),
                mean_ms=statistics.fmean(s), min_ms=s[0], count=len(s), rel_stderr=stats.rel_stderr(s),
                host_over_device=min(host_ms / med, MAX_RATIO) if med > 0 else MAX_RATIO,
                compile_s=compile_s[name], checked_calls=checked[name], peak_mem_bytes=peak.get(name),
                residual_ms=residual[name], **_halves("residual", gaps[name]), **_halves("median", values),
            )
        return result, reason, findings, untimed


def _drawn_rounds(rng: random.Random, cfg: TimingConfig) -> frozenset[int]:
    """The rounds whose candidate calls are checked whatever the chance says: the first, and
    ``min_checks - 1`` more drawn from the first ``min_count`` (the loop never stops before those).
    The candidate cannot tell a checked call from another, so where they fall is no signal to it."""
    later = range(1, max(cfg.min_count, 1))
    return frozenset({0, *rng.sample(later, k=max(0, min(cfg.min_checks - 1, len(later))))})


def _halves(prefix: str, values: list[float]) -> dict[str, float | None]:
    """``<prefix>_first_half_ms`` and ``<prefix>_second_half_ms``: the median of a provider's values
    over the first and the second half of its timed calls (in timing order), which tell a
    first-calls transient from a steady level; None with fewer than two calls."""
    half = len(values) // 2
    if half == 0:
        return {f"{prefix}_first_half_ms": None, f"{prefix}_second_half_ms": None}
    return {f"{prefix}_first_half_ms": statistics.median(values[:half]),
            f"{prefix}_second_half_ms": statistics.median(values[half:])}


def _residual_floor(residual: dict[str, float], workers: Mapping[str, Any]) -> float:
    """The round-trip overhead a call has when nothing escapes its timer, for the candidate's to be
    compared with.

    It is taken from trusted providers in workers set up like the candidate's (sandboxed and
    watched: the expert's), because that set-up costs every call a fixed overhead of its own: on
    the H200 under gVisor, expert kernels in such a worker showed 40-120 us more per call than the
    baseline in the plain trusted worker, the same for the expert as the candidate and nothing
    that escaped a timer. Only where no such worker was timed does the trusted worker's floor serve.
    """
    twins = [residual[p] for p in workers if not p.startswith("candidate") and workers[p].cfg.untrusted]
    trusted = [residual[p] for p in workers if not p.startswith("candidate")]
    return min(twins or trusted or list(residual.values()))


def _escape_check(name: str, workload: str, median_ms: float, excess_ms: float, round_trip_ms: float,
                  cfg: TimingConfig) -> list[str]:
    """Work that escaped the worker's timer: a rejection when large (beyond the thresholds and
    beyond ``escape_reject_of_floor`` of ``round_trip_ms``, the floor's own overhead, whose
    process-to-process spread honest kernels show), a finding when noticeable."""
    frac, floor_ms = cfg.escape_reject
    what = (f"{name} at {workload}: the judge's clock saw {excess_ms * 1e3:.0f} us per call more than the worker's "
            f"timer reported ({median_ms * 1e3:.0f} us), compared with the trusted providers timed the same way "
            f"(their round trip: {round_trip_ms * 1e3:.0f} us a call beyond the timer)")
    if excess_ms > max(frac * median_ms, floor_ms, cfg.escape_reject_of_floor * round_trip_ms):
        raise errors.SubmissionError(what + ": work escaped the timer (side stream, thread, or a patched clock)",
                                     code=errors.USER_TIMING_INTEGRITY)
    frac, floor_ms = cfg.escape_finding
    if excess_ms > max(frac * median_ms, floor_ms):
        return [what + " (work outside the timed region?)"]
    return []


def _fail(rule: str, output: str, message: str) -> TrialResult:
    return TrialResult(trial=0, seed=0, passed=False, rule=rule, output=output, message=message)
