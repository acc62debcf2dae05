"""The reference agent loop against a local server speaking both providers' wire formats.

The SDKs are the real ones and so is the engine: a scripted model writes the expert kernel of
silu-and-mul, the ``check`` tool runs the engine in Triton's interpreter, and the transcript that
comes out is validated by the same parser the portal uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents import transcript
from agents.loop import RunSpec, run_agent
from agents.providers import ProviderConfig, make_provider
from agents.tools import ToolBox
from tasks.registry import get_task
from tests.agents.fake_llm import Fail, FakeLLM, Reply

SLUG = "silu-and-mul"


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def _provider(kind: str, llm: FakeLLM, retries: int = 3):
    base = f"{llm.url}/v1" if kind == "openai" else llm.url
    return make_provider(ProviderConfig(provider=kind, model="scripted-1", base_url=base, timeout_s=30,
                                        max_retries=retries, backoff_s=0.01, backoff_cap_s=0.05))


def _box(tmp_path: Path, condition: str = "none") -> ToolBox:
    return ToolBox(task=get_task(SLUG), workdir=tmp_path / SLUG, condition=condition, interpret=True, timeout_s=300)


def _expert_source() -> str:
    return get_task(SLUG).expert_path.read_text()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_scripted_agent_writes_a_correct_kernel_checked_by_the_engine(kind: str, tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("read_file", {"path": "baseline.py"})]),
        Fail(429, retry_after="0"),  # transient: retried, costs no turn
        Reply(text="Writing the kernel.", tool_calls=[("write_kernel", {"source": _expert_source()})]),
        Fail(503),
        Reply(tool_calls=[("check", {"smoke": True})]),
        Reply(text="The kernel is correct; done."),
    ]
    with FakeLLM(script) as llm:
        out = run_agent(_provider(kind, llm), _box(tmp_path), RunSpec(kind, "scripted-1", budget=10))
    assert llm.remaining == 0
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 4
    assert out.footer.input_tokens == 400 and out.footer.output_tokens == 80
    t = transcript.load(out.transcript)
    tool_results = [e.content for e in t.events if e.role == "tool"]
    assert "def silu_and_mul" in tool_results[0]  # the baseline it read
    assert tool_results[1].startswith("wrote kernel.py")
    assert f"task {SLUG}: correct" in tool_results[2], tool_results[2]
    assert out.kernel is not None and out.kernel.read_text() == _expert_source()
    # the tool results went back to the model in its own wire format
    last_body = llm.requests[-1][1]
    if kind == "openai":
        assert [m["role"] for m in last_body["messages"]][:2] == ["system", "user"]
        assert any(m["role"] == "tool" and "correct" in m["content"] for m in last_body["messages"])
    else:
        blocks = [b for m in last_body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        assert any(b["type"] == "tool_result" and "correct" in b["content"] for b in blocks)


def test_budget_exhaustion_stops_the_run(tmp_path: Path) -> None:
    script = [Reply(tool_calls=[("read_file", {"path": "task.toml"})]) for _ in range(3)]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path), RunSpec("openai", "scripted-1", budget=2))
    assert out.footer.stop_reason == "budget" and out.footer.turns_used == 2 and llm.remaining == 1
    transcript.parse(out.transcript.read_bytes(), budget=2)


def test_a_priced_run_records_each_turns_cost_and_the_total(tmp_path: Path) -> None:
    """With a price (USD per million input and output tokens), every response's usage carries its
    cost and the footer the run's; without one, no cost is claimed."""
    script = [Reply(tool_calls=[("read_file", {"path": "task.toml"})]) for _ in range(3)]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path), RunSpec("openai", "scripted-1", budget=3,
                                                                          price=(3.0, 15.0)))
    t = transcript.load(out.transcript)
    costs = [e.usage.cost_usd for e in t.events if e.role == "assistant"]
    assert costs == [pytest.approx((100 * 3.0 + 20 * 15.0) / 1e6)] * 3  # the fake answers 100 in / 20 out
    assert out.footer.cost_usd == pytest.approx(sum(costs)) and t.footer.cost_usd == out.footer.cost_usd
    with FakeLLM(script[:1]) as llm:
        plain = run_agent(_provider("openai", llm), _box(tmp_path / "b"), RunSpec("openai", "scripted-1", budget=1))
    assert plain.footer.cost_usd is None
    assert all(e.usage.cost_usd is None for e in transcript.load(plain.transcript).events if e.usage)


def test_malformed_and_refused_tool_calls_get_error_results_and_the_run_goes_on(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("write_kernel", '{"source": "unterminated'), ("launch_missiles", {}),
                          ("read_file", {"path": "../../references/silu-and-mul/expert.py"}),
                          ("read_file", {"path": "guidance/L1.md"})]),
        Reply(text="giving up"),
    ]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path), RunSpec("openai", "scripted-1", budget=5))
    results = [e.content for e in transcript.load(out.transcript).events if e.role == "tool"]
    assert "not valid JSON" in results[0]
    assert "unknown tool 'launch_missiles'" in results[1]
    assert "not one of this task's public files" in results[2]
    assert "not one of this task's public files" in results[3]  # unguided: no guidance to read
    assert out.footer.stop_reason == "done" and out.kernel is None


def test_guided_run_may_read_its_guidance(tmp_path: Path) -> None:
    box = _box(tmp_path, condition="L1+L2")
    assert box.call("read_file", json.dumps({"path": "guidance/L2.md"})) == get_task(SLUG).guidance["L2"]
    assert "not one of" in box.call("read_file", json.dumps({"path": "guidance/L3.md"}))


def test_persistent_server_errors_end_the_run_as_provider_error(tmp_path: Path) -> None:
    with FakeLLM([Fail(500)] * 3) as llm:
        out = run_agent(_provider("anthropic", llm, retries=2), _box(tmp_path), RunSpec("anthropic", "scripted-1"))
    assert out.footer.stop_reason == "provider-error" and out.footer.turns_used == 0
    assert "500" in out.footer.message and llm.remaining == 0
    with FakeLLM([Fail(400), Reply(text="never reached")]) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path / "b"), RunSpec("openai", "scripted-1"))
    assert out.footer.stop_reason == "provider-error" and llm.remaining == 1  # a 400 is not retried


def test_a_crashed_run_resumes_from_its_transcript(tmp_path: Path) -> None:
    box = _box(tmp_path)
    with FakeLLM([Reply(tool_calls=[("read_file", {"path": "task.toml"})]), Reply(text="done")]) as llm:
        run_agent(_provider("openai", llm), box, RunSpec("openai", "scripted-1", budget=5))
    path = box.workdir / "transcript.jsonl"
    lines = path.read_text().splitlines()
    # Cut it as a crash would: the footer and the second turn gone, the first turn's tool result lost.
    path.write_text("\n".join(lines[:-3]) + "\n")
    with FakeLLM([Reply(tool_calls=[("read_file", {"path": "baseline.py"})]), Reply(text="done now")]) as llm:
        out = run_agent(_provider("openai", llm), box, RunSpec("openai", "scripted-1", budget=5), resume=True)
    t = transcript.load(out.transcript)
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 2
    assert [e.role for e in t.events] == ["system", "user", "assistant", "tool", "assistant"]
    # the resumed conversation was sent whole: system, task prompt, then the new turn's history
    assert len(llm.requests[0][1]["messages"]) == 2


def test_design_mode_offers_only_reading_and_saves_the_design(tmp_path: Path) -> None:
    box = ToolBox(task=get_task(SLUG), workdir=tmp_path / SLUG, interpret=True, design_mode=True)
    design = "## L1\nOne pass.\n## L2\nOne row per program.\n## L3\nVector loads."
    with FakeLLM([Reply(tool_calls=[("read_file", {"path": "baseline.py"})]), Reply(text=design)]) as llm:
        out = run_agent(_provider("anthropic", llm), box, RunSpec("anthropic", "scripted-1", mode="design"))
    assert [t["name"] for t in llm.requests[0][1]["tools"]] == ["read_file"]
    assert out.design is not None and out.design.read_text() == design and out.kernel is None
    assert transcript.load(out.transcript).header.mode == "design"


@pytest.mark.parametrize("condition", ["none", "L1+L2"])
def test_the_header_names_the_guidance_version_the_run_was_given(tmp_path: Path, condition: str) -> None:
    """A guided run's transcript states the digest of the guidance text in its prompt, so the site can
    tell which version the agent read after the guidance files change (docs/bundle-format.md)."""
    with FakeLLM([Reply(text="done")]) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path, condition=condition),
                        RunSpec("openai", "scripted-1", condition=condition, budget=5))
    header = transcript.load(out.transcript).header
    assert header.guidance == condition
    assert header.guidance_sha256 == get_task(SLUG).guidance_sha256(condition)
    assert bool(header.guidance_sha256) == (condition != "none")
