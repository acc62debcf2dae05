"""The engine call of ``verify_reference_task``, against a fake ``evaluator`` package.

The fake sits in a temporary folder used as the subprocess's working directory, where
``python -m evaluator`` finds it before the real one; each mode exercises one branch of the CLI
contract (exit 0/1 with JSON, exit 2, no JSON, a hang).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from leaderboard import services
from leaderboard.constants import VerificationStatus
from leaderboard.models import Task
from leaderboard.verification import check_command, run_reference_check
from tests.portal.helpers import sync

FAKE_MAIN = '''
import json, sys, time
args = sys.argv[1:]
mode = open("mode.txt").read().strip()
out = args[args.index("--json") + 1]
slug = args[args.index("--task") + 1]
assert args[0] == "check" and "--smoke" in args
if mode == "hang":
    time.sleep(60)
if mode == "usage":
    print("evaluator: error: no such task", file=sys.stderr)
    sys.exit(2)
if mode == "nojson":
    sys.exit(0)
status = {"pass": "correct", "fail": "incorrect"}[mode]
json.dump({"schema_version": 1, "mode": "interpreter", "tasks": [
    {"slug": slug, "status": status, "reason": "" if status == "correct" else "S2: y differs",
     "error_code": None if status == "correct" else "eval:user:wrong", "workloads": []}]}, open(out, "w"))
sys.exit(0 if status == "correct" else 1)
'''


@pytest.fixture
def fake_engine(tmp_path: Path):
    (tmp_path / "evaluator").mkdir()
    (tmp_path / "evaluator" / "__init__.py").write_text("")
    (tmp_path / "evaluator" / "__main__.py").write_text(FAKE_MAIN)
    expert = tmp_path / "expert.py"
    expert.write_text("# kernel\n")

    def run(mode: str, timeout_s: float = 30):
        (tmp_path / "mode.txt").write_text(mode)
        return run_reference_check("t-slug", expert, cwd=tmp_path, timeout_s=timeout_s, content_sha256="ab" * 32)

    return run


def test_command_follows_the_cli_contract(tmp_path):
    cmd = check_command(Path("/x/expert.py"), "t-slug", tmp_path / "r.json")
    assert cmd[1:] == ["-m", "evaluator", "check", "/x/expert.py", "--task", "t-slug", "--smoke", "--quiet",
                       "--json", str(tmp_path / "r.json")]


def test_correct(fake_engine):
    outcome = fake_engine("pass")
    assert (outcome.status, outcome.mode, outcome.reason) == ("correct", "interpreter", "")
    assert outcome.content_sha256 == "ab" * 32


def test_incorrect_carries_code_and_reason(fake_engine):
    outcome = fake_engine("fail")
    assert outcome.status == "incorrect"
    assert outcome.reason == "eval:user:wrong: S2: y differs"


def test_usage_error_is_an_error_with_stderr(fake_engine):
    outcome = fake_engine("usage")
    assert outcome.status == "error"
    assert outcome.reason.startswith("engine exit 2") and "no such task" in outcome.reason


def test_exit_without_json_is_an_error(fake_engine):
    outcome = fake_engine("nojson")
    assert outcome.status == "error" and "without a readable result" in outcome.reason


def test_hang_is_killed_at_the_timeout(fake_engine):
    start = time.monotonic()
    outcome = fake_engine("hang", timeout_s=2)
    assert time.monotonic() - start < 15
    assert outcome.status == "timeout"


def test_missing_expert_is_an_error_without_running(tmp_path):
    outcome = run_reference_check("t", tmp_path / "nope.py", cwd=tmp_path, timeout_s=5)
    assert outcome.status == "error" and "missing" in outcome.reason


@pytest.mark.django_db
def test_record_verification_stores_and_flags_stale(task_tree):
    sync(task_tree())
    row = Task.objects.get()
    services.task_record_verification(row.slug, services.VerificationOutcome(
        "correct", mode="interpreter", content_sha256=row.content_sha256))
    row.refresh_from_db()
    assert (row.verification_status, row.verification_mode) == ("correct", "interpreter")
    assert row.verification_at is not None and not row.verification_is_stale
    Task.objects.update(content_sha256="0" * 64)
    row.refresh_from_db()
    assert row.verification_is_stale


@pytest.mark.django_db
def test_record_verification_rejects_unknown_status_and_unknown_task(task_tree):
    sync(task_tree())
    slug = Task.objects.get().slug
    services.task_record_verification(slug, services.VerificationOutcome("maybe", reason="?"))
    assert Task.objects.get().verification_status == VerificationStatus.ERROR
    assert "unknown engine status 'maybe'" in Task.objects.get().verification_reason
    assert services.task_record_verification("nope", services.VerificationOutcome("correct")) is None


def test_fake_result_matches_the_real_schema_keys():
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "result-schema.json").read_text())
    task_props = schema["$defs"]["TaskResult"]["properties"]
    assert {"slug", "status", "reason", "error_code", "workloads"} <= set(task_props)
    assert {"mode", "tasks", "schema_version"} <= set(schema["properties"])
