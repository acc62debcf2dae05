"""The before/after table of an A/B run: an expert's earlier version timed against the current one.

How an expert change is measured here (docs/results/h100.md, sessions 18-21): the earlier file is
benched as the candidate with ``--compare expert``, so both versions run in one process pool on
one card, interleaved, and their ratio is a same-run figure. This module turns such a result into
the table the result pages quote, so no ratio is worked out by hand. Which provider is "before" is
the caller's to say: the candidate by default (the earlier file), the expert after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.result import RunResult
from evaluator.suite_report import table_cell


@dataclass(frozen=True)
class ABRow:
    task: str
    workload: str
    before_us: float | None
    after_us: float | None
    before_stderr: float | None  # relative standard error of the mean, as the bench reports it
    after_stderr: float | None
    correct: bool  # the workload's candidate passed its correctness trials

    @property
    def speedup(self) -> float | None:
        """before / after: above 1 where the change made the call faster."""
        if self.before_us is None or self.after_us is None or self.after_us <= 0:
            return None
        return self.before_us / self.after_us


def ab_rows(run: RunResult, before: str = "candidate", after: str = "expert") -> list[ABRow]:
    """One row per timed (non-smoke) workload of every task, in the run's order."""
    if before == after:
        raise ValueError("before and after must be two providers")
    rows = []
    for task in run.tasks:
        for w in task.workloads:
            if w.smoke:
                continue
            b, a = w.timings.get(before), w.timings.get(after)
            rows.append(ABRow(task.slug, w.name, b.median_ms * 1e3 if b else None, a.median_ms * 1e3 if a else None,
                              b.rel_stderr if b else None, a.rel_stderr if a else None, w.correct))
    return rows


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def markdown(rows: list[ABRow], before: str = "candidate", after: str = "expert") -> str:
    """The table, with a line that says which provider is which."""
    lines = [f"Before = the `{before}` timing, after = the `{after}` timing, one run; speedup = before / after.",
             "",
             "| task | workload | before µs | after µs | speedup | ± before | ± after | correct |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        speedup = "-" if r.speedup is None else f"{r.speedup:.2f}x"
        lines.append(f"| {r.task} | {r.workload} | {_us(r.before_us)} | {_us(r.after_us)} | {speedup} | "
                     f"{_pct(r.before_stderr)} | {_pct(r.after_stderr)} | {'yes' if r.correct else 'no'} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ChoiceRow:
    task: str
    what: str  # "tuner [key]" or "choice <key>", as the workers name them
    before: str  # "" where that side made no such choice
    after: str


def choice_rows(run: RunResult, before: str = "candidate", after: str = "expert") -> list[ChoiceRow]:
    """What each side chose by timing, per task: every autotuner pick and ``TIMED_CHOICES`` entry
    of either, side by side, so that an A/B table says which launch each version ran. Only the
    candidate and the expert report their picks (the candidate's ``autotune``, the expert's
    ``expert_autotune``); results from before the expert's were kept have none for it."""
    sides = {"candidate": lambda t: t.autotune, "expert": lambda t: t.expert_autotune}
    if before not in sides or after not in sides or before == after:
        raise ValueError("the picks are reported for the candidate and the expert only")
    rows = []
    for task in run.tasks:
        b, a = sides[before](task), sides[after](task)
        rows += [ChoiceRow(task.slug, what, b.get(what, ""), a.get(what, "")) for what in sorted(b.keys() | a.keys())]
    return rows


def choices_markdown(rows: list[ChoiceRow], before: str = "candidate", after: str = "expert") -> str:
    """The picks as a table ("-" where a side made no such choice); empty when neither reported any."""
    if not rows:
        return ""
    lines = [f"What each side chose by timing (before = `{before}`, after = `{after}`):", "",
             "| task | choice | before | after |", "|---|---|---|---|"]
    for r in rows:
        cells = [table_cell(c) or "-" for c in (r.what, r.before, r.after)]
        lines.append(f"| {r.task} | {cells[0]} | {cells[1]} | {cells[2]} |")
    return "\n".join(lines) + "\n"
