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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import errors  # noqa: E402

#: In the reason of a worker stopped by the task's deadline: "within the task's time limit" now,
#: "within the time limit" before session 12 (evaluator/workerproc.py); a per-call limit reads
#: "its limit of N s per call" instead.
TIME_LIMIT = "time limit"


def cut_by_time_limit(result: dict) -> bool:
    """True when any task of the run ended on the task's time limit."""
    for task in result.get("tasks", []):
        code, reason = task.get("error_code") or "", task.get("reason") or ""
        if code == errors.USER_TIMEOUT or (code == errors.INFRA_TRUSTED and TIME_LIMIT in reason):
            return True
    return False


def main() -> None:
    sys.exit(0 if cut_by_time_limit(json.loads(Path(sys.argv[1]).read_text())) else 1)


if __name__ == "__main__":
    main()
