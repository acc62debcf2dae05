"""The messages between the judge and a provider's worker process, as JSON lines.

The worker runs untrusted code, so everything it sends is treated as forged until validated:
the judge parses each line with these models (never with pickle, which would run code the
worker chose), checks that the reply answers the call it sent (``seq``), and believes nothing
in it that it can check itself. What the worker reports (its event times, its structural checks,
its ATen ops) is defence in depth; what the judge reads from its own memory (outputs copied into
slots it owns, inputs it can compare with its pristine copies) and its own clock are the checks
a candidate cannot forge.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Scalar = int | float | bool | str
LINE_CAP = 1 << 20  # bytes; a longer line from a worker is a protocol violation
#: How ``Done.autotune`` names an entry of a provider module's ``TIMED_CHOICES`` (the rest are
#: its Triton autotuners' picks, ``name [tuning key]``).
CHOICE_PREFIX = "choice "


def timed_choices_of(autotune: dict[str, str]) -> list[tuple[str, str]]:
    """(what was chosen, the pick) for each ``TIMED_CHOICES`` entry of a task's ``autotune`` report:
    the one reading of that report, for the results pages and the site."""
    return [(name.removeprefix(CHOICE_PREFIX), str(pick)) for name, pick in autotune.items()
            if name.startswith(CHOICE_PREFIX)]


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorRef(_Msg):
    """A tensor living in the shared arena: byte offset, shape, strides (elements), dtype name."""

    offset: int = Field(ge=0)
    shape: list[int]
    stride: list[int]
    dtype: str  # a key of evaluator.inputs.TORCH_DTYPES


class ProviderSpec(_Msg):
    """One callable the worker loads: a kernel file's entry point, or the baseline compiled."""

    path: str
    entry: str
    compile: bool = False  # torch.compile the function (the "compile" provider)


class OutputSpec(_Msg):
    name: str
    may_alias: str | None = None


class Setup(_Msg):
    """The first line a worker reads: what to load and where the shared arena is."""

    op: Literal["setup"] = "setup"
    device: Literal["cpu", "cuda"]
    arena_fd: int
    arena_size: int
    providers: dict[str, ProviderSpec]
    outputs: list[OutputSpec]
    inputs: list[str]  # tensor input names (for the aliasing check)
    flush_bytes: int = 0
    spin_us: float = 0.0  # timing_config.TimingConfig.spin_us
    record_ops: bool = True
    # ATen ops refused on every call (evaluator.op_block): the task's forbidden ops, in the workers
    # that run untrusted code; empty for the trusted ones.
    forbidden_ops: list[str] = []


class Call(_Msg):
    """Run one provider once. ``mode``: check (poisoned allocator, ATen ops recorded), time
    (flush, events, device-wide sync), warm (time without counting). Every call copies the
    outputs into the judge's slots, so a checked timed call looks like any other."""

    op: Literal["call"] = "call"
    seq: int
    provider: str
    mode: Literal["check", "time", "warm"]
    args: dict[str, TensorRef | Scalar]
    outs: list[TensorRef]
    measure_peak: bool = False  # report the device memory the call allocated at its peak
    # Check calls only: record the ATen ops. Off for a workload's first call, where a kernel
    # compiles and times its own choices (autotuners, route picks): the recorder's per-op host cost
    # would time those choices, not the kernel (Judge.run_trial).
    record: bool = True


class Release(_Msg):
    """Hand the device memory the worker's caching allocator keeps back to the driver
    (``torch.cuda.empty_cache``); answered with a plain ``Done``. Sent between workloads, never
    between timed calls: the next call would then pay for fresh allocations inside its timed region."""

    op: Literal["release"] = "release"
    seq: int


class Quit(_Msg):
    op: Literal["quit"] = "quit"


class Ready(_Msg):
    type: Literal["ready"] = "ready"
    providers: list[str]


class LoadError(_Msg):
    type: Literal["load-error"] = "load-error"
    provider: str
    kind: Literal["import", "entry-point"]
    message: str


class Done(_Msg):
    """The worker's answer to one call."""

    type: Literal["done"] = "done"
    seq: int
    ok: bool  # the call returned and its outputs passed the structural checks
    rule: str = ""  # when not ok: exception, arity, type, shape, dtype, device, alias
    output: str = ""
    message: str = ""
    exc_type: str = ""
    device_ms: float = 0.0  # the worker's event (or CPU clock) time of the call
    ops: list[str] = []  # ATen ops recorded during a check call
    tampered: list[str] = []  # harness functions found replaced after the call
    autotune: dict[str, str] = {}
    peak_mem_bytes: int | None = None  # reported by the worker: informational, not a check


Reply = Ready | LoadError | Done
