"""An A/A check of the bench's timing: the same kernel timed twice in one run, as two providers.

On a GPU bench of an expert, the expert's code runs twice per workload: as the submitted
candidate and as the ``expert`` provider (a second worker, set up like the candidate's). The two
providers take turns in the same interleaved loop, so any difference between their figures is
the timing method's own spread: that is the smallest "candidate vs expert" difference the
leaderboard can call real. This script sets the two side by side per workload:

- the ratio of medians (candidate / expert), of first quartiles and of minima (whether a lower
  statistic than the median would agree better: if the whole distribution of one worker is
  shifted, only the minimum agrees);
- the spread the bench itself claims: the two ``rel_stderr`` combined
  (sqrt(a^2 + b^2)), and how many of those the log of the ratio is away (|z|);
- a summary for short and for long calls (``--short-ms``, by the expert's median);
- where the results record them (engine runs after session 9), each worker's median over the
  first and the second half of its timed calls, which shows whether one worker ran slower early.

Usage: python3 scripts/same_kernel_spread.py RESULT_JSON [RESULT_JSON ...] [--short-ms MS] > table.md
(bench results, as the engine writes them: one run each, or a merged suite.)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    task: str
    workload: str
    expert_median_us: float
    candidate_median_us: float
    expert_min_us: float
    candidate_min_us: float
    combined_stderr: float  # relative: the bench's own claim for the ratio of the medians
    halves_us: str = "—"  # "expert first/second · candidate first/second" medians, when recorded
    expert_q1_us: float = math.nan  # first quartiles (nan where a result lacks them)
    candidate_q1_us: float = math.nan

    @property
    def median_ratio(self) -> float:
        return self.candidate_median_us / self.expert_median_us

    @property
    def q1_ratio(self) -> float:
        return self.candidate_q1_us / self.expert_q1_us

    @property
    def min_ratio(self) -> float:
        return self.candidate_min_us / self.expert_min_us

    @property
    def z(self) -> float:
        """How many claimed standard errors the medians are apart (log ratio, so symmetric)."""
        return abs(math.log(self.median_ratio)) / self.combined_stderr if self.combined_stderr > 0 else math.inf


def pairs(suite: dict) -> list[Pair]:
    """Every workload timed with both an ``expert`` and a ``candidate`` provider, by expert median."""
    out = []
    for task in suite["tasks"]:
        for w in task["workloads"]:
            t = w.get("timings", {})
            if "expert" not in t or "candidate" not in t:
                continue
            e, c = t["expert"], t["candidate"]
            out.append(Pair(task["slug"], w["name"], e["median_ms"] * 1e3, c["median_ms"] * 1e3,
                            e["min_ms"] * 1e3, c["min_ms"] * 1e3, math.hypot(e["rel_stderr"], c["rel_stderr"]),
                            _halves(e, c), e.get("q1_ms", math.nan) * 1e3, c.get("q1_ms", math.nan) * 1e3))
    return sorted(out, key=lambda p: p.expert_median_us)


def _halves(expert: dict, candidate: dict) -> str:
    keys = ("median_first_half_ms", "median_second_half_ms")
    if any(t.get(k) is None for t in (expert, candidate) for k in keys):
        return "—"
    e1, e2, c1, c2 = (t[k] * 1e3 for t in (expert, candidate) for k in keys)
    return f"{e1:,.1f}/{e2:,.1f} · {c1:,.1f}/{c2:,.1f}"


@dataclass(frozen=True)
class Summary:
    label: str
    n: int
    worst_median_dev: float  # max |median ratio - 1|
    worst_q1_dev: float  # max |first-quartile ratio - 1| (nan: not recorded)
    worst_min_dev: float  # max |min ratio - 1|
    beyond_2se: int  # pairs whose medians are more than two claimed standard errors apart
    minima_within_1pct: int  # pairs whose minima agree within 1%
    typical: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the middle pair's |ratio - 1|: median, q1, minimum
    within_2pct: tuple[int, int] = (0, 0)  # pairs within 2%: by median, by first quartile


def summarize(label: str, group: list[Pair]) -> Summary:
    if not group:
        return Summary(label, 0, 0.0, 0.0, 0.0, 0, 0)
    return Summary(label, len(group), max(abs(p.median_ratio - 1) for p in group),
                   max((abs(p.q1_ratio - 1) for p in group), key=lambda d: -1.0 if math.isnan(d) else d),
                   max(abs(p.min_ratio - 1) for p in group), sum(p.z > 2 for p in group),
                   sum(abs(p.min_ratio - 1) <= 0.01 for p in group),
                   tuple(_middle([abs(r - 1) for r in ratios]) for ratios in (
                       [p.median_ratio for p in group], [p.q1_ratio for p in group], [p.min_ratio for p in group])),
                   (sum(abs(p.median_ratio - 1) <= 0.02 for p in group), sum(abs(p.q1_ratio - 1) <= 0.02 for p in group)))


def _middle(values: list[float]) -> float:
    """The median of the values recorded (nan where none is)."""
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def split(rows: list[Pair], short_ms: float) -> tuple[Summary, Summary]:
    """Short calls (expert median under ``short_ms``) and the rest."""
    short = [p for p in rows if p.expert_median_us < short_ms * 1e3]
    long = [p for p in rows if p.expert_median_us >= short_ms * 1e3]
    return (summarize(f"calls under {short_ms:g} ms", short), summarize(f"calls of {short_ms:g} ms or more", long))


def markdown(rows: list[Pair], short_ms: float) -> str:
    lines = ["| calls | pairs | largest median difference | largest first-quartile difference "
             "| largest minimum difference | medians more than 2 claimed standard errors apart | minima within 1% |",
             "|---|---|---|---|---|---|---|"]
    for s in split(rows, short_ms):
        lines.append(f"| {s.label} | {s.n} | {s.worst_median_dev:.1%} | {_pct(s.worst_q1_dev)} | {s.worst_min_dev:.1%} "
                     f"| {s.beyond_2se} of {s.n} | {s.minima_within_1pct} of {s.n} |")
    lines += ["", "| calls | the middle pair's difference: median / first quartile / minimum "
              "| pairs within 2%: by median / by first quartile |", "|---|---|---|"]
    for s in split(rows, short_ms):
        lines.append(f"| {s.label} | {' / '.join(_pct(d) for d in s.typical)} | {s.within_2pct[0]} / {s.within_2pct[1]} "
                     f"of {s.n} |")
    lines += ["", "| task | workload | expert median µs | candidate median µs | median ratio | claimed ± "
              "| apart (± units) | q1 ratio | expert min µs | candidate min µs | min ratio "
              "| medians by half µs (expert · candidate) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in rows:
        lines.append(
            f"| {p.task} | {p.workload} | {p.expert_median_us:,.1f} | {p.candidate_median_us:,.1f} | {p.median_ratio:.3f} "
            f"| {p.combined_stderr:.2%} | {p.z:.1f} | {_ratio(p.q1_ratio)} | {p.expert_min_us:,.1f} | {p.candidate_min_us:,.1f} | {p.min_ratio:.3f} "
            f"| {p.halves_us} |")
    return "\n".join(lines) + "\n"


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.1%}"


def _ratio(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--short-ms", type=float, default=0.5, help="calls shorter than this (expert median) are short")
    args = ap.parse_args(argv)
    rows = sorted((p for path in args.results for p in pairs(json.loads(path.read_text()))),
                  key=lambda p: p.expert_median_us)
    if not rows:
        print("no workload in these results has both an expert and a candidate timing", file=sys.stderr)
        return 1
    sys.stdout.write(markdown(rows, args.short_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
