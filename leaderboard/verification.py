"""Run the engine CLI on a task's expert kernel in a subprocess and read its verdict.

No database here: this is the only place the portal talks to the engine for reference checks,
and it does so through the documented CLI (``python -m evaluator check ... --json``), never by
importing the engine, so a kernel crash or hang stays in the child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from leaderboard.constants import VerificationStatus
from leaderboard.services import VerificationOutcome

#: How much of the engine's stderr a reason may quote.
_TAIL_CHARS = 2000


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _TAIL_CHARS else "..." + text[-_TAIL_CHARS:]


def check_command(expert: Path, slug: str, json_path: Path) -> list[str]:
    """The engine invocation for one expert kernel on the smoke workloads."""
    return [sys.executable, "-m", "evaluator", "check", str(expert), "--task", slug, "--smoke",
            "--quiet", "--json", str(json_path)]


def run_reference_check(slug: str, expert: Path, *, cwd: Path, timeout_s: float,
                        content_sha256: str = "") -> VerificationOutcome:
    """Run the engine and turn its exit status and JSON into an outcome.

    Exit 0/1 with a JSON result carries the engine's own status and reason; exit 2, a missing
    or unreadable JSON, or our timeout are infrastructure errors with the stderr tail as reason.
    """
    if not expert.is_file():
        return VerificationOutcome(VerificationStatus.ERROR, reason=f"expert kernel {expert} is missing",
                                   content_sha256=content_sha256)
    with tempfile.TemporaryDirectory(prefix="d2k-verify-") as tmp:
        json_path = Path(tmp) / "result.json"
        proc = subprocess.Popen(
            check_command(expert, slug, json_path), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the engine's own children die with it
            proc.communicate()
            return VerificationOutcome(VerificationStatus.TIMEOUT, reason=f"engine ran past {timeout_s:.0f} s",
                                       content_sha256=content_sha256)
        return _outcome(slug, proc.returncode, json_path, stderr, content_sha256)


def _outcome(slug: str, returncode: int, json_path: Path, stderr: str, sha: str) -> VerificationOutcome:
    if returncode not in (0, 1):
        return VerificationOutcome(VerificationStatus.ERROR, reason=f"engine exit {returncode}: {_tail(stderr)}",
                                   content_sha256=sha)
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
        task = next(t for t in data["tasks"] if t["slug"] == slug)
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        return VerificationOutcome(VerificationStatus.ERROR,
                                   reason=f"engine exit {returncode} without a readable result for {slug} "
                                          f"({exc.__class__.__name__}): {_tail(stderr)}",
                                   content_sha256=sha)
    reason = str(task.get("reason") or "")
    code = task.get("error_code")
    if code and code not in reason:
        reason = f"{code}: {reason}" if reason else str(code)
    return VerificationOutcome(str(task.get("status", "")), mode=str(data.get("mode", "")), reason=reason,
                               content_sha256=sha)
