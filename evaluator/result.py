"""The versioned JSON result of a run: what the CLI prints with ``--json`` and the portal stores.

These models are the one definition of the format. The child process reports through them (the
parent re-validates whatever arrives on its channel, so a malformed or forged report is an
error, never a result), and ``docs/result-schema.json`` is generated from them
(``python -m evaluator schema``). Bump :data:`RESULT_SCHEMA_VERSION` on any incompatible change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RESULT_SCHEMA_VERSION = 1

TaskStatus = Literal["correct", "incorrect", "error", "timeout", "crashed", "skipped"]
Verdict = Literal["clean", "suspicious", "rejected-cheat", "bug", "unjudged"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Worst(_Model):
    """The element that broke a comparison the most."""

    index: list[int]
    got: str  # printed, so NaN and inf survive JSON
    expected: str


class TrialResult(_Model):
    trial: int
    seed: int
    passed: bool
    rule: str = ""  # the rule that failed: exception, shape, dtype, nan, tolerance, alias, ...
    output: str = ""  # which output (or input, for in-place and read-only checks)
    message: str = ""
    worst: Worst | None = None
    error_ratio: dict[str, float] = {}  # per output: error / allowed error (<= 1 passes)


class Timing(_Model):
    """Device-event times of one provider on one workload, in milliseconds."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    mean_ms: float
    min_ms: float
    count: int
    rel_stderr: float  # standard error of the mean over the median
    host_over_device: float  # median host wall time / median event time for the same calls
    compile_s: float  # first call (compile, autotune, load), excluded from the numbers
    checked_calls: int = 0  # timed calls whose output was compared with the reference
    peak_mem_bytes: int | None = None  # device memory the call allocated at its peak (peak_memory tasks)
    # The round trip around the device time (judge's wall clock minus the worker's events, per
    # call): its median over all timed calls, over the first and over the second half of them. The
    # escape check compares the first with the floor; the halves tell a warm-up transient (first >
    # second) from a steady overhead when a finding has to be explained.
    residual_ms: float | None = None
    residual_first_half_ms: float | None = None
    residual_second_half_ms: float | None = None
    # The device time's median over the first and the second half of the timed calls: whether a
    # worker ran slower early in its run (without the pre-call hold, two workers timing the same
    # kernel differed by up to 11% on short calls, docs/results/h200-same-kernel.md).
    median_first_half_ms: float | None = None
    median_second_half_ms: float | None = None


class WorkloadResult(_Model):
    name: str
    smoke: bool
    model: str = ""
    params: dict[str, int | float | str | bool]
    flops: float
    bytes: float
    correct: bool
    trials: list[TrialResult]
    timings: dict[str, Timing] = {}  # provider -> timing ("baseline", "candidate", "compile", ...)
    speedup: dict[str, float] = {}  # provider -> baseline median / provider median
    sol_ms: float | None = None
    sol_fraction: dict[str, float] = {}  # provider -> SOL time / provider median
    stop_reason: str = ""  # why timing stopped: "converged", "time budget", "wall budget", "max count"
    findings: list[str] = []
    untimed: dict[str, str] = {}  # provider -> why it has no time (e.g. torch.compile failed on the baseline)


class Finding(_Model):
    """Something a moderator should see: a static-scan hit, a forbidden op, a physics violation."""

    kind: str
    message: str
    line: int | None = None
    file: str = ""  # the bundle file a static-scan finding is in


class TaskResult(_Model):
    slug: str
    status: TaskStatus
    error_code: str = ""
    reason: str = ""
    verdict: Verdict = "unjudged"
    workloads: list[WorkloadResult] = []
    findings: list[Finding] = []
    aten_ops: list[str] = []  # ATen ops the candidate called during checked calls
    autotune: dict[str, str] = {}  # "tuner [key]" -> its pick; "choice <key>" -> a TIMED_CHOICES entry
    expert_autotune: dict[str, str] = {}  # the same for the expert, where it was timed beside the candidate
    wall_s: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""


class Fingerprint(_Model):
    engine_version: str
    python: str
    torch: str
    triton: str
    platform: str
    hostname_hash: str
    gpu_name: str = ""
    gpu_count: int = 0
    sm_count: int = 0
    l2_bytes: int = 0
    memory_bytes: int = 0
    driver: str = ""
    cuda: str = ""
    clocks_start: dict[str, str] = {}
    clocks_end: dict[str, str] = {}


class HardwareProfileRecord(_Model):
    name: str
    gpu_match: str
    memory_bandwidth_gbs: float
    peak_tflops: dict[str, float]
    l2_flush_bytes: int
    timing: bool
    provenance: str = ""


#: The candidate label of a run that judges the tasks' own expert kernels (``... references``).
REFERENCES_LABEL = "expert references"


class Candidate(_Model):
    path: str
    sha256: str
    label: str = "candidate"

    @property
    def is_expert(self) -> bool:
        """Whether the candidate is the tasks' expert, so that its column and the ``expert``
        provider's time the same kernel."""
        return self.label == REFERENCES_LABEL


class RunResult(_Model):
    schema_version: Literal[1] = RESULT_SCHEMA_VERSION
    engine_version: str
    command: Literal["check", "bench"]
    mode: Literal["gpu", "interpreter"]
    timing_taken: bool
    note: str = ""
    started_at: str
    finished_at: str
    smoke: bool
    candidate: Candidate
    compare: list[str] = []
    hardware: HardwareProfileRecord
    fingerprint: Fingerprint
    seed_schedule: dict[str, list[int]] = Field(default_factory=dict)  # revealed after the run
    # The timing settings a timed run used (evaluator.timing_config.TimingConfig, every field, the
    # overrides applied), so a page can say how its rows were timed; empty when no timing was
    # taken, and in results written before the engine recorded them (2026-12-05, before the
    # pre-call hold became the default: those were timed without it).
    timing: dict[str, Any] = Field(default_factory=dict)
    tasks: list[TaskResult]

    @property
    def all_correct(self) -> bool:
        return bool(self.tasks) and all(t.status == "correct" for t in self.tasks)


class ChildReport(_Model):
    """One line on the child's result channel: progress, or the final task result."""

    type: Literal["progress", "result"]
    workload: str = ""
    phase: str = ""
    done: int = 0
    total: int = 0
    result: TaskResult | None = None
    fingerprint: Fingerprint | None = None
