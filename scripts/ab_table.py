"""Print the before/after table of an A/B bench result (evaluator/ab_report.py), then what each
side chose by timing (its autotuners' picks and TIMED_CHOICES).

    python scripts/ab_table.py RESULT.json [--before candidate] [--after expert]

RESULT.json is ``python -m evaluator bench <earlier expert file> --task SLUG --compare expert
--json RESULT.json``: the earlier version is the candidate, the tree's expert the expert.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.ab_report import ab_rows, choice_rows, choices_markdown, markdown  # noqa: E402
from evaluator.result import RunResult  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", type=Path)
    ap.add_argument("--before", default="candidate", help="the provider timed before the change (default candidate)")
    ap.add_argument("--after", default="expert", help="the provider timed after it (default expert)")
    args = ap.parse_args()
    run = RunResult.model_validate(json.loads(args.result.read_text()))
    sys.stdout.write(markdown(ab_rows(run, args.before, args.after), args.before, args.after))
    if {args.before, args.after} == {"candidate", "expert"}:  # the two sides that report their picks
        picks = choices_markdown(choice_rows(run, args.before, args.after), args.before, args.after)
        sys.stdout.write(f"\n{picks}" if picks else "")


if __name__ == "__main__":
    main()
