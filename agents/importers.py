"""Convert logs of other harnesses into our transcript format (AGENTS.md, Transcript format).

Teams with their own harness upload what they already have: an OpenAI Chat Completions message
list, an OpenAI Responses item list, or an Anthropic Messages conversation. Each importer maps
one model response to one turn, keeps tool calls and results with their ids, carries usage where
the log has it, and ends with a footer whose stop reason is ``imported``. The result goes through
the same validator as everything else.
"""

from __future__ import annotations

import json
from typing import Any

from agents.transcript import Event, Footer, Header, ToolCall, Transcript, Usage, parse

FORMATS = ("openai-chat", "openai-responses", "anthropic")


class ImportErrorBadLog(ValueError):
    """The log is not in the format it was said to be in; the message says where."""


def _text(content: Any) -> str:
    """Text of a message content: a string, or a list of parts with text in them."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
        return "\n".join(out)
    raise ImportErrorBadLog(f"unexpected content of type {type(content).__name__}")


def _usage(raw: Any, inp: str, out: str) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(input_tokens=int(raw.get(inp, 0) or 0), output_tokens=int(raw.get(out, 0) or 0))


def _openai_chat(log: Any) -> list[Event]:
    messages = log.get("messages") if isinstance(log, dict) else log
    if not isinstance(messages, list):
        raise ImportErrorBadLog("expected a list of messages (or an object with 'messages')")
    events, turn = [], 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise ImportErrorBadLog(f"message {i}: not an object with a role")
        role = m["role"]
        if role in ("system", "developer"):
            events.append(Event(turn=turn, role="system", content=_text(m.get("content"))))
        elif role == "user":
            events.append(Event(turn=turn, role="user", content=_text(m.get("content"))))
        elif role == "assistant":
            turn += 1
            calls = [ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"].get("arguments", ""))
                     for c in m.get("tool_calls") or []]
            events.append(Event(turn=turn, role="assistant", content=_text(m.get("content")), tool_calls=calls or None,
                                usage=_usage(m.get("usage"), "prompt_tokens", "completion_tokens")))
        elif role == "tool":
            events.append(Event(turn=turn, role="tool", tool_call_id=str(m.get("tool_call_id", "")),
                                content=_text(m.get("content"))))
        else:
            raise ImportErrorBadLog(f"message {i}: unknown role {role!r}")
    return events


def _openai_responses(log: Any) -> list[Event]:
    items = list(log.get("input") or []) + list(log.get("output") or []) if isinstance(log, dict) else log
    if not isinstance(items, list):
        raise ImportErrorBadLog("expected a list of Responses items (or an object with 'input'/'output')")
    events: list[Event] = []
    turn = 0
    current: Event | None = None  # the assistant turn being assembled from message + function_call items
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise ImportErrorBadLog(f"item {i}: not an object")
        kind = it.get("type", "message")
        if kind == "message" and it.get("role") == "assistant":
            if current is None:
                turn += 1
                current = Event(turn=turn, role="assistant", content="")
                events.append(current)
            current.content += _text(it.get("content"))
        elif kind == "function_call":
            if current is None:
                turn += 1
                current = Event(turn=turn, role="assistant", content="")
                events.append(current)
            current.tool_calls = [*(current.tool_calls or []),
                                  ToolCall(id=str(it.get("call_id") or it.get("id")), name=it["name"],
                                           arguments=it.get("arguments", ""))]
        elif kind == "function_call_output":
            current = None
            events.append(Event(turn=turn, role="tool", tool_call_id=str(it.get("call_id", "")),
                                content=_text(it.get("output"))))
        elif kind == "message":
            current = None
            role = it.get("role")
            role = "system" if role in ("system", "developer") else "user"
            events.append(Event(turn=turn, role=role, content=_text(it.get("content"))))
        elif kind == "reasoning":
            continue  # summaries of hidden reasoning are not part of the conversation
        else:
            raise ImportErrorBadLog(f"item {i}: unknown type {kind!r}")
    return events


def _anthropic(log: Any) -> list[Event]:
    if not isinstance(log, dict) or not isinstance(log.get("messages"), list):
        raise ImportErrorBadLog("expected an object with 'messages' (and optionally 'system')")
    events: list[Event] = []
    if log.get("system"):
        events.append(Event(turn=0, role="system", content=_text(log["system"])))
    turn = 0
    for i, m in enumerate(log["messages"]):
        role, content = m.get("role"), m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ImportErrorBadLog(f"message {i}: content is neither text nor blocks")
        if role == "assistant":
            turn += 1
            calls = [ToolCall(id=b["id"], name=b["name"], arguments=json.dumps(b.get("input", {})))
                     for b in blocks if b.get("type") == "tool_use"]
            text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
            events.append(Event(turn=turn, role="assistant", content=text, tool_calls=calls or None,
                                usage=_usage(m.get("usage"), "input_tokens", "output_tokens")))
        elif role == "user":
            text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
            if text:
                events.append(Event(turn=turn, role="user", content=text))
            for b in blocks:
                if b.get("type") == "tool_result":
                    events.append(Event(turn=turn, role="tool", tool_call_id=str(b.get("tool_use_id", "")),
                                        content=_text(b.get("content"))))
        else:
            raise ImportErrorBadLog(f"message {i}: unknown role {role!r}")
    return events


def import_log(raw: str | bytes, fmt: str, header: Header) -> Transcript:
    """Convert a log in format ``fmt`` to a validated :class:`Transcript` under ``header``."""
    if fmt not in FORMATS:
        raise ImportErrorBadLog(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    try:
        log = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImportErrorBadLog(f"the log is not JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        events = {"openai-chat": _openai_chat, "openai-responses": _openai_responses, "anthropic": _anthropic}[fmt](log)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ImportErrorBadLog(f"the log does not look like {fmt}: missing or wrong field {exc}") from None
    turns = max((e.turn for e in events), default=0)
    tokens_in = sum(e.usage.input_tokens for e in events if e.usage)
    tokens_out = sum(e.usage.output_tokens for e in events if e.usage)
    t = Transcript(header=header, events=events,
                   footer=Footer(stop_reason="imported", turns_used=turns, input_tokens=tokens_in,
                                 output_tokens=tokens_out))
    return parse(t.dumps())  # the one validator: budget, order, footer totals
