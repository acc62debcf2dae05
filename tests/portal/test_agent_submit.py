"""The reference agent end to end: a scripted model writes a kernel, the engine checks it, and
``python -m agents run --submit`` uploads the run folder through the REST API as a valid bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.cli import main as agents_main
from portal.submissions.models import Submission
from portal.teams.services import token_create
from tasks.registry import REPO_ROOT
from tests.agents.fake_llm import FakeLLM, Reply
from tests.portal.factories import make_team

pytestmark = pytest.mark.django_db(transaction=True)


def test_scripted_run_is_submitted_as_a_valid_bundle(live_server, catalogue, media, monkeypatch, tmp_path: Path,
                                                     capsys) -> None:
    team, owner = make_team("Agents")
    issued = token_create(team, name="agent", actor=owner)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("D2K_TOKEN", issued.secret)
    source = (REPO_ROOT / "references/silu-and-mul/expert.py").read_text()
    script = [Reply(tool_calls=[("write_kernel", {"source": source})]),
              Reply(tool_calls=[("check", {"smoke": True})]),
              Reply(text="done")]
    out = tmp_path / "run"
    with FakeLLM(script) as llm:
        code = agents_main(["run", "--provider", "openai", "--model", "scripted-1", "--base-url", f"{llm.url}/v1",
                            "--task", "silu-and-mul", "--guidance", "L1", "--turns", "10", "--out", str(out),
                            "--hardware", "cpu-interpret", "--submit", "--portal", live_server.url])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "silu-and-mul: done after 3 turn(s)" in printed and "submitted" in printed
    sub = Submission.objects.get(team=team)
    assert sub.guidance == "L1" and sub.hardware == "cpu-interpret" and sub.model.name == "scripted-1"
    (task,) = sub.tasks.select_related("task")
    assert task.task.slug == "silu-and-mul" and task.turns_used == 3 and task.transcript_sha256
    assert task.kernel_source == source
