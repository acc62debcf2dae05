"""Was a bench result stopped by the task's time limit? Exit 0 if so, 1 if not (scripts/device_round.sh).

Why: the round gives its last task only the seconds left before the call's deadline. A result
stopped there is the deadline's doing, not a fact about the task, and must be benched again in
the next call rather than kept as the task's result. The task's time limit shows two ways: as the
candidate's timeout (``eval:user:timeout``), or, when a trusted provider (the baseline, the
expert) was running at that moment, as that provider's failure naming the task's time limit
(``eval:infra:trusted-provider``; session 12's qk-rmsnorm-rope).

Usage: python3 scripts/round_cut.py RESULT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIME_LIMIT = "time limit"


def cut_by_time_limit(result: dict) -> bool:
    """True when any task of the run ended on the task's time limit."""
    for task in result.get("tasks", []):
        code, reason = task.get("error_code") or "", task.get("reason") or ""
        if code == "eval:user:timeout" or (code == "eval:infra:trusted-provider" and TIME_LIMIT in reason):
            return True
    return False


def main() -> None:
    sys.exit(0 if cut_by_time_limit(json.loads(Path(sys.argv[1]).read_text())) else 1)


if __name__ == "__main__":
    main()
