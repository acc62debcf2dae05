"""Several engine runs of one card as one result, task by task.

Why: the references are measured over several device calls (a call's deadline cuts a round; a
changed expert is benched again on its own), so one card's results live in many files. The
results pages (scripts/results_page.py) and the leaderboard's reference rows
(leaderboard/board_queries.py) must both read them as one suite, with the same rule: for each
task, the result of the latest run that has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from evaluator.result import RunResult


class MixedCards(ValueError):
    """Results of more than one hardware profile were given for one merge."""


def chronological(results: Sequence[RunResult]) -> list[RunResult]:
    """``results`` by when each run started (stable for equal times): the order of files on a
    command line or of rows in an import is not the order they were measured in."""
    return sorted(results, key=lambda r: datetime.fromisoformat(r.started_at))


def sources(results: Sequence[RunResult]) -> dict[str, RunResult]:
    """Task slug -> the run its merged result comes from: the latest, by start time, that has it."""
    latest: dict[str, RunResult] = {}
    for run in chronological(results):
        for t in run.tasks:
            latest[t.slug] = run
    return latest


def merge_runs(results: Sequence[RunResult], order: Sequence[str] = ()) -> RunResult:
    """One result from ``results``: a later run's task replaces an earlier one's, by start time.

    Every result must come from the same hardware profile: the speedups would survive a mix, but
    the SOL fractions and the ceilings they rest on would not. Tasks come in ``order`` (slugs),
    then any others in the order they were met. The run-level fields are the latest run's.
    """
    if not results:
        raise ValueError("nothing to merge")
    results = chronological(results)
    cards = sorted({r.hardware.name for r in results})
    if len(cards) > 1:
        raise MixedCards(f"these results come from different hardware profiles ({', '.join(cards)}); "
                         "merge one profile at a time")
    by_slug = {slug: next(t for t in run.tasks if t.slug == slug) for slug, run in sources(results).items()}
    listed = set(order)
    ranked = [s for s in order if s in by_slug] + [s for s in by_slug if s not in listed]
    return results[-1].model_copy(update={"tasks": [by_slug[s] for s in ranked]})
