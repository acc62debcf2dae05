"""Transcript validation and the importers of other harnesses' logs."""

from __future__ import annotations

import json

import pytest

from agents import importers, transcript
from agents.transcript import Event, Footer, Header, Transcript, TranscriptError


def _header(**kw) -> Header:
    return Header(provider="openai", model="m", guidance="none", budget=kw.pop("budget", 10), task="silu-and-mul", **kw)


def _valid() -> Transcript:
    return Transcript(header=_header(), events=[
        Event(turn=0, role="user", content="task"),
        Event(turn=1, role="assistant", content="", tool_calls=[{"id": "c1", "name": "check", "arguments": "{}"}]),
        Event(turn=1, role="tool", tool_call_id="c1", content="correct"),
        Event(turn=2, role="assistant", content="done"),
    ], footer=Footer(stop_reason="done", turns_used=2))


def test_round_trip_and_schema() -> None:
    t = transcript.parse(_valid().dumps())
    assert t.turns_used == 2 and t.footer.stop_reason == "done"
    schema = transcript.json_schema()
    assert {"Header", "Event", "Footer"} <= set(schema["$defs"])


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda lines: lines[1:], "line 1: the first line must be the header"),
    (lambda lines: lines[:-1], "no footer"),
    (lambda lines: [*lines[:2], "{not json", *lines[2:]], "line 3: not JSON"),
    (lambda lines: [lines[0], lines[4], *lines[1:4], lines[5]], "turn 0 after turn 2"),
    (lambda lines: [*lines, lines[-1]], "nothing may follow the footer"),
    (lambda lines: [lines[0].replace('"guidance":"none"', '"guidance":"L4"'), *lines[1:]], "line 1: guidance"),
])
def test_bad_transcripts_are_refused_with_the_line(mutate, message) -> None:
    lines = _valid().dumps().splitlines()
    with pytest.raises(TranscriptError, match=message):
        transcript.parse("\n".join(mutate(lines)))


def test_budget_and_footer_totals_are_enforced() -> None:
    with pytest.raises(TranscriptError, match="budget is 1"):
        transcript.parse(_valid().dumps(), budget=1)
    bad = _valid().model_copy(update={"footer": Footer(stop_reason="done", turns_used=5)})
    with pytest.raises(TranscriptError, match="footer says 5"):
        transcript.parse(bad.dumps())
    with pytest.raises(TranscriptError, match="not UTF-8"):
        transcript.parse(b"\xff\xfe")


CHAT = {"messages": [
    {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "check", "arguments": "{\"smoke\": true}"}}],
     "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
    {"role": "tool", "tool_call_id": "call_1", "content": "correct"},
    {"role": "assistant", "content": "done"}]}
RESPONSES = {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]}],
             "output": [
                 {"type": "reasoning", "summary": []},
                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]},
                 {"type": "function_call", "call_id": "fc_1", "name": "check", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "fc_1", "output": "correct"},
                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]}
ANTHROPIC = {"system": "sys", "messages": [
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": [{"type": "text", "text": "checking"},
                                      {"type": "tool_use", "id": "tu_1", "name": "check", "input": {"smoke": True}}],
     "usage": {"input_tokens": 7, "output_tokens": 2}},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "correct"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]}]}


@pytest.mark.parametrize(("fmt", "log"), [("openai-chat", CHAT), ("openai-responses", RESPONSES),
                                          ("anthropic", ANTHROPIC)])
def test_importers_map_turns_tool_calls_and_results(fmt: str, log: dict) -> None:
    t = importers.import_log(json.dumps(log), fmt, _header())
    assert t.turns_used == 2 and t.footer.stop_reason == "imported"
    (call,) = [c for e in t.events if e.tool_calls for c in e.tool_calls]
    (result,) = [e for e in t.events if e.role == "tool"]
    assert call.name == "check" and result.tool_call_id == call.id and result.content == "correct"
    assert t.events[-1].content == "done"


def test_importers_refuse_what_they_do_not_understand() -> None:
    with pytest.raises(importers.ImportErrorBadLog, match="not JSON"):
        importers.import_log("{", "anthropic", _header())
    with pytest.raises(importers.ImportErrorBadLog, match="unknown role 'robot'"):
        importers.import_log(json.dumps({"messages": [{"role": "robot", "content": "x"}]}), "openai-chat", _header())
    with pytest.raises(TranscriptError, match="budget is 1"):
        importers.import_log(json.dumps(CHAT), "openai-chat", _header(budget=1))


def _lines(*events: dict, footer: dict | None = None) -> str:
    head = {"kind": "header", "provider": "p", "model": "m", "guidance": "none", "budget": 3, "task": "silu-and-mul"}
    foot = footer or {"kind": "footer", "stop_reason": "done",
                      "turns_used": max((e["turn"] for e in events), default=0)}
    return "\n".join(json.dumps(x) for x in (head, *({"kind": "event", **e} for e in events), foot))


def _said(turn: int, *calls: str, **usage: int) -> dict:
    e = {"turn": turn, "role": "assistant", "content": "x"}
    if calls:
        e["tool_calls"] = [{"id": c, "name": "check", "arguments": "{}"} for c in calls]
    if usage:
        e["usage"] = usage
    return e


@pytest.mark.parametrize(("text", "message"), [
    # fifty model responses all claiming turn 1 would pass a budget of 3 by the largest number
    (_lines(*[_said(1) for _ in range(50)]), "line 3: a model response numbered turn 1; it is response 2"),
    (_lines(_said(0)), "line 2: a model response numbered turn 0; it is response 1"),
    (_lines(_said(2)), "line 2: a model response numbered turn 2; it is response 1"),
    (_lines(_said(1, "c1"), {"turn": 2, "role": "tool", "tool_call_id": "c1", "content": "ok"}),
     "line 3: a tool event of turn 2 after model response 1"),
    (_lines(_said(1, "c1"), {"turn": 1, "role": "tool", "tool_call_id": "c9", "content": "ok"}),
     "line 3: a tool result for call 'c9', which turn 1's model response did not make"),
    (_lines(_said(1, "c1"), *[{"turn": 1, "role": "tool", "tool_call_id": "c1", "content": "ok"}] * 2),
     "line 4: a tool result for call 'c1'.*answered already"),
    (_lines(_said(1, input_tokens=500, output_tokens=20),
            footer={"kind": "footer", "stop_reason": "done", "turns_used": 1, "input_tokens": 999_999,
                    "output_tokens": 20}), "footer says 999,999 input tokens; the model responses' usage sums to 500"),
    (_lines(_said(1), footer={"kind": "footer", "stop_reason": "done", "turns_used": 1, "cost_usd": 3.5}),
     r"footer says a cost of \$3.5; the model responses' costs sum to \$0"),
])
def test_turns_and_totals_are_counted_not_claimed(text: str, message: str) -> None:
    with pytest.raises(TranscriptError, match=message):
        transcript.parse(text)


def test_a_consistent_transcript_with_usage_and_cost_passes_and_display_skips_the_structure_rules() -> None:
    good = _lines(_said(1, "c1", input_tokens=5, output_tokens=2), {"turn": 1, "role": "tool", "tool_call_id": "c1"},
                  {"turn": 1, "role": "user", "content": "more"}, _said(2, input_tokens=7, output_tokens=1),
                  footer={"kind": "footer", "stop_reason": "done", "turns_used": 2, "input_tokens": 12,
                          "output_tokens": 3})
    assert transcript.parse(good).turns_used == 2
    claimed = _lines(*[_said(1) for _ in range(5)])
    assert len(transcript.parse(claimed, strict=False).events) == 5  # a transcript stored before the rules shows


def test_import_states_the_guidance_version_or_refuses_a_bad_flag(tmp_path, capsys) -> None:
    """``python -m agents import --guidance-sha256``: the digest lands in the header; a value the
    transcript format refuses is a clear error naming the flag, and nothing is written."""
    from agents.cli import main

    log = tmp_path / "chat.json"
    log.write_text(json.dumps(CHAT))
    common = ["import", str(log), "--format", "openai-chat", "--task", "silu-and-mul", "--provider", "p",
              "--model", "m", "--guidance", "L1"]
    out = tmp_path / "t.jsonl"
    assert main([*common, "--guidance-sha256", "ab" * 32, "--out", str(out)]) == 0
    assert transcript.load(out).header.guidance_sha256 == "ab" * 32
    bad = tmp_path / "bad.jsonl"
    assert main([*common, "--guidance-sha256", "AB" * 32, "--budget", "0", "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--guidance-sha256:" in err and "--budget:" in err and not bad.exists()
