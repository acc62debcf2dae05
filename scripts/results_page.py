"""Write a results page (docs/results/<name>.md) from one or more engine bench JSON results.

The per-workload table comes from :func:`evaluator.report.markdown`, the suite summary from
:mod:`evaluator.suite_report`; results of several device calls (each a ``RunResult``) are merged
task by task, later files replacing earlier ones for the same task.

Usage: python scripts/results_page.py OUT.md --command "..." RESULT.json [RESULT.json ...] [--json MERGED.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import report, suite_report  # noqa: E402
from evaluator.result import RunResult  # noqa: E402
from evaluator.result_merge import MixedCards, merge_runs, sources  # noqa: E402
from tasks.registry import load_tasks  # noqa: E402


def merge(results: list[RunResult]) -> RunResult:
    """One page's results, task by task, in the catalogue's order (evaluator/result_merge.py)."""
    return merge_runs(results, [t.slug for t in load_tasks().tasks])


def _grouped(results: list[RunResult], describe: Callable[[RunResult], str]) -> dict[str, list[str]]:
    """Each description of the runs that the merged page's tasks come from -> those tasks."""
    groups: dict[str, list[str]] = {}
    for slug, run in sources(results).items():
        groups.setdefault(describe(run), []).append(slug)
    return groups


def mixed_ceilings(results: list[RunResult]) -> str:
    """A note for the header when the merged tasks come from runs calibrated differently (the
    header shows the latest run's ceilings, and each row's SOL is its own run's), else ''."""
    groups = _grouped(results, report.ceilings_line)
    if len(groups) < 2:
        return ""
    return ("**The rows come from runs calibrated with different ceilings; each row's SOL fraction uses its "
            "own run's.** " + " ".join(f"{line}: {', '.join(sorted(slugs))}." for line, slugs in groups.items()))


def mixed_holds(results: list[RunResult]) -> str:
    """A note for the header when some rows were timed with the pre-call hold and some without
    (the header describes the latest run only), else ''."""
    groups = _grouped(results, report.hold_line)
    if len(groups) < 2:
        return ""
    return ("**The rows were not all timed the same way.** "
            + " ".join(f"{line.rstrip('.')}: {', '.join(sorted(slugs))}." for line, slugs in groups.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--command", required=True, help="the command that produced the results, for the page")
    ap.add_argument("--title", default="")
    ap.add_argument("--json", type=Path, help="also write the merged RunResult here")
    args = ap.parse_args()
    tree = load_tasks()
    results = [RunResult.model_validate(json.loads(p.read_text())) for p in args.results]
    changed = [line for r in results for line in suite_report.reroof(r, tree.tasks)]
    try:
        merged = merge(results)
    except MixedCards as exc:
        sys.exit(f"error: {exc}: " + ", ".join(f"{p} ({r.hardware.name})" for p, r in zip(args.results, results, strict=True)))
    dtypes = {f"{t.slug}/{w.name}": t.compute_dtype(w.params) for t in tree.tasks for w in t.workloads()}
    text = report.markdown(merged, args.command)
    if args.title:
        text = text.replace(text.splitlines()[0], f"# {args.title}", 1)
    for mixed in (mixed_ceilings(results), mixed_holds(results)):
        if mixed:
            intro = "Times are medians"
            text = text.replace(intro, mixed + "\n\n" + intro, 1)
    latency = frozenset(t.slug for t in tree.tasks if t.spec.roofline.bound == "latency")
    if changed:
        text += ("\n## SOL recomputed after the measurement\n\nThese workloads' SOL is recomputed from the "
                 "measured times with today's task formulas (see each task's notes) and today's rule for the "
                 "int8 ceiling (`evaluator.hardware.int8_at_fp8_rate`):\n\n"
                 + "".join(f"- {line}\n" for line in changed))
    hardware_of = {slug: run.hardware for slug, run in sources(results).items()}
    text += "\n" + suite_report.summary(merged, dtypes, all_slugs=tuple(t.slug for t in tree.tasks),
                                        latency=latency, hardware_of=hardware_of)
    args.out.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(merged.model_dump_json(indent=1), encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
