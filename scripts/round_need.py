"""Seconds a task's bench should be given, from its finished rounds, for scripts/device_round.sh.

Why: a round gives its next task only the seconds left before the call's deadline. A task started
with less than it needs is stopped part-way, its result is set aside as cut, and every second it
ran is device time spent for nothing (session 35's second call: gated-delta-rule-chunked ran 248 s
of a 259 s remainder and was cut; the next call benched it in 221 s with its Triton kernels
already compiled). So before it shortens a task's limit, the round asks this script what the task
took before and defers the task to the next call when the remainder cannot hold that.

The estimate is the longer of the task's ``wall_s`` in the finished bench results committed for
it on either card (``docs/results/h100-runs/bench-<slug>.json`` and ``h200-runs/``: a bench's wall
time is mostly its fixed timing budgets, its correctness trials and its compiles, which change
with the code more than with the card, and an old row may predate a slower check), times
``FACTOR`` plus ``SLACK_S``: a committed round often ran with its Triton kernels compiled by an
earlier, cut attempt, and a fresh machine compiles them inside the bench. A result cut by a time
limit (``round_cut.cut_by_time_limit``) or without a ``wall_s`` says nothing and is skipped.
Erring long costs one more call on the warm machine; erring short costs the whole attempt.

Usage: python3 scripts/round_need.py SLUG [--results DIR]
Prints whole seconds, or 0 when no finished result is known (the round then tries the task).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from round_cut import cut_by_time_limit  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "docs/results"
#: Margin over the longest finished bench's wall time (see the module docstring).
FACTOR, SLACK_S = 1.25, 15.0
#: The directories of committed bench results, one per card kind.
RUN_DIRS = ("h100-runs", "h200-runs")


def longest_wall_s(slug: str, results: Path = RESULTS) -> float | None:
    """The longest bench wall time of ``slug`` among its finished results on the cards; None if none."""
    walls = []
    for name in RUN_DIRS:
        path = results / name / f"bench-{slug}.json"
        if not path.is_file():
            continue
        result = json.loads(path.read_text())
        if cut_by_time_limit(result):
            continue
        walls += [float(t["wall_s"]) for t in result.get("tasks", []) if t.get("slug") == slug and t.get("wall_s")]
    return max(walls, default=None)


def need_s(slug: str, results: Path = RESULTS) -> int:
    """Whole seconds to give ``slug``'s bench; 0 when nothing finished is known."""
    wall = longest_wall_s(slug, results)
    return 0 if wall is None else math.ceil(wall * FACTOR + SLACK_S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slug")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args()
    print(need_s(args.slug, args.results))


if __name__ == "__main__":
    main()
