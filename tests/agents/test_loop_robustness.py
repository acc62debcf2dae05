"""The loop under what real runs meet: design-only bundles, wrong-typed tool arguments, failing
tools, and replies cut off at the token limit or empty. The SDKs and the fake server are the real
ones of ``test_agent_loop.py``; transcripts are checked by the strict parser the portal uses."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest

from agents import transcript
from agents.bundle import build_bundle
from agents.cli import main
from agents.loop import RunSpec, run_agent
from agents.providers import ProviderConfig, make_provider
from agents.tools import ToolBox
from evaluator.manifest import parse_manifest
from tasks.registry import get_task
from tests.agents.fake_llm import FakeLLM, Reply

SLUG = "silu-and-mul"
CUT = {"openai": "length", "anthropic": "max_tokens"}


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def _provider(kind: str, llm: FakeLLM):
    base = f"{llm.url}/v1" if kind == "openai" else llm.url
    return make_provider(ProviderConfig(provider=kind, model="scripted-1", base_url=base, timeout_s=30,
                                        max_retries=1, backoff_s=0.01, backoff_cap_s=0.05))


def _box(tmp_path: Path, design: bool = False) -> ToolBox:
    return ToolBox(task=get_task(SLUG), workdir=tmp_path / SLUG, interpret=True, timeout_s=300, design_mode=design)


def _strict(path: Path, budget: int | None = None) -> transcript.Transcript:
    return transcript.parse(path.read_bytes(), budget=budget)  # strict: turns counted, totals summed


# 1. design-only runs make a bundle the portal accepts


def test_a_design_run_writes_a_manifest_and_bundle_the_portal_accepts(tmp_path: Path) -> None:
    design = "## L1\nOne pass.\n## L2\nOne row per program.\n## L3\nVector loads.\n"
    out = tmp_path / "run"
    script = [Reply(tool_calls=[("read_file", {"path": "baseline.py"})]), Reply(text=design)]
    with FakeLLM(script) as llm:
        rc = main(["run", "--provider", "anthropic", "--model", "scripted-1", "--base-url", llm.url,
                   "--max-retries", "1", "--task", SLUG, "--mode", "design", "--guidance", "L1",
                   "--turns", "7", "--out", str(out)])
    assert rc == 0 and llm.remaining == 0
    manifest, problems = parse_manifest((out / "submission.toml").read_bytes())
    assert problems == [] and manifest is not None
    assert manifest.mode == "design" and manifest.guidance == "L1" and manifest.budget == 7
    [entry] = manifest.entries()
    assert entry.slug == SLUG and entry.design == f"{SLUG}/design.md"
    assert entry.transcript == f"{SLUG}/transcript.jsonl"

    bundle = build_bundle(out)
    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        assert names == ["submission.toml", f"{SLUG}/design.md", f"{SLUG}/transcript.jsonl"]
        assert zf.read(entry.design).decode() == design
        t = transcript.parse(zf.read(entry.transcript), budget=manifest.budget)
        assert parse_manifest(zf.read("submission.toml"))[0] == manifest
    # what the portal's upload compares with the manifest (portal/submissions/transcripts.py)
    assert (t.header.task, t.header.guidance, t.header.mode, t.header.budget) == (SLUG, "L1", "design", 7)


def test_a_kernel_run_manifest_still_lists_slugs_and_bundles_only_kernels(tmp_path: Path) -> None:
    out = tmp_path / "run"
    (out / SLUG).mkdir(parents=True)
    (out / SLUG / "kernel.py").write_text("x = 1\n")
    (out / SLUG / "design.md").write_text("stray\n")  # not a design run: not bundled
    (out / "other-task").mkdir()
    (out / "other-task" / "transcript.jsonl").write_text("{}\n")  # no kernel: not listed, not bundled
    from agents.bundle import RunManifest, write_manifest

    assert write_manifest(out, RunManifest(model="m", provider="openai", guidance="none", budget=5)) == [SLUG]
    manifest, problems = parse_manifest((out / "submission.toml").read_bytes())
    assert problems == [] and manifest is not None and manifest.mode == "kernel" and manifest.tasks == [SLUG]
    with zipfile.ZipFile(build_bundle(out)) as zf:
        assert zf.namelist() == ["submission.toml", f"{SLUG}/kernel.py"]
    assert tomllib.loads((out / "submission.toml").read_text())["tasks"] == [SLUG]


# 2. wrong-typed arguments and failing tools are tool results, not crashes


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_wrong_typed_tool_arguments_get_error_results_and_the_run_goes_on(kind: str, tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[("write_kernel", {"source": None}), ("read_file", {"path": 5}),
                          ("check", {"smoke": "yes"}), ("bench", {"fast": True}), ("read_file", {})]),
        Reply(tool_calls=[("read_file", {"path": "task.toml"})]),
        Reply(text="done"),
    ]
    with FakeLLM(script) as llm:
        out = run_agent(_provider(kind, llm), _box(tmp_path), RunSpec(kind, "scripted-1", budget=5))
    assert llm.remaining == 0
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 3 and out.kernel is None
    results = [e.content for e in _strict(out.transcript).events if e.role == "tool"]
    assert results[0].startswith("error: bad arguments for write_kernel: source: None is not of type 'string'")
    assert results[1].startswith("error: bad arguments for read_file: path: 5 is not of type 'string'")
    assert results[2].startswith("error: bad arguments for check: smoke: 'yes' is not of type 'boolean'")
    assert results[3].startswith("error: bad arguments for bench: Additional properties are not allowed ('fast'")
    assert results[4].startswith("error: bad arguments for read_file: 'path' is a required property")
    assert not results[5].startswith("error") and SLUG in results[5]  # the next, well-formed call worked


def test_an_unexpected_tool_failure_is_a_tool_result_naming_the_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_engine(*args: object, **kwargs: object) -> None:
        raise RuntimeError("sandbox vanished")

    monkeypatch.setattr("agents.tools.run", broken_engine)
    source = get_task(SLUG).expert_path.read_text()
    script = [Reply(tool_calls=[("write_kernel", {"source": source})]), Reply(tool_calls=[("check", {})]),
              Reply(text="done")]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path), RunSpec("openai", "scripted-1", budget=5))
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 3
    results = [e.content for e in _strict(out.transcript).events if e.role == "tool"]
    assert results[1] == "error: check failed: RuntimeError: sandbox vanished"
    assert any(m.get("content") == results[1] for m in llm.requests[-1][1]["messages"])  # the model heard it


# 3. a reply cut off at the token limit, or empty, does not end the run as done


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_cut_off_and_empty_replies_are_sent_back_and_the_run_goes_on(kind: str, tmp_path: Path) -> None:
    script = [
        Reply(text="Let me think about the tiling: first", stop=CUT[kind], input_tokens=110, output_tokens=50),
        Reply(text="", input_tokens=120, output_tokens=0),
        Reply(tool_calls=[("read_file", {"path": "task.toml"})], input_tokens=130, output_tokens=7),
        Reply(text="Done.", input_tokens=140, output_tokens=3),
    ]
    with FakeLLM(script) as llm:
        out = run_agent(_provider(kind, llm), _box(tmp_path), RunSpec(kind, "scripted-1", budget=10, price=(1, 2)))
    assert llm.remaining == 0
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 4
    assert (out.footer.input_tokens, out.footer.output_tokens) == (500, 60)
    t = _strict(out.transcript, budget=10)
    assert [(e.role, e.turn) for e in t.events] == [
        ("system", 0), ("user", 0), ("assistant", 1), ("user", 1), ("assistant", 2), ("user", 2),
        ("assistant", 3), ("tool", 3), ("assistant", 4)]
    assert "cut off" in t.events[3].content and CUT[kind] in t.events[3].content
    assert "empty" in t.events[5].content
    # the provider passed each note on to the model as the last message of the next request
    for request, word in ((llm.requests[1][1], "cut off"), (llm.requests[2][1], "empty")):
        last = request["messages"][-1]
        assert last["role"] == "user" and word in last["content"]


def test_cut_off_replies_until_the_budget_end_the_run_as_budget(tmp_path: Path) -> None:
    script = [Reply(text="still going", stop="length") for _ in range(3)]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("openai", llm), _box(tmp_path), RunSpec("openai", "scripted-1", budget=3))
    assert out.footer.stop_reason == "budget" and out.footer.turns_used == 3 and llm.remaining == 0
    t = _strict(out.transcript, budget=3)
    assert t.events[-1].role == "assistant"  # no note after the last response: there is no turn left for it


def test_a_design_cut_off_at_the_token_limit_is_kept_whole(tmp_path: Path) -> None:
    script = [Reply(text="## L1\nOne pa", stop="max_tokens"), Reply(text="ss.\n## L2\nRows.\n")]
    with FakeLLM(script) as llm:
        out = run_agent(_provider("anthropic", llm), _box(tmp_path, design=True),
                        RunSpec("anthropic", "scripted-1", mode="design"))
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 2
    assert out.design is not None and out.design.read_text() == "## L1\nOne pass.\n## L2\nRows.\n"
    _strict(out.transcript)


def test_resume_after_a_crash_between_a_cut_off_reply_and_its_note(tmp_path: Path) -> None:
    box = _box(tmp_path)
    with FakeLLM([Reply(text="partial", stop="length"), Reply(text="done")]) as llm:
        run_agent(_provider("openai", llm), box, RunSpec("openai", "scripted-1", budget=5))
    path = box.workdir / "transcript.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:4]) + "\n")  # header, system, user, the cut-off reply: its note lost
    with FakeLLM([Reply(text="done again")]) as llm:
        out = run_agent(_provider("openai", llm), box, RunSpec("openai", "scripted-1", budget=5), resume=True)
    assert out.footer.stop_reason == "done" and out.footer.turns_used == 1
    assert [e.role for e in _strict(out.transcript).events] == ["system", "user", "assistant"]


def test_an_empty_reply_goes_back_to_openai_with_content() -> None:
    """Chat Completions accepts a null assistant content only beside tool calls."""
    from agents.providers.openai_chat import to_messages
    from agents.transcript import Event, ToolCall

    msgs = to_messages("sys", [Event(turn=1, role="assistant", content=""),
                               Event(turn=2, role="assistant", content="",
                                     tool_calls=[ToolCall(id="c", name="check", arguments="{}")])])
    assert msgs[1] == {"role": "assistant", "content": "(no content)"}
    assert msgs[2]["content"] is None and msgs[2]["tool_calls"][0]["id"] == "c"
