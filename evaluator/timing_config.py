"""The timing protocol's settings (EVALUATION.md, Timing): the stopping rule, the checked-call
sample, the flushes and the pre-call hold, and the escape thresholds.

A module of its own, without torch, so that the parent side of a run (evaluator/runner.py) can
record in each result the settings it was timed with, and the judge (evaluator/judge.py) read
them, from one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from evaluator import errors


@dataclass
class TimingConfig:
    """The stopping rule and its guards (EVALUATION.md, Timing)."""

    target_rel_stderr: float = 0.005
    min_count: int = 20
    max_count: int = 2000
    budget_s: float = 4.0  # device time per workload, all providers together
    # Wall time of the timing loop per workload. Short kernels never spend the device budget: the
    # loop then ran to max_count, 100 s for one workload on the H200 (fresh inputs for four
    # providers every round), where 20 s gives a median within a percent or two.
    wall_budget_s: float = 20.0
    warmup: int = 3
    check_probability: float = 0.1  # chance that a timed candidate call is also compared
    max_checks: int = 24  # checked timed calls per provider and workload, at most
    # Checked timed calls at least (the first round and rounds drawn from the first min_count),
    # however early the loop stops. Without it, a loop that converges at min_count rounds checks
    # about three calls, and a kernel wrong on a fifth of its timed calls escaped one time in two;
    # with the pre-call hold steadying the timings, the H100's cheat run checked only 3-4.
    min_checks: int = 6
    sets: int = 2  # input sets per provider, alternated, at most (every call gets fresh values anyway)
    # A workload keeps the fewest sets (at least one) whose bytes reach this, more than the L2 holds
    # (shm.rotation_sets): two copies of gigabytes of inputs in every worker's arena buy nothing.
    pool_bytes: int = 128 * 2**20
    # The longest one call of an optional provider may take, its compilation included (and never
    # more than half of what is left of the task's time); past it the provider is left untimed.
    optional_call_s: float = 180.0
    flush_bytes: int = 256 * 2**20  # written before every timed call to empty the L2
    judge_flush: bool = True  # the judge flushes too, so a worker that skips its flush gains nothing
    # A hold of every SM queued before the start event, in µs (0: none; evaluator/hold.py writes
    # the L2 flush, then waits on the GPU's timer in two 1,024-thread blocks per SM). The call's
    # launches queue behind it and the clocks are up when the timed work starts, so the events
    # time the kernels rather than the host's launches or an idle GPU's clock ramp, and no SM is
    # free for a side stream between the previous call and the start event. On the H100 (session
    # 12, docs/results/h100-spin-aa.md) two workers timing one kernel agreed within 0.9% with it,
    # against 5.9-14.5% without, its medians sat within 1% of their minima, and side_stream.py
    # was still rejected (docs/results/anti-cheat.md). On the CPU it does nothing.
    spin_us: float = 300.0
    fresh_inputs: bool = True  # new secret values for every call (False: each set keeps its first values)
    # Work that escapes the worker's timer shows on the judge's clock as a larger round trip
    # than the trusted providers' (same harness, same transfers): a finding above the first
    # pair of thresholds, a rejection above the second (fraction of the median, and ms).
    escape_finding: tuple[float, float] = (0.2, 0.03)
    escape_reject: tuple[float, float] = (0.5, 0.1)
    # A rejection also needs the excess above this fraction of the floor itself (the expert
    # twin's round-trip overhead): that overhead is mostly the worker's own per-call work (the
    # output copy, the op block's check), which differs between two processes of one set-up by
    # a share of its size. On an H100 in session 27 the twins' overheads of 1.5-2.2 ms differed by
    # up to 283 µs between two honest topk experts (docs/results/h100-runs/s27-ab-topk-shrinking.json,
    # W3), and the old w4a16 expert, run as the candidate, was rejected at 241 µs over its twin
    # (206 µs median, so above max(50%, 0.1 ms)). Above the finding thresholds it stays a finding;
    # the timer cheats of the corpus exceed the floor by milliseconds (docs/results/anti-cheat.md).
    escape_reject_of_floor: float = 0.25
    # A timing-integrity rejection is confirmed before it stands: the task is judged again, in a
    # fresh judge and fresh workers, up to this many times, and rejected only if every run is
    # (evaluator/runner.py, ``_confirmed``). A kernel that escapes the timer does so in every
    # process; the honest twins' spread does not repeat: on an H100 the w4a16 Gluon route was
    # rejected at 837 µs over its twin in session 28 and passed twice in session 29 with the same
    # roles, its twin's round trips then within 16-168 µs of its own. A result that stands after a
    # rerun is the rerun's, which passed every check, and says so in a finding.
    integrity_reruns: int = 1

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TimingConfig:
        """Overrides as they arrive through JSON (every number a float), cast to each field's type."""
        defaults = cls()
        unknown = set(values) - set(vars(defaults))
        if unknown:
            raise errors.EvaluatorError(f"unknown timing option(s): {', '.join(sorted(unknown))}")
        cast = {k: (tuple(v) if isinstance(getattr(defaults, k), tuple) else type(getattr(defaults, k))(v))
                for k, v in values.items()}
        return cls(**cast)

    def record(self) -> dict[str, Any]:
        """Every field, as a result stores it (tuples as lists, as JSON has them)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

