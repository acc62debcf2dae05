"""OpenAI Chat Completions with function tools, through the official ``openai`` SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

from agents.providers.base import ModelReply, ProviderConfig, ToolSpec, with_retries
from agents.transcript import Event, ToolCall, Usage


def to_messages(system: str, history: list[Event]) -> list[dict[str, Any]]:
    """The neutral history as Chat Completions messages."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for e in history:
        if e.role == "assistant":
            # Content may be null only beside tool calls: an empty reply (the loop sends it back to
            # the model) goes as a placeholder, as the Anthropic provider does, not as a 400.
            msg: dict[str, Any] = {"role": "assistant",
                                   "content": e.content or (None if e.tool_calls else "(no content)")}
            if e.tool_calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in e.tool_calls]
            messages.append(msg)
        elif e.role == "tool":
            messages.append({"role": "tool", "tool_call_id": e.tool_call_id or "", "content": e.content})
        elif e.role == "user":
            messages.append({"role": "user", "content": e.content})
    return messages


class OpenAIChatProvider:
    def __init__(self, config: ProviderConfig):
        self.config = config
        self.client = openai.OpenAI(api_key=config.api_key(), base_url=config.base_url,
                                    timeout=config.timeout_s, max_retries=0)

    def complete(self, system: str, history: list[Event], tools: list[ToolSpec]) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "messages": to_messages(system, history),
            "max_completion_tokens": self.config.max_tokens,
        }
        if tools:
            kwargs["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                                 "parameters": t.parameters}} for t in tools]
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        resp, retries = with_retries(self.config, lambda: self.client.chat.completions.create(**kwargs))
        choice = resp.choices[0]
        msg = choice.message
        calls = [ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
                 for c in (msg.tool_calls or []) if getattr(c, "function", None) is not None]
        usage = Usage(input_tokens=getattr(resp.usage, "prompt_tokens", 0) or 0,
                      output_tokens=getattr(resp.usage, "completion_tokens", 0) or 0)
        return ModelReply(content=msg.content or "", tool_calls=calls, usage=usage,
                          stop=choice.finish_reason or "", retries=retries, raw=json.loads(resp.model_dump_json()))
