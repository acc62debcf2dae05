"""The leaderboard's arithmetic over plain entries: rows, pairs and ablations.

Every number comes from :mod:`evaluator.scoring`; this module only decides *which* entries go
together: the suite a row is scored over (the whole catalogue, or one category's tasks), which
two submissions form a pair (PORTAL.md: same team, model, harness, budget, hardware and task set,
differing only in guidance), and which runs of one model make its ablation curve. It takes plain
dataclasses so that it is tested without a database; :mod:`leaderboard.selectors` builds them
from published rows only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from evaluator.scoring import (
    ABLATION_CONDITIONS,
    PairedComparison,
    SubmissionScore,
    TaskScore,
    ablation_curve,
    paired_comparison,
    submission_score,
)


@dataclass(frozen=True)
class Entry:
    """One published submission (or a reference row) as the leaderboard sees it."""

    key: str  # submission id, or "ref:eager" / "ref:compile" / "ref:expert"
    team: str
    model: str
    harness: str
    condition: str  # none | L1 | L1+L2 | L1+L2+L3 | reference
    budget: int
    hardware: str
    tasks: Mapping[str, TaskScore]  # attempted tasks only
    date: str = ""
    turns_used: int | None = None
    design_score: float | None = None
    implementation_score: float | None = None
    reference: bool = False

    @property
    def label(self) -> str:
        return self.model if self.reference else f"{self.model} · {self.condition}"

    def pair_key(self) -> tuple[str, str, str, int, str, frozenset[str]]:
        return (self.team, self.model, self.harness, self.budget, self.hardware, frozenset(self.tasks))


@dataclass(frozen=True)
class Row:
    entry: Entry
    score: SubmissionScore


@dataclass(frozen=True)
class Pair:
    unguided: Entry
    guided: Entry
    comparison: PairedComparison
    suite: tuple[str, ...] = field(default=())


def row(entry: Entry, suite: Sequence[str]) -> Row:
    """Score ``entry`` over ``suite``; its tasks outside the suite (another category) are left out."""
    tasks = {slug: s for slug, s in entry.tasks.items() if slug in suite}
    return Row(entry, submission_score(tasks, suite))


def rows(entries: Iterable[Entry], suite: Sequence[str]) -> list[Row]:
    """Rows sorted best first by Performance Score, then by correctness."""
    out = [row(e, suite) for e in entries]
    return sorted(out, key=lambda r: (-r.score.performance_score, -r.score.correct_count, r.entry.label))


def pairs(entries: Iterable[Entry], n_boot: int = 10_000) -> list[Pair]:
    """Every (unguided, guided) pair; with several runs per condition the latest of each is used.

    The comparison is over the pair's own task set: both sides attempted exactly those tasks.
    """
    latest: dict[tuple[object, ...], Entry] = {}
    for e in sorted((e for e in entries if not e.reference), key=lambda e: e.date):
        latest[(*e.pair_key(), e.condition)] = e
    out = []
    for (*key, condition), guided in latest.items():
        if condition == "none":
            continue
        unguided = latest.get((*key, "none"))
        if unguided is None:
            continue
        suite = tuple(sorted(guided.tasks))
        cmp = paired_comparison(dict(unguided.tasks), dict(guided.tasks), suite, n_boot=n_boot)
        out.append(Pair(unguided, guided, cmp, suite))
    return sorted(out, key=lambda p: (p.guided.model, ABLATION_CONDITIONS.index(p.guided.condition)))


def restrict(pair: Pair, suite: Sequence[str], n_boot: int = 10_000) -> Pair | None:
    """``pair`` compared over ``suite`` only (a subset of its own tasks, order kept), or None when
    no task is left: the score ratio, interval and tests are computed again over those tasks."""
    wanted = set(suite)
    kept = tuple(slug for slug in pair.suite if slug in wanted)
    if kept == pair.suite:
        return pair
    if not kept:
        return None
    unguided, guided = ({slug: e.tasks[slug] for slug in kept} for e in (pair.unguided, pair.guided))
    return Pair(pair.unguided, pair.guided, paired_comparison(unguided, guided, kept, n_boot=n_boot), kept)


def ablations(entries: Iterable[Entry], suite: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
    """Per (team, model, harness, budget, hardware, task set): Performance Score per condition, in order.

    Only groups with at least two conditions make a curve.
    """
    groups: dict[tuple[object, ...], dict[str, Entry]] = {}
    for e in sorted((e for e in entries if not e.reference), key=lambda e: e.date):
        groups.setdefault(e.pair_key(), {})[e.condition] = e
    curves = {}
    for key, by_cond in groups.items():
        if len(by_cond) < 2:
            continue
        scores = {c: row(e, suite).score.performance_score for c, e in by_cond.items()}
        label = f"{key[1]} ({key[0]})"
        curves[label] = ablation_curve(scores)
    return curves
