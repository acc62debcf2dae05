"""Anthropic Messages with tool use, through the official ``anthropic`` SDK."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from agents.providers.base import ModelReply, ProviderConfig, ToolSpec, with_retries
from agents.transcript import Event, ToolCall, Usage


def _tool_input(arguments: str) -> dict[str, Any]:
    """Anthropic wants the input as an object; a malformed one from another provider is kept as text."""
    try:
        value = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def to_messages(history: list[Event]) -> list[dict[str, Any]]:
    """The neutral history as Messages turns: tool results of one turn go back in one user message."""
    messages: list[dict[str, Any]] = []
    for e in history:
        if e.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": e.content}] if e.content else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
                       for c in e.tool_calls or []]
            messages.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(no content)"}]})
        elif e.role == "tool":
            block = {"type": "tool_result", "tool_use_id": e.tool_call_id or "", "content": e.content}
            if messages and messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        elif e.role == "user":
            messages.append({"role": "user", "content": e.content})
    return messages


class AnthropicProvider:
    def __init__(self, config: ProviderConfig):
        self.config = config
        self.client = anthropic.Anthropic(api_key=config.api_key(), base_url=config.base_url,
                                          timeout=config.timeout_s, max_retries=0)

    def complete(self, system: str, history: list[Event], tools: list[ToolSpec]) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "system": system,
            "messages": to_messages(history),
            "max_tokens": self.config.max_tokens,
        }
        if tools:
            kwargs["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                               for t in tools]
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        resp, retries = with_retries(self.config, lambda: self.client.messages.create(**kwargs))
        text = "".join(b.text for b in resp.content if b.type == "text")
        calls = [ToolCall(id=b.id, name=b.name, arguments=json.dumps(b.input)) for b in resp.content
                 if b.type == "tool_use"]
        usage = Usage(input_tokens=resp.usage.input_tokens or 0, output_tokens=resp.usage.output_tokens or 0)
        return ModelReply(content=text, tool_calls=calls, usage=usage, stop=resp.stop_reason or "",
                          retries=retries, raw=json.loads(resp.model_dump_json()))
